import { spawn, spawnSync } from 'node:child_process';
import { afterAll, describe, expect, test } from 'vitest';
import { CareEtlError } from '../../src/core/issues.js';
import { parsePlainPath } from '../../src/sources/json-records-path.js';
import { openSource, readHeader, type SourceConfig } from '../../src/sources/open-source.js';
import { brief, collect, fixture, tempDir } from './helpers.js';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

async function fatal(cfg: SourceConfig): Promise<CareEtlError> {
  const err = await collect(cfg).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CareEtlError);
  expect((err as CareEtlError).exitCode).toBe(2);
  return err as CareEtlError;
}

describe('JSON: streamed paths', () => {
  test('array at `staff`; origin has the element number and no line', async () => {
    const items = await collect({ name: 'staff', path: fixture('staff.json'), records: 'staff' });
    expect(brief(items)).toEqual([
      { ok: true, line: undefined, record: 1, data: { id: 'S001', name: 'Dr. Who', npi: '0012345678' } },
      { ok: true, line: undefined, record: 2, data: { id: 'S002', name: 'Dr. Strange', npi: '0098765432' } },
    ]);
    expect(items[0].origin).toEqual({ source: 'staff', file: fixture('staff.json'), record: 1 });
  });

  test('nested path `data.patients`: non-object elements are rejected, the rest comes through', async () => {
    const items = await collect({ name: 'patients', path: fixture('nested.json'), records: 'data.patients' });
    expect(brief(items)).toEqual([
      { ok: true, line: undefined, record: 1, data: { mrn: '00123', active: true } },
      { ok: false, line: undefined, record: 2, code: 'not-object', message: 'element 1 of the records array is a number, not an object', raw: '42' },
      { ok: true, line: undefined, record: 3, data: { mrn: '00124', active: false } },
      { ok: false, line: undefined, record: 4, code: 'not-object', message: 'element 3 of the records array is null, not an object', raw: 'null' },
      {
        ok: false,
        line: undefined,
        record: 5,
        code: 'not-object',
        message: 'element 4 of the records array is an array, not an object',
        raw: '["not","an","object"]',
      },
      { ok: true, line: undefined, record: 6, data: { mrn: '00125', active: true } },
    ]);
    const reject = items[1];
    if (!reject.ok) expect(reject.issues[0].location).toEqual({ file: fixture('nested.json'), line: undefined, record: 2 });
  });

  test('array indexes in the path: `data.clinics[0].patients` and `data.clinics.0.patients`', async () => {
    for (const records of ['data.clinics[0].patients', 'data.clinics.0.patients']) {
      expect(brief(await collect({ name: 'p', path: fixture('nested.json'), records }))).toEqual([
        { ok: true, line: undefined, record: 1, data: { mrn: 'N1' } },
      ]);
    }
  });

  test('`entry.resource` of a FHIR Bundle: a path through an array is read as JSONata would (one record per entry)', async () => {
    const items = await collect({ name: 'p', path: fixture('bundle.json'), records: 'entry.resource' });
    expect(brief(items)).toEqual([
      { ok: true, line: undefined, record: 1, data: { resourceType: 'Patient', id: 'p1', name: [{ family: 'Ng' }] } },
      { ok: true, line: undefined, record: 2, data: { resourceType: 'Patient', id: 'p2', gender: 'female' } },
    ]);
  });

  test('`entry.resource` from a FIFO: read once (a second open would wait for a writer that is gone), so it says not found', async () => {
    const path = tmp.path('bundle-pipe.json');
    if (spawnSync('mkfifo', [path]).status !== 0) return; // no mkfifo on this platform
    const writer = spawn('sh', ['-c', 'cat "$0" > "$1"', fixture('bundle.json'), path], { stdio: 'ignore' });
    try {
      const err = await fatal({ name: 'p', path, records: 'entry.resource' });
      expect(err.message).toContain('`records: entry.resource` not found in the document');
    } finally {
      writer.kill();
    }
  });

  test('a path that really is missing still says so', async () => {
    const err = await fatal({ name: 'p', path: fixture('bundle.json'), records: 'entries.resource' });
    expect(err.message).toContain('`records: entries.resource` not found in the document');
  });

  test('top-level array (no `records`); nested values kept', async () => {
    expect(brief(await collect({ name: 'p', path: fixture('array.json') }))).toEqual([
      { ok: true, line: undefined, record: 1, data: { mrn: '00123', name: 'Ada', visits: [{ date: '2024-01-01' }] } },
      { ok: true, line: undefined, record: 2, data: { mrn: '00124', name: 'Alan' } },
    ]);
  });

  test('a UTF-8 BOM before the document is accepted', async () => {
    const path = tmp.write('bom.json', '\ufeff[{"a":"é"}]');
    expect(brief(await collect({ name: 'p', path }))).toEqual([{ ok: true, line: undefined, record: 1, data: { a: 'é' } }]);
  });

  test('an empty array yields nothing', async () => {
    const path = tmp.write('empty-array.json', '{"staff": []}');
    expect(await collect({ name: 'p', path, records: 'staff' })).toEqual([]);
  });

  test('`records` not an array → fatal naming the file and `records`', async () => {
    const err = await fatal({ name: 'staff', path: fixture('not-array.json'), records: 'staff' });
    expect(err.message).toBe(`Source \`staff\`: ${fixture('not-array.json')}: \`records: staff\` is an object, not an array`);
    expect(err.issues[0]).toMatchObject({ severity: 'fatal', code: 'json-records' });
    const count = await fatal({ name: 'staff', path: fixture('not-array.json'), records: 'count' });
    expect(count.message).toContain('`records: count` is a number, not an array');
  });

  test('top-level value not an array → fatal with a hint to set `records`', async () => {
    const err = await fatal({ name: 'staff', path: fixture('staff.json') });
    expect(err.message).toContain('the top-level value is not an array');
    expect(err.hint).toContain('records');
  });

  test('a missing path → fatal', async () => {
    const err = await fatal({ name: 'staff', path: fixture('staff.json'), records: 'employees' });
    expect(err.message).toBe(`Source \`staff\`: ${fixture('staff.json')}: \`records: employees\` not found in the document`);
    const deep = await fatal({ name: 'p', path: fixture('nested.json'), records: 'data.patients.mrn' });
    expect(deep.message).toContain('not found');
  });

  test('invalid JSON → fatal naming how far reading got', async () => {
    const path = tmp.write('broken.json', '[{"a":1},{"a":2},{"a":]');
    const items: unknown[] = [];
    const err = await (async () => {
      for await (const item of openSource({ name: 'p', path })) items.push(item);
    })().catch((e: unknown) => e);
    // elements parsed in the same chunk as the error may not be delivered: the file is fatal anyway
    expect(items.length).toBeLessThanOrEqual(2);
    expect(err).toBeInstanceOf(CareEtlError);
    expect((err as CareEtlError).message).toMatch(/invalid JSON (after record \d|before the first record): unexpected token '\]'/);
    expect((err as CareEtlError).issues[0]).toMatchObject({ code: 'json-syntax', location: { file: path, record: items.length + 1 } });
  });

  test('many elements stream in order', async () => {
    const n = 20_000;
    const path = tmp.write('many.json', JSON.stringify({ data: { rows: Array.from({ length: n }, (_, i) => ({ i })) } }));
    let count = 0;
    for await (const item of openSource({ name: 'p', path, records: 'data.rows' })) {
      if (!item.ok || item.data.i !== count || item.origin.record !== count + 1) throw new Error(`bad item ${count}`);
      count++;
    }
    expect(count).toBe(n);
  });
});

