import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExitCode } from '../../src/core/issues.js';
import { loadMapping } from '../../src/mapping/load-mapping.js';
import type { LoadedMapping } from '../../src/mapping/types.js';
import { FIXTURES, fixture, issueWith, issuesOf, positionIn } from './helpers.js';

const ENV = { CARE_BASE_URL: 'https://api.example.test/fhir', CARE_API_KEY: 'secret-key', CARE_TENANT_ID: 't1' };

describe('loadMapping: a valid file', () => {
  let m: LoadedMapping;
  beforeAll(async () => {
    m = await loadMapping(fixture('valid.yaml'), { env: ENV });
  });

  it('interpolates target values from the environment, with defaults', () => {
    expect(m.version).toBe(1);
    expect(m.target).toEqual({
      baseUrl: 'https://api.example.test/fhir',
      apiKey: 'secret-key',
      emrId: 'emr-default',
      tenantId: 'tenant-t1',
      updateMethod: { Patient: { method: 'PUT' }, CareTeam: { method: 'PATCH', path: '{type}/{id}' } },
      declared: true,
    });
    expect(m.warnings).toEqual([]);
  });

  it('resolves source paths against the mapping folder and fills in formats', () => {
    expect(m.file).toBe(fixture('valid.yaml'));
    expect(m.dir).toBe(FIXTURES.replace(/\/$/, ''));
    expect(m.sources.patients).toEqual({ name: 'patients', path: join(FIXTURES, 'data/patients.csv'), format: 'csv' });
    expect(m.sources.clinicians).toEqual({ name: 'clinicians', path: join(FIXTURES, 'data/practitioners.json'), format: 'json', records: 'staff' });
    expect(m.sources.assignments!.csv).toEqual({ delimiter: ';' });
    expect(m.sources.extra).toEqual({ name: 'extra', path: join(FIXTURES, 'data/extra.tsv'), format: 'csv', csv: { delimiter: '\t' } });
  });

  it('interpolates source paths too', async () => {
    const other = await loadMapping(fixture('valid.yaml'), { env: { ...ENV, DATA_DIR: '/srv/export' } });
    expect(other.sources.extra!.path).toBe('/srv/export/extra.tsv');
  });

  it('loads inline and file lookups as plain code → label tables', () => {
    expect({ ...m.lookups.gender }).toEqual({ M: 'male', F: 'female', U: 'unknown' });
    expect({ ...m.lookups.marital }).toEqual({ S: 'single', M: 'married' });
    expect({ ...m.lookups.levels }).toEqual({ 1: 'one', 2: 'two' }); // JSON numbers become text codes
    expect(Object.getPrototypeOf(m.lookups.gender)).toBeNull();
  });

  it('builds resource mappings with defaults and locations', () => {
    expect(m.resources.map((r) => r.name)).toEqual(['careteam', 'patient', 'practitioner']);
    const [careteam, patient, practitioner] = m.resources;
    expect(careteam).toMatchObject({ type: 'CareTeam', from: 'assignments', key: 'MRN', groupBy: 'MRN', onMissing: 'end', index: 0 });
    expect(careteam!.match).toBe('references'); // the default CareTeam identity: subject + members
    expect(careteam!.paths.key).toEqual(['resources', 0, 'groupBy']); // key defaults to groupBy
    expect(patient).toMatchObject({ type: 'Patient', key: 'MRN', match: 'identifier', onMissing: 'ignore' });
    expect(patient!.locations.key).toEqual({ file: fixture('valid.yaml'), ...positionIn('valid.yaml', 'MRN\n    map') });
    expect(patient!.locations.map).toEqual({ file: fixture('valid.yaml'), ...positionIn('valid.yaml', '|', 1) });
    expect(practitioner!.match).toBe("identifier[system='urn:npi'].value");
    expect(practitioner!.map.startsWith('{ "identifier"')).toBe(true); // folded scalar
  });

  it('keeps export columns in file order, integer-like names included', () => {
    expect(m.exports!.observations!.columns.map((c) => c.name)).toEqual(['id', '2', 'mrn']);
    expect(m.exports!.observations!.columns[2]!.expr).toBe('$sourceKey(subject.reference)');
  });

  it('positionOf maps paths and offsets inside values', () => {
    expect(m.positionOf(['resources', 1, 'type'])).toEqual({ file: fixture('valid.yaml'), ...positionIn('valid.yaml', 'Patient\n') });
    const map = m.resources[1]!.map;
    expect(m.positionOf(['resources', 1, 'map'], map.indexOf('$date'))).toEqual({ file: fixture('valid.yaml'), line: 40, column: 22 });
  });

  it('warns about a literal API key', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'care-etl-map-'));
    try {
      await writeFile(
        join(dir, 'm.yaml'),
        'version: 1\ntarget:\n  apiKey: abc123\nsources:\n  s: { path: s.csv }\nresources:\n  - { name: p, type: Patient, from: s, key: ID, map: "{}" }\n',
      );
      const lm = await loadMapping(join(dir, 'm.yaml'), { env: {} });
      expect(lm.target.apiKey).toBe('abc123');
      expect(lm.warnings).toHaveLength(1);
      expect(lm.warnings[0]).toMatchObject({ severity: 'warning', code: 'secret-in-file', location: { line: 3, column: 11 } });
      expect(lm.warnings[0]!.message).not.toContain('abc123');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('loadMapping: ${VAR} interpolation problems', () => {
  it('reports every missing variable at the exact ${ with line and column, exit code 2', async () => {
    const { error, issues } = await issuesOf(() => loadMapping(fixture('env.yaml'), { env: { CARE_BASE_URL: 'https://x.test' } }));
    expect(error.exitCode).toBe(ExitCode.config);
    expect(issues.map((i) => i.code)).toEqual(['env-missing', 'env-missing', 'env-missing']);
    const file = fixture('env.yaml');
    expect(issueWith(issues, 'env-missing', 'CARE_API_KEY').location).toEqual({ file, line: 4, column: 16 });
    expect(issueWith(issues, 'env-missing', 'CARE_TENANT_ID').location).toEqual({ file, line: 6, column: 13 });
    expect(issueWith(issues, 'env-missing', 'DATA_DIR').location).toEqual({ file, ...positionIn('env.yaml', '${DATA_DIR}') });
    expect(issueWith(issues, 'env-missing', 'DATA_DIR').path).toBe('/sources/patients/path');
    expect(error.describe()).not.toContain('https://x.test');
  });

  it('loads once the variables are set; the default applies to the unset one', async () => {
    const m = await loadMapping(fixture('env.yaml'), {
      env: { CARE_BASE_URL: 'https://x.test', CARE_API_KEY: 'k', CARE_TENANT_ID: 't', DATA_DIR: '/data' },
    });
    expect(m.target).toEqual({ baseUrl: 'https://x.test', apiKey: 'key-k', emrId: 'emr-1', tenantId: 't', declared: true });
    expect(m.sources.patients!.path).toBe('/data/patients.csv');
  });

  it('checks the interpolated base URL', async () => {
    const { issues } = await issuesOf(() =>
      loadMapping(fixture('env.yaml'), { env: { CARE_BASE_URL: 'not a url', CARE_API_KEY: 'k', CARE_TENANT_ID: 't', DATA_DIR: '.' } }),
    );
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ code: 'target-invalid', location: { line: 3, column: 12 } });
  });
});

