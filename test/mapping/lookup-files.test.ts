import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileMapping } from '../../src/mapping/compile-mapping.js';
import { closeLookups, loadMapping } from '../../src/mapping/load-mapping.js';
import { isIndexedLookup, type LoadedMapping } from '../../src/mapping/types.js';
import { evalError, issueWith, issuesOf } from './helpers.js';
import { readFileSync, writeFileSync } from 'node:fs';

const DIR = fileURLToPath(new URL('../fixtures/lookups/', import.meta.url));
const at = (name: string) => join(DIR, name);
/** 1-based line:col of `needle` in a fixture. */
function pos(name: string, needle: string): { line: number; column: number } {
  const text = readFileSync(at(name), 'utf8');
  const i = text.indexOf(needle);
  if (i < 0) throw new Error(`${needle} not in ${name}`);
  const before = text.slice(0, i);
  return { line: before.split('\n').length, column: i - before.lastIndexOf('\n') };
}
const ctx = { resolveRef: (n: string, k: string) => `${n}/${k}`, now: new Date('2024-01-01T00:00:00Z') };

/** What the table gives for each code (through `$lookup`'s own reader for indexed tables). */
function entries(m: LoadedMapping, name: string, codes: string[]): Record<string, unknown> {
  const t = m.lookups[name]!;
  return Object.fromEntries(codes.map((c) => [c, isIndexedLookup(t) ? t.get(c) : (t as Record<string, unknown>)[c]]));
}

for (const storage of ['memory', 'disk'] as const) {
  describe(`lookup files from any source (${storage})`, () => {
    let m: LoadedMapping;
    let temp: string;
    beforeAll(async () => {
      temp = await mkdtemp(join(tmpdir(), 'care-etl-lookup-test-'));
      m = await loadMapping(at('joins.yaml'), { lookupMemoryMaxBytes: storage === 'disk' ? 0 : undefined, lookupTempDir: temp });
    });
    afterAll(async () => {
      closeLookups(m.lookups);
      await rm(temp, { recursive: true, force: true });
    });

    it(storage === 'disk' ? 'indexes every file on disk and leaves no file behind' : 'holds small files in memory', async () => {
      const files = ['npiToId', 'practitioners', 'specialties', 'bundled', 'roleLabels', 'activeRoles', 'labels'];
      for (const name of files) expect(isIndexedLookup(m.lookups[name]), name).toBe(storage === 'disk');
      expect(isIndexedLookup(m.lookups.gender)).toBe(false); // inline tables are never on disk
      expect(await readdir(temp)).toEqual([]); // the SQLite files are unlinked once built
    });

    it('keys NDJSON records by a JSONata expression; an array key gives one code per element; records without a key are skipped', () => {
      expect(entries(m, 'npiToId', ['1000000001', '1000000002', '1000000004', '1000000044', 'L1'])).toEqual({
        1000000001: 'pr-1',
        1000000002: 'pr-2',
        1000000004: 'pr-4',
        1000000044: 'pr-4',
        L1: undefined, // another identifier system
      });
      const size = (t: unknown) => (isIndexedLookup(t) ? t.size : Object.keys(t as object).length);
      expect(size(m.lookups.npiToId)).toBe(4); // pr-3 has no NPI
    });

    it('keeps the whole record as the value by default, and collects every value with `many`', () => {
      expect(entries(m, 'practitioners', ['1000000002'])['1000000002']).toMatchObject({ id: 'pr-2', name: [{ family: 'Lindqvist', given: ['Bo'] }] });
      expect(entries(m, 'specialties', ['1000000001', '1000000002'])).toEqual({
        1000000001: ['General Practice', 'Psychiatry'], // lines 1 and 3, in file order
        1000000002: ['Internal Medicine'],
      });
    });

    it('reads the records of a JSON document at `records` (a FHIR Bundle: entry.resource)', () => {
      expect(entries(m, 'bundled', ['1000000001', '1000000002'])).toEqual({ 1000000001: 'pr-1', 1000000002: 'pr-2' });
    });

    it('reads CSV columns by header name (spaces included) or an expression, through the source options', () => {
      expect(entries(m, 'roleLabels', ['GP', 'SW'])).toEqual({ GP: 'General practitioner', SW: ' Social worker ' });
      expect(entries(m, 'activeRoles', ['gp', 'sw'])).toEqual({ gp: 'true', sw: 'false' }); // booleans become text
      expect(entries(m, 'labels', ['E', 'Z'])).toEqual({ E: 'Élodie', Z: 'Zoë' }); // csv.encoding: latin1
    });

    it('joins in a map: $lookup by NPI, whole records, many values, a missing code rejects the row', async () => {
      const c = compileMapping(m);
      const practitioner = c.resources.get('practitioner')!;
      expect(await practitioner.evalMap({ NPI: '1000000001', NAME: 'row one' }, ctx)).toEqual({
        resourceType: 'Practitioner',
        identifier: [{ system: 'urn:test:source-id', value: 'pr-1' }],
        name: [{ family: 'Okafor', given: ['Ada'] }],
        extension: [
          { url: 'https://example.test/role', valueString: 'General Practice' },
          { url: 'https://example.test/role', valueString: 'Psychiatry' },
        ],
      });
      const e = await evalError(practitioner.evalMap({ NPI: '1000000009', NAME: 'row nine' }, ctx));
      expect(e.code).toBe('lookup-miss');
      expect(e.message).toContain('is not in lookup table `npiToId` (known: 1000000001, 1000000002, 1000000004, 1000000044)');
      expect(e.issue.location).toMatchObject({ file: at('joins.yaml'), line: pos('joins.yaml', '$lookup($npiToId').line });
    });

    it('gives every row its own copy of a record (a map cannot change the table)', async () => {
      const c = compileMapping(m);
      const p = c.resources.get('practitioner')!;
      const first = (await p.evalMap({ NPI: '1000000002' }, ctx)) as { name: { given: string[] }[] };
      first.name[0]!.given.push('changed');
      expect(entries(m, 'practitioners', ['1000000002'])['1000000002']).toMatchObject({ name: [{ given: ['Bo'] }] });
    });
  });
}