describe('JSON: JSONata expressions (whole file)', () => {
  test('a filter expression is evaluated with jsonata', async () => {
    const items = await collect({ name: 'p', path: fixture('nested.json'), records: 'data.patients[active = true]' });
    expect(brief(items)).toEqual([
      { ok: true, line: undefined, record: 1, data: { mrn: '00123', active: true } },
      { ok: true, line: undefined, record: 2, data: { mrn: '00125', active: true } },
    ]);
  });

  test('a single match counts as one record; JSONata array mapping works', async () => {
    expect(brief(await collect({ name: 'p', path: fixture('nested.json'), records: 'data.patients[mrn = "00124"]' }))).toEqual([
      { ok: true, line: undefined, record: 1, data: { mrn: '00124', active: false } },
    ]);
    expect(brief(await collect({ name: 'p', path: fixture('nested.json'), records: '$.data.clinics.patients' }))).toEqual([
      { ok: true, line: undefined, record: 1, data: { mrn: 'N1' } },
    ]);
  });

  test('no match → fatal; `[ … ]` gives an empty list instead', async () => {
    const err = await fatal({ name: 'p', path: fixture('nested.json'), records: 'data.patients[mrn = "x"]' });
    expect(err.message).toContain('matched nothing');
    expect(await collect({ name: 'p', path: fixture('nested.json'), records: '[data.patients[mrn = "x"]]' })).toEqual([]);
  });

  test('an invalid expression → fatal', async () => {
    const err = await fatal({ name: 'p', path: fixture('nested.json'), records: 'data.patients[' });
    expect(err.message).toContain('not a valid JSONata expression');
  });
});

describe('JSON: readHeader and plain paths', () => {
  test('readHeader: union of keys of the first records', async () => {
    expect(await readHeader({ name: 'p', path: fixture('array.json') })).toEqual(['mrn', 'name', 'visits']);
    expect(await readHeader({ name: 'p', path: fixture('staff.json'), records: 'staff' })).toEqual(['id', 'name', 'npi']);
  });

  test('plain path recognition', () => {
    expect(parsePlainPath('staff')).toEqual(['staff']);
    expect(parsePlainPath(' data.patients ')).toEqual(['data', 'patients']);
    expect(parsePlainPath('data[0].patients')).toEqual(['data', 0, 'patients']);
    expect(parsePlainPath('data.0.patients')).toEqual(['data', 0, 'patients']);
    expect(parsePlainPath('export.`patient list`')).toEqual(['export', 'patient list']);
    for (const expr of ['$.data', 'data.patients[active]', 'data..x', 'data.', '[0]', 'true', 'a.b.c[1', '$count(x)', 'a + b', '']) {
      expect(parsePlainPath(expr), expr).toBeUndefined();
    }
  });
});
