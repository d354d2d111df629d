import { afterAll, describe, expect, test } from 'vitest';
import { NDJSON_MAX_LINE_BYTES, openSource, readHeader } from '../../src/sources/open-source.js';
import { brief, collect, fixture, tempDir } from './helpers.js';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

describe('NDJSON', () => {
  test('good lines become records, bad lines rejects with their line numbers; blank lines are skipped', async () => {
    const items = await collect({ name: 'patients', path: fixture('patients.ndjson') });
    expect(brief(items)).toEqual([
      { ok: true, line: 1, record: 1, data: { mrn: '00123', name: 'Ada' } },
      { ok: true, line: 2, record: 2, data: { mrn: '00124', name: 'Alan' } },
      {
        ok: false,
        line: 4,
        record: 3,
        code: 'json-syntax',
        message: 'invalid JSON: expected double-quoted property name at column 18',
        raw: '{"mrn": "00125", not json}',
      },
      { ok: false, line: 5, record: 4, code: 'not-object', message: 'expected a JSON object, got an array', raw: '[1,2,3]' },
      { ok: false, line: 6, record: 5, code: 'not-object', message: 'expected a JSON object, got a string', raw: '"just a string"' },
      { ok: true, line: 7, record: 6, data: { mrn: '00126', name: 'Grace', tags: ['a'] } },
    ]);
    const reject = items[2];
    if (!reject.ok) {
      expect(reject.issues[0]).toMatchObject({ severity: 'error', location: { file: fixture('patients.ndjson'), line: 4, record: 3 } });
      // JSON.parse messages quote the input: the reader keeps only the position
      expect(reject.issues[0].message).not.toContain('00125');
    }
  });

  test('CRLF, a BOM, whitespace-only lines, a last line without newline; values keep their JSON types', async () => {
    const path = tmp.write('crlf.ndjson', '\ufeff{"mrn":"007","n":1}\r\n  \r\n\r\n{"mrn":"008","zip":"02139","active":true,"x":null}\r\nnull\r\n{"mrn":"009"}');
    expect(brief(await collect({ name: 'p', path }))).toEqual([
      { ok: true, line: 1, record: 1, data: { mrn: '007', n: 1 } },
      { ok: true, line: 4, record: 2, data: { mrn: '008', zip: '02139', active: true, x: null } },
      { ok: false, line: 5, record: 3, code: 'not-object', message: 'expected a JSON object, got null', raw: 'null' },
      { ok: true, line: 6, record: 4, data: { mrn: '009' } },
    ]);
  });

  test('truncated and garbage lines are json-syntax rejects whose messages quote no data', async () => {
    const path = tmp.write('truncated.jsonl', '{"a":1}\n{"a":\nabc');
    expect(brief(await collect({ name: 'p', path }))).toEqual([
      { ok: true, line: 1, record: 1, data: { a: 1 } },
      { ok: false, line: 2, record: 2, code: 'json-syntax', message: 'invalid JSON: unexpected end of line', raw: '{"a":' },
      { ok: false, line: 3, record: 3, code: 'json-syntax', message: 'invalid JSON', raw: 'abc' },
    ]);
  });

  test('readHeader: union of the keys of the first records, in order of appearance', async () => {
    expect(await readHeader({ name: 'p', path: fixture('patients.ndjson') })).toEqual(['mrn', 'name', 'tags']);
    const lines = Array.from({ length: 60 }, (_, i) => JSON.stringify(i < 50 ? { id: i, [`k${i % 3}`]: 1 } : { late: true }));
    const path = tmp.write('many.ndjson', lines.join('\n'));
    expect(await readHeader({ name: 'p', path })).toEqual(['id', 'k0', 'k1', 'k2']);
  });

  test('a line longer than the limit is a reject with its line (not read into memory whole); later lines are read', async () => {
    const path = tmp.write('huge-line.ndjson', '{"a":1}\n' + '{"x":"' + 'y'.repeat(NDJSON_MAX_LINE_BYTES) + '"}\r\n{"b":2}\n');
    const items = await collect({ name: 'p', path });
    expect(items.map((i) => [i.ok, i.origin.line, i.origin.record])).toEqual([
      [true, 1, 1],
      [false, 2, 2],
      [true, 3, 3],
    ]);
    const reject = items[1]!;
    if (reject.ok) throw new Error('expected a reject');
    expect(reject.issues[0]).toMatchObject({ code: 'value-too-large', location: { line: 2, record: 2 } });
    expect(reject.issues[0]!.message).toContain(`line longer than ${NDJSON_MAX_LINE_BYTES} bytes`);
    expect(reject.raw?.length).toBeLessThanOrEqual(64 * 1024);
  });

  test('many lines stream in order', async () => {
    const n = 20_000;
    const path = tmp.write('many-lines.ndjson', Array.from({ length: n }, (_, i) => `{"i":${i}}`).join('\n') + '\n');
    let count = 0;
    for await (const item of openSource({ name: 'p', path })) {
      if (!item.ok || item.data.i !== count || item.origin.line !== count + 1) throw new Error(`bad item ${count}`);
      count++;
    }
    expect(count).toBe(n);
  });

  test('a missing file is fatal', async () => {
    const path = tmp.path('missing.ndjson');
    await expect(collect({ name: 'events', path })).rejects.toThrow(`Source \`events\`: ${path}: file not found: ${path}`);
  });
});
