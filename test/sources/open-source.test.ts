import { afterAll, describe, expect, test } from 'vitest';
import { CareEtlError } from '../../src/core/issues.js';
import { detectFormat, openSource, readHeader, type SourceConfig } from '../../src/sources/open-source.js';
import { brief, collect, fixture, tempDir } from './helpers.js';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

function syncError(fn: () => unknown): CareEtlError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(CareEtlError);
    return err as CareEtlError;
  }
  throw new Error('expected a CareEtlError');
}

describe('format detection', () => {
  test('by extension, case-insensitive', () => {
    expect(detectFormat('/x/patients.csv')).toBe('csv');
    expect(detectFormat('/x/PATIENTS.CSV')).toBe('csv');
    expect(detectFormat('/x/staff.tsv')).toBe('csv');
    expect(detectFormat('/x/export.txt')).toBe('csv');
    expect(detectFormat('/x/staff.json')).toBe('json');
    expect(detectFormat('/x/events.ndjson')).toBe('ndjson');
    expect(detectFormat('/x/events.jsonl')).toBe('ndjson');
    expect(detectFormat('/x/export.xml')).toBeUndefined();
    expect(detectFormat('/x/export')).toBeUndefined();
    expect(detectFormat('/x/export.csv.gz')).toBeUndefined();
  });

  test('an unknown extension without `format` is a configuration error', () => {
    const err = syncError(() => openSource({ name: 'patients', path: '/x/export.xml' }));
    expect(err.message).toBe('Source `patients`: /x/export.xml: cannot tell the format from the file extension');
    expect(err.exitCode).toBe(2);
    expect(err.hint).toContain('format');
  });

  test('`format` overrides the extension', async () => {
    const path = tmp.write('export.dat', '{"a":1}\n{"a":2}\n');
    expect(brief(await collect({ name: 'p', path, format: 'ndjson' }))).toEqual([
      { ok: true, line: 1, record: 1, data: { a: 1 } },
      { ok: true, line: 2, record: 2, data: { a: 2 } },
    ]);
    const csv = tmp.write('export.json', 'a,b\n1,2\n');
    expect(brief(await collect({ name: 'p', path: csv, format: 'csv' }))).toEqual([{ ok: true, line: 2, record: 1, data: { a: '1', b: '2' } }]);
  });

  test('options that do not fit the format are configuration errors', () => {
    expect(syncError(() => openSource({ name: 'p', path: '/x/a.csv', records: 'staff' })).message).toContain('`records` applies to JSON sources only');
    expect(syncError(() => openSource({ name: 'p', path: '/x/a.csv', format: 'xml' as 'csv' })).message).toContain('unknown format "xml"');
  });
});

describe('readHeader', () => {
  const cases: Array<[string, SourceConfig, string[]]> = [
    ['CSV header', { name: 'p', path: fixture('patients.csv') }, ['MRN', 'first_name', 'last_name', 'address', 'notes', 'zip']],
    ['TSV header', { name: 'p', path: fixture('staff.tsv') }, ['MRN', 'first_name', 'city']],
    ['NDJSON keys', { name: 'p', path: fixture('patients.ndjson') }, ['mrn', 'name', 'tags']],
    ['JSON keys at a path', { name: 'p', path: fixture('nested.json'), records: 'data.patients' }, ['mrn', 'active']],
  ];
  for (const [label, cfg, expected] of cases) {
    test(label, async () => {
      expect(await readHeader(cfg)).toEqual(expected);
    });
  }

  test('a missing file is fatal', async () => {
    const path = tmp.path('absent.csv');
    await expect(readHeader({ name: 'patients', path })).rejects.toThrow(`Source \`patients\`: ${path}: file not found: ${path}`);
  });

  test('reads only the beginning of a CSV file', async () => {
    // a syntax error far after the header does not matter to readHeader
    const path = tmp.write('long.csv', 'id,name\n' + '1,a\n'.repeat(100_000) + '2,"broken\n');
    expect(await readHeader({ name: 'p', path })).toEqual(['id', 'name']);
  });
});

describe('abort and early exit, every format', () => {
  const configs: Array<[string, SourceConfig]> = [
    ['csv', { name: 'p', path: fixture('patients.csv') }],
    ['ndjson', { name: 'p', path: fixture('patients.ndjson') }],
    ['json', { name: 'p', path: fixture('nested.json'), records: 'data.patients' }],
    ['json (jsonata)', { name: 'p', path: fixture('nested.json'), records: 'data.patients[active]' }],
  ];
  for (const [label, cfg] of configs) {
    test(`${label}: abort rejects with AbortError; break then iterate again`, async () => {
      const ac = new AbortController();
      const run = async (): Promise<number> => {
        let n = 0;
        for await (const _ of openSource(cfg, { signal: ac.signal })) {
          n++;
          ac.abort();
        }
        return n;
      };
      await expect(run()).rejects.toMatchObject({ name: 'AbortError' });
      const source = openSource(cfg);
      for await (const item of source) {
        expect(item.origin.record).toBe(1);
        break;
      }
      expect((await collect(cfg)).length).toBeGreaterThan(1);
    });
  }
});

describe('encodings', () => {
  test('UTF-16LE CSV with a BOM', async () => {
    const path = tmp.write('utf16.csv', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('MRN,name\r\n007,Zoë\r\n008,"a\r\nb"\r\n009,c', 'utf16le')]));
    expect(brief(await collect({ name: 'p', path }))).toEqual([
      { ok: true, line: 2, record: 1, data: { MRN: '007', name: 'Zoë' } },
      { ok: true, line: 3, record: 2, data: { MRN: '008', name: 'a\r\nb' } },
      { ok: true, line: 5, record: 3, data: { MRN: '009', name: 'c' } },
    ]);
  });
});
