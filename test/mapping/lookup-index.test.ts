import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DiskLookup } from '../../src/mapping/lookup-index.js';
import { isIndexedLookup } from '../../src/mapping/types.js';

let parent: string;
beforeEach(() => {
  parent = mkdtempSync(join(tmpdir(), 'care-etl-lookup-index-'));
});
afterEach(() => {
  rmSync(parent, { recursive: true, force: true });
});

describe('DiskLookup (a lookup table indexed on disk)', () => {
  it('builds in a private folder (0700) and file (0600), then leaves nothing on disk', () => {
    const t = DiskLookup.create({ many: false, parent });
    const dir = t.dir!;
    expect(readdirSync(parent)).toEqual([dir.slice(parent.length + 1)]);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, 'lookup.db')).mode & 0o777).toBe(0o600);
    t.add('a', JSON.stringify({ id: 'pr-1' }), 'line 1');
    t.finish();
    if (process.platform !== 'win32') expect(readdirSync(parent)).toEqual([]); // unlinked, still readable
    expect(t.get('a')).toEqual({ id: 'pr-1' });
    t.close();
    expect(readdirSync(parent)).toEqual([]);
  });

  it('one value per code: the same value again is ignored, a different one names the first origin', () => {
    const t = DiskLookup.create({ many: false, parent });
    expect(t.add('S', '"single"', 'row 2')).toEqual({});
    expect(t.add('S', '"single"', 'row 3')).toEqual({});
    expect(t.add('S', '"separated"', 'row 4')).toEqual({ duplicateOf: 'row 2' });
    expect(t.add('M', '"married"', 'row 5')).toEqual({});
    t.finish();
    expect([t.size, t.get('S'), t.get('M'), t.get('X'), t.has('M'), t.has('X')]).toEqual([2, 'single', 'married', undefined, true, false]);
    expect(t.sampleCodes(10)).toEqual(['M', 'S']);
    expect(isIndexedLookup(t)).toBe(true);
    t.close();
    t.close(); // idempotent
    expect(() => t.get('S')).toThrow(/closed/);
  });

  it('many: every value of a code, in the order added, across transaction batches', () => {
    const t = DiskLookup.create({ many: true, parent });
    for (let i = 0; i < 12_000; i++) t.add(String(i % 3), String(i), `line ${i + 1}`);
    t.finish();
    expect(t.size).toBe(3);
    const zeros = t.get('0') as number[];
    expect(zeros).toHaveLength(4000);
    expect(zeros.slice(0, 3)).toEqual([0, 3, 6]);
    expect(zeros.at(-1)).toBe(11_997);
    expect(t.get('7')).toBeUndefined();
    t.close();
  });
});