describe('lookup file errors name the file, its line and the mapping line:col', () => {
  const file = at('errors.yaml');
  for (const storage of ['memory', 'disk'] as const) {
    it(`reports every broken lookup at once (${storage})`, async () => {
      const { error, issues } = await issuesOf(() => loadMapping(file, { lookupMemoryMaxBytes: storage === 'disk' ? 0 : undefined }));
      // one value per code: the second role of NPI …001 (line 3) differs from the first (line 1)
      expect(issueWith(issues, 'lookup-duplicate')).toMatchObject({
        message:
          'lookup `dup`: `roles.ndjson` line 3: code `1000000001` appears twice with different values (first at line 1); keep one, or set `many: true` to collect every value of a code',
        location: { file, ...pos('errors.yaml', `'$substringAfter(practitioner.reference, "|")'`) },
      });
      expect(issueWith(issues, 'lookup-file', 'broken.ndjson')).toMatchObject({
        message: expect.stringMatching(/^lookup `broken`: `broken\.ndjson` line 2: .*JSON/),
        location: { file, ...pos('errors.yaml', 'broken.ndjson') },
      });
      expect(issueWith(issues, 'source-format', '/lookups/asJson')).toMatchObject({
        message:
          'lookup `asJson`: `practitioners-ndjson.json` looks like NDJSON (one JSON value per line), not one JSON document: use `format: ndjson` (or name it `.ndjson`)',
        location: { file, ...pos('errors.yaml', 'json, key: id }') }, // at `format: json`
      });
      expect(issueWith(issues, 'jsonata-syntax', '/lookups/syntax')).toMatchObject({
        message: expect.stringContaining('`key` is not a valid JSONata expression'),
        location: { file, line: pos('errors.yaml', 'identifier[system = ]').line },
      });
      expect(issueWith(issues, 'lookup-column', '/lookups/noProperty')).toMatchObject({
        message: 'lookup `noProperty`: no record of `practitioners.ndjson` has the property `npi`',
        location: { file, ...pos('errors.yaml', 'npi }') },
      });
      expect(issueWith(issues, 'key-invalid', '/lookups/objectKey').message).toBe(
        // one line for the same mistake in every record
        'lookup `objectKey`: `practitioners.ndjson` line 1: `key` gave an object; a code is text (or an array of texts) (and 3 more records like it)',
      );
      expect(issueWith(issues, 'lookup-column', '/lookups/noColumn')).toMatchObject({
        message: 'lookup `noColumn`: `roles.csv` has no column `ROLE` (columns: Role Code, Role Label, ACTIVE)',
        location: { file, ...pos('errors.yaml', 'ROLE,') },
      });
      // the same check for a source: a `.json` source holding NDJSON is named before anything is read
      expect(issueWith(issues, 'source-format', '/sources/misnamed')).toMatchObject({
        message: '`practitioners-ndjson.json` looks like NDJSON (one JSON value per line), not one JSON document: use `format: ndjson` (or name it `.ndjson`)',
        location: { file, ...pos('errors.yaml', 'practitioners-ndjson.json }') },
      });
      expect(issues).toHaveLength(8);
      // the file already has the editor modeline: the hint does not suggest adding it
      expect(error.hint).not.toContain('yaml-language-server');
    });
  }

  it('a load that fails leaves no on-disk index behind (the tables built before the failure included)', async () => {
    const temp = await mkdtemp(join(tmpdir(), 'care-etl-lookup-test-'));
    try {
      await issuesOf(() => loadMapping(file, { lookupMemoryMaxBytes: 0, lookupTempDir: temp }));
      expect(await readdir(temp)).toEqual([]);
    } finally {
      await rm(temp, { recursive: true, force: true });
    }
  });

  it('a key expression that fails on records is one problem naming the first line, never quoting a value of the file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'care-etl-lookup-test-'));
    try {
      const { writeFile } = await import('node:fs/promises');
      // `$number` fails on every family name, quoting it in JSONata's message ("Unable to cast value to a number: \"Okafor\"")
      const text = `version: 1\nsources:\n  rows: { path: ${DIR}rows.csv }\nlookups:\n  byName: { path: ${DIR}practitioners.ndjson, key: '$number(name[0].family)' }\nresources:\n  - { name: practitioner, type: Practitioner, from: rows, key: NPI, map: '{}' }\n`;
      await writeFile(join(dir, 'm.yaml'), text);
      const { issues } = await issuesOf(() => loadMapping(join(dir, 'm.yaml')));
      expect(issues).toHaveLength(1);
      expect(issues[0]).toMatchObject({ code: 'jsonata', path: '/lookups/byName/key', location: { line: 5 } });
      expect(issues[0]!.message).toMatch(/^lookup `byName`: `[^`]*practitioners\.ndjson` line 1: `key` failed: .*\[D3030\] \(and 3 more records like it\)$/);
      for (const name of ['Okafor', 'Lindqvist', 'Without-Npi']) expect(issues[0]!.message).not.toContain(name);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('suggests the modeline only to a file without one', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'care-etl-lookup-test-'));
    try {
      const { writeFile } = await import('node:fs/promises');
      const text = readFileSync(file, 'utf8')
        .replace(/^# yaml-language-server.*\n/, '')
        .replace(/path: ([a-z-]+\.[a-z]+)/g, `path: ${DIR}$1`);
      await writeFile(join(dir, 'm.yaml'), text);
      const { error } = await issuesOf(() => loadMapping(join(dir, 'm.yaml')));
      expect(error.hint).toContain('add `# yaml-language-server: $schema=');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('a lookup file that is not text', () => {
  it('a NUL-filled CSV is an error at its `path` naming the file, not an empty table', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'care-etl-lookup-nul-'));
    try {
      writeFileSync(join(dir, 'roles.csv'), Buffer.alloc(2048));
      writeFileSync(join(dir, 'patients.csv'), 'MRN\n1\n');
      const yaml = [
        'version: 1',
        'sources:',
        '  patients: { path: patients.csv }',
        'lookups:',
        '  roles: { path: roles.csv, key: CODE, value: TEXT }',
        'resources:',
        '  - { name: patient, type: Patient, from: patients, key: MRN, map: \'{ "id": MRN }\' }',
        '',
      ].join('\n');
      writeFileSync(join(dir, 'mapping.yaml'), yaml);
      const { error, issues } = await issuesOf(() => loadMapping(join(dir, 'mapping.yaml'), { env: {} }));
      expect(error.exitCode).toBe(2);
      const issue = issueWith(issues, 'source-not-text');
      expect(issue.message).toBe(
        'lookup `roles`: `roles.csv` is not a text file: all its 2048 bytes are NUL bytes (a CSV export holds none). The file is binary or damaged (e.g. zero-filled by an interrupted copy): export it again. A UTF-16 export without a byte-order mark needs `csv.encoding: utf-16le` (or `utf-16be`).',
      );
      expect(issue.path).toBe('/lookups/roles/path');
      expect(issue.location).toMatchObject({ file: join(dir, 'mapping.yaml'), line: 5 });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