describe('loadMapping: YAML syntax errors', () => {
  it('reports a duplicate key with line and column', async () => {
    const { issues } = await issuesOf(() => loadMapping(fixture('yaml-syntax.yaml'), { env: {} }));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ code: 'yaml', location: { file: fixture('yaml-syntax.yaml'), line: 9, column: 5 } });
    expect(issues[0]!.message).toContain('Map keys must be unique');
  });

  it('reports an unterminated flow mapping', async () => {
    const { issues } = await issuesOf(() => loadMapping(fixture('yaml-syntax-2.yaml'), { env: {} }));
    expect(issues[0]).toMatchObject({ code: 'yaml', location: { line: 4, column: 1 } });
    expect(issues[0]!.message).toContain('Flow map');
  });

  it('reports a file that cannot be read', async () => {
    const { issues } = await issuesOf(() => loadMapping(fixture('nope.yaml')));
    expect(issues[0]!.code).toBe('file-unreadable');
  });

  it('rejects a document that is not a mapping', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'care-etl-map-'));
    try {
      await writeFile(join(dir, 'list.yaml'), '- a\n- b\n');
      const { issues } = await issuesOf(() => loadMapping(join(dir, 'list.yaml')));
      expect(issues[0]).toMatchObject({ code: 'invalid', location: { line: 1, column: 1 } });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('loadMapping: schema errors', () => {
  it('reports every schema problem at its YAML node', async () => {
    const { issues } = await issuesOf(() => loadMapping(fixture('schema-errors.yaml'), { env: {} }));
    const file = fixture('schema-errors.yaml');
    const at = (needle: string, nth = 0) => ({ file, ...positionIn('schema-errors.yaml', needle, nth) });

    expect(issueWith(issues, 'invalid', '/version')).toMatchObject({ message: 'must be 1', location: at('2') });
    expect(issueWith(issues, 'invalid', '/target/updateMethod/Patient')).toMatchObject({
      message: 'must be one of PUT, PATCH, POST (got `GET`)',
      location: at('GET'),
    });
    expect(issueWith(issues, 'invalid', '/target/updateMethod/CareTeam/path').location).toEqual(at('"{type}/{uuid}"'));
    const extra = issueWith(issues, 'invalid', '/sources/patients/delimiter');
    expect(extra.message).toContain('unknown property `delimiter`');
    expect(extra.location).toEqual(at('delimiter'));
    expect(issueWith(issues, 'invalid', '/lookups/gender/F')).toMatchObject({
      message: expect.stringContaining('put it in quotes'),
      location: at('1 }'),
    });
    expect(issueWith(issues, 'lookup-code-not-text')).toMatchObject({
      message: expect.stringContaining('`02` as the number 2'),
      location: at('02'),
    });
    expect(issueWith(issues, 'invalid', '/resources/0/name').location).toEqual(at('Patient\n'));
    expect(issueWith(issues, 'invalid', '/resources/0/type')).toMatchObject({
      message: expect.stringContaining('did you mean `Patient`?'),
      location: at('Patiant'),
    });
    expect(issueWith(issues, 'required', '/resources/1/key')).toMatchObject({
      message: expect.stringContaining('only be left out when `groupBy` is set'),
      location: at('name: careteam'),
    });
    // `mapp:` is one mistake: the unknown key says "did you mean `map`?", no second error for the missing `map`
    expect(issues.find((i) => i.path === '/resources/1/map')).toBeUndefined();
    expect(issueWith(issues, 'invalid', '/resources/1/mapp')).toMatchObject({
      message: expect.stringContaining('did you mean `map`?'),
      location: at('mapp'),
    });
    // the anyOf noise (type errors of the other alternative, "must match a schema in anyOf") is collapsed
    expect(issues.filter((i) => i.path?.startsWith('/target/updateMethod'))).toHaveLength(2);
    expect(issues).toHaveLength(10);
  });

  it('rejects invalid names of sources and lookups', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'care-etl-map-'));
    try {
      await writeFile(
        join(dir, 'm.yaml'),
        'version: 1\nsources:\n  Bad Name: { path: a.csv }\nlookups:\n  my-codes: { a: b }\nresources:\n  - { name: p, type: Patient, from: s, key: ID, map: "{}" }\n',
      );
      const { issues } = await issuesOf(() => loadMapping(join(dir, 'm.yaml')));
      expect(issueWith(issues, 'invalid', '/sources/Bad Name').location).toMatchObject({ line: 3, column: 3 });
      expect(issueWith(issues, 'invalid', '/lookups/my-codes').message).toContain('not a valid variable name');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a mapping name over 64 characters is an error at its line (the state indexes the name with each key)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'care-etl-map-'));
    try {
      const name = 'p'.repeat(65);
      await writeFile(
        join(dir, 'm.yaml'),
        `version: 1\nsources:\n  s: { path: a.csv }\nresources:\n  - name: ${name}\n    type: Patient\n    from: s\n    key: ID\n    map: "{}"\n`,
      );
      const { issues } = await issuesOf(() => loadMapping(join(dir, 'm.yaml')));
      expect(issueWith(issues, 'invalid', '/resources/0/name')).toMatchObject({
        message: 'must be at most 64 characters',
        location: { line: 5, column: 11 },
      });
      // 64 is still a name
      await writeFile(
        join(dir, 'm.yaml'),
        `version: 1\nsources:\n  s: { path: a.csv }\nresources:\n  - { name: ${name.slice(1)}, type: Patient, from: s, key: ID, map: "{}" }\n`,
      );
      const mapping = await loadMapping(join(dir, 'm.yaml'));
      expect(mapping.resources[0]!.name).toBe(name.slice(1));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a misspelled key (`form:` for `from:`) is one error at its line: "did you mean `from`?"', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'care-etl-map-'));
    try {
      await writeFile(
        join(dir, 'm.yaml'),
        'version: 1\nsources:\n  s: { path: a.csv }\nresources:\n  - name: p\n    type: Patient\n    form: s\n    key: ID\n    map: "{}"\n',
      );
      const { issues } = await issuesOf(() => loadMapping(join(dir, 'm.yaml')));
      expect(issues).toEqual([
        expect.objectContaining({
          code: 'invalid',
          path: '/resources/0/form',
          message: 'unknown property `form`: did you mean `from`? — line 7: `form: s`',
          location: expect.objectContaining({ line: 7, column: 5 }),
        }),
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('reports source options that do not fit the format', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'care-etl-map-'));
    try {
      await writeFile(
        join(dir, 'm.yaml'),
        'version: 1\nsources:\n  a: { path: a.dat }\n  b: { path: b.csv, records: x }\n  c: { path: c.json, csv: { delimiter: ";" } }\n  d: { path: d.dat, format: ndjson }\nresources:\n  - { name: p, type: Patient, from: a, key: ID, map: "{}" }\n',
      );
      const { issues } = await issuesOf(() => loadMapping(join(dir, 'm.yaml')));
      expect(issues.map((i) => [i.code, i.path])).toEqual([
        ['source-format', '/sources/a/path'],
        ['invalid', '/sources/b/records'],
        ['invalid', '/sources/c/csv'],
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('loadMapping: lookup files', () => {
  it('reports unreadable files, duplicates, missing columns and reserved names', async () => {
    const { issues } = await issuesOf(() => loadMapping(fixture('lookups.yaml')));
    const file = fixture('lookups.yaml');
    expect(issueWith(issues, 'lookup-file', 'nope.csv')).toMatchObject({ location: { file, ...positionIn('lookups.yaml', 'lookups/nope.csv') } });
    expect(issueWith(issues, 'lookup-duplicate').message).toContain('row 4: code `S` appears twice');
    expect(issueWith(issues, 'lookup-column').location).toEqual({ file, ...positionIn('lookups.yaml', 'TEXT') });
    expect(issueWith(issues, 'lookup-name')).toMatchObject({ location: { file, line: 9, column: 3 } });
    expect(issues).toHaveLength(4);
  });
});

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'care-etl-map-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe('loadMapping: resources', () => {
  it('rejects duplicate mapping names', async () => {
    await writeFile(
      join(tmp, 'dup.yaml'),
      'version: 1\nsources:\n  s: { path: s.csv }\nresources:\n  - { name: p, type: Patient, from: s, key: ID, map: "{}" }\n  - { name: p, type: Patient, from: s, key: ID, map: "{}" }\n',
    );
    const { issues } = await issuesOf(() => loadMapping(join(tmp, 'dup.yaml')));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ code: 'duplicate-name', location: { line: 6, column: 13 } });
    expect(issues[0]!.message).toContain('line 5');
  });
});
