import { spawnSync } from 'node:child_process';
import { afterAll, describe, expect, test } from 'vitest';
import { CareEtlError } from '../../src/core/issues.js';
import { checkSource, RECORD_MAX_DEPTH, RECORD_MAX_ITEMS, type SourceItem } from '../../src/sources/open-source.js';
import { recordBoundsViolation } from '../../src/sources/record-bounds.js';
import { collect, tempDir } from './helpers.js';

/*
 * Issue 12: deep nesting, huge arrays and huge text values are row-level rejects at the source, with their
 * line/record — not a stack overflow later (JSONata, ajv, the rejects writer) that ends the run; and
 * `checkSource` finds an unreadable source before anything is written.
 */

const tmp = tempDir();
afterAll(() => tmp.cleanup());

const deep = (n: number, leaf = '1'): string => '{"a":'.repeat(n) + leaf + '}'.repeat(n);
const where = (items: SourceItem[]) => items.map((i) => [i.ok, i.origin.line, i.origin.record, i.ok ? undefined : i.issues[0]!.code]);

describe('record bounds (NDJSON, JSON)', () => {
  test('a record nested 5,000 deep is a reject with its line; the lines after it are read', async () => {
    const path = tmp.write('deep.ndjson', `{"mrn":"1"}\n${deep(5000)}\n{"mrn":"3"}\n`);
    const items = await collect({ name: 'p', path });
    expect(where(items)).toEqual([
      [true, 1, 1, undefined],
      [false, 2, 2, 'value-too-large'],
      [true, 3, 3, undefined],
    ]);
    const r = items[1]!;
    if (r.ok) throw new Error('expected a reject');
    expect(r.issues[0]!.message).toBe(`record too large: nested deeper than ${RECORD_MAX_DEPTH} levels`);
    expect(r.raw).toBe(deep(5000));
  });

  test('nesting up to the bound is fine; one level more is not', () => {
    const nest = (n: number): unknown => {
      let v: unknown = 1;
      for (let i = 1; i < n; i++) v = { a: v };
      return { a: v };
    };
    expect(recordBoundsViolation(nest(RECORD_MAX_DEPTH))).toBeUndefined();
    expect(recordBoundsViolation(nest(RECORD_MAX_DEPTH + 1))).toBe(`nested deeper than ${RECORD_MAX_DEPTH} levels`);
    expect(recordBoundsViolation({ a: [[[[1]]]] }, { maxDepth: 4, maxItems: 10, maxTextChars: 10 })).toBe('nested deeper than 4 levels');
  });

  test('huge arrays, objects and text values are rejects', () => {
    const bounds = { maxDepth: 10, maxItems: 3, maxTextChars: 5 };
    expect(recordBoundsViolation({ a: [1, 2, 3] }, bounds)).toBeUndefined();
    expect(recordBoundsViolation({ a: [1, 2, 3, 4] }, bounds)).toBe('an array has more than 3 items');
    expect(recordBoundsViolation({ a: 1, b: 2, c: 3, d: 4 }, bounds)).toBe('an object has more than 3 members');
    expect(recordBoundsViolation({ a: '123456' }, bounds)).toBe('a text value is longer than 5 characters');
    expect(recordBoundsViolation({ a: [{ b: '123456' }] }, bounds)).toBe('a text value is longer than 5 characters');
    expect(recordBoundsViolation({ '123456': 1 }, bounds)).toBe('a key is longer than 5 characters');
  });

  test(`an NDJSON array of more than ${RECORD_MAX_ITEMS} items is a reject`, async () => {
    const path = tmp.write('wide.ndjson', `{"a":[${'0,'.repeat(RECORD_MAX_ITEMS)}0]}\n{"b":1}\n`);
    expect(where(await collect({ name: 'p', path }))).toEqual([
      [false, 1, 1, 'value-too-large'],
      [true, 2, 2, undefined],
    ]);
  });

  test('a JSON element nested 5,000 deep is a reject with its record number; later elements are read', async () => {
    const path = tmp.write('deep.json', `[{"mrn":"1"},${deep(5000)},{"mrn":"3"}]`);
    const items = await collect({ name: 'p', path });
    expect(where(items)).toEqual([
      [true, undefined, 1, undefined],
      [false, undefined, 2, 'value-too-large'],
      [true, undefined, 3, undefined],
    ]);
    const r = items[1]!;
    if (r.ok) throw new Error('expected a reject');
    expect(r.issues[0]!.message).toBe(`element 1 of the records array is too large: nested deeper than ${RECORD_MAX_DEPTH} levels`);
    expect(r.raw).toBeUndefined(); // JSON.stringify cannot write it back: no raw rather than a crash
  });
});

describe('checkSource: every source checked before anything is written', () => {
  const fatalOf = async (p: Promise<void>): Promise<CareEtlError> => {
    const err = await p.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CareEtlError);
    return err as CareEtlError;
  };

  test('readable sources of every format pass; rows that would be rejected are not errors', async () => {
    await checkSource({ name: 'a', path: tmp.write('ok.csv', 'id,v\n1,"bad\n2,b\n') });
    await checkSource({ name: 'b', path: tmp.write('ok.ndjson', 'not json\n{"a":1}\n') });
    await checkSource({ name: 'c', path: tmp.write('ok.json', '[1, {"a":1}]') });
    await checkSource({ name: 'd', path: tmp.write('empty.csv', '') });
    await checkSource({ name: 'e', path: tmp.write('cols.csv', '1,2\n'), csv: { columns: ['a', 'b'] } });
  });

  test('a missing file, a directory, a bad header, a broken JSON document, bad options: fatal (exit 2)', async () => {
    const missing = await fatalOf(checkSource({ name: 'gone', path: tmp.path('nope.csv') }));
    expect(missing.exitCode).toBe(2);
    expect(missing.issues[0]).toMatchObject({ code: 'source-not-found' });
    expect((await fatalOf(checkSource({ name: 'dir', path: tmp.path(''), format: 'csv' }))).message).toContain('not a regular file');
    expect((await fatalOf(checkSource({ name: 'h', path: tmp.write('dup.csv', 'a,a\n1,2\n') }))).message).toContain('duplicate column name "a"');
    expect((await fatalOf(checkSource({ name: 'j', path: tmp.write('bad.json', '[{"a":1},{"a":') }))).issues[0]?.code).toBe('json-syntax');
    expect((await fatalOf(checkSource({ name: 'r', path: tmp.write('rec.json', '{"x":[]}'), records: 'staff' }))).issues[0]?.code).toBe('json-records');
    expect((await fatalOf(checkSource({ name: 'o', path: tmp.write('o.csv', 'a\n'), csv: { delimiter: '' } }))).issues[0]?.code).toBe('source-config');
    expect((await fatalOf(checkSource({ name: 'f', path: tmp.write('x.bin', 'a') }))).issues[0]?.code).toBe('source-config');
  });

  test('a FIFO is checked for access only (reading it would consume it)', async () => {
    const path = tmp.path('pipe.csv');
    if (spawnSync('mkfifo', [path]).status !== 0) return; // no mkfifo on this platform
    await checkSource({ name: 'fifo', path }); // does not block: never opened
  });
});
