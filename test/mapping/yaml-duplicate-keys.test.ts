/** Duplicate keys are found in linear time (issue 25, item 5) and still reported at file:line:col with the key. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readYamlConfig } from '../../src/mapping/yaml-config.js';

const dir = mkdtempSync(join(tmpdir(), 'care-etl-yaml-dup-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function read(text: string) {
  const file = join(dir, 'm.yaml');
  writeFileSync(file, text);
  return readYamlConfig(file, { what: 'mapping' });
}

describe('readYamlConfig: duplicate keys', () => {
  it('a key repeated far into a large lookup is an error at its line:col naming the key', async () => {
    let text = 'lookups:\n  codes:\n';
    for (let i = 0; i < 30_000; i++) text += `    C${i}: v\n`;
    text += '    C17: again\n';
    const cfg = await read(text);
    expect(cfg.errors).toHaveLength(1);
    expect(cfg.errors[0]).toMatchObject({ code: 'yaml', location: { line: 30_003, column: 5 } });
    expect(cfg.errors[0]!.message).toBe('Map keys must be unique: `C17` appears twice (DUPLICATE_KEY)');
    expect(cfg.data).toBeUndefined();
  });

  it('keys of other types or in other maps are not duplicates; merge keys are allowed', async () => {
    const cfg = await read('a: { 1: x, "1": y }\nb: { 1: z }\nbase: &b { k: 1 }\nc: { <<: *b, m: 2 }\nd: { <<: *b, n: 2 }\n');
    expect(cfg.errors).toEqual([]);
  });

  it('every duplicate is reported, each once', async () => {
    const cfg = await read('a: 1\nb: 2\na: 3\nn:\n  x: 1\n  x: 2\n  x: 3\n');
    expect(cfg.errors.map((e) => [e.location?.line, e.message])).toEqual([
      [3, 'Map keys must be unique: `a` appears twice (DUPLICATE_KEY)'],
      [6, 'Map keys must be unique: `x` appears twice (DUPLICATE_KEY)'],
      [7, 'Map keys must be unique: `x` appears twice (DUPLICATE_KEY)'],
    ]);
  });
});
