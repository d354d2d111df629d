import { beforeAll, describe, expect, it } from 'vitest';
import { ExitCode } from '../../src/core/issues.js';
import { compileMapping, identifierMatch, prune, type CompiledMapping, type EvalContext } from '../../src/mapping/compile-mapping.js';
import { RefError } from '../../src/mapping/errors.js';
import { loadMapping } from '../../src/mapping/load-mapping.js';
import { evalError, fixture, issueWith, issuesOf, positionIn } from './helpers.js';

const ENV = { CARE_BASE_URL: 'https://api.example.test', CARE_API_KEY: 'k', CARE_TENANT_ID: 't' };
const ctx: EvalContext = {
  resolveRef: (name, key) => `${name === 'patient' ? 'Patient' : 'Practitioner'}/${name}-${key}`,
  sourceKey: (ref) => (ref.startsWith('Patient/') ? `MRN-${ref.slice(8)}` : undefined),
  now: new Date('2024-01-01T00:00:00Z'),
};

async function compileFixture(name: string): Promise<CompiledMapping> {
  return compileMapping(await loadMapping(fixture(name), { env: ENV }));
}

describe('compileMapping: JSONata syntax errors point at the exact character', () => {
  it('inside a block scalar (|)', async () => {
    const { error, issues } = await issuesOf(() => compileFixture('syntax-block.yaml'));
    expect(error.exitCode).toBe(ExitCode.config);
    expect(issues).toHaveLength(1);
    // `"birthDate": $date(DOB "YYYY-MM-DD") }` — the unexpected string literal
    expect(issues[0]).toMatchObject({
      code: 'jsonata-syntax',
      path: '/resources/0/map',
      location: { file: fixture('syntax-block.yaml'), line: 12, column: 32 },
    });
    expect(issues[0]!.location).toMatchObject(positionIn('syntax-block.yaml', '"YYYY-MM-DD"'));
    expect(issues[0]!.message).toContain('Expected ")", got "YYYY-MM-DD" [S0202]');
    expect(issues[0]!.message).toContain('mapping `patient` map');
  });

  it('in plain, double-quoted and folded scalars, all reported together', async () => {
    const { issues } = await issuesOf(() => compileFixture('syntax-inline.yaml'));
    const file = fixture('syntax-inline.yaml');
    expect(issues).toHaveLength(4);
    // plain: `key: MRN + + 1` → the second +
    expect(issueWith(issues, 'jsonata-syntax', '/resources/0/key').location).toEqual({ file, line: 9, column: 16 });
    // double-quoted with escapes: `match: "identifier[system=\"urn:npi\"].value ]"` → the stray ]
    expect(issueWith(issues, 'jsonata-syntax', '/resources/1/match').location).toEqual({ file, line: 15, column: 50 });
    // folded (>): `"name": [{ "family": last }}` → the } where ] was expected
    expect(issueWith(issues, 'jsonata-syntax', '/resources/1/map').location).toEqual({ file, line: 18, column: 36 });
    // a source's records expression is checked too
    expect(issueWith(issues, 'jsonata-syntax', '/sources/staff/records').location).toEqual({ file, line: 4, column: 45 });
  });
});

describe('compileMapping: names across the file', () => {
  it('extracts $ref targets and orders mappings by dependency', async () => {
    const c = await compileFixture('valid.yaml');
    expect(c.order).toEqual(['patient', 'practitioner', 'careteam']);
    expect([...c.resources.keys()]).toEqual(c.order);
    expect(c.resources.get('careteam')!.refs).toEqual(['patient', 'practitioner']);
    expect(c.resources.get('patient')!.refs).toEqual([]);
  });

  it('reports a cycle once, naming its members, at the $ref that closes it', async () => {
    const { issues } = await issuesOf(() => compileFixture('refs-cycle.yaml'));
    expect(issues).toHaveLength(1);
    expect(issues[0]!.code).toBe('ref-cycle');
    expect(issues[0]!.message).toContain('patient → careteam → patient');
    expect(issues[0]!.location).toEqual({ file: fixture('refs-cycle.yaml'), ...positionIn('refs-cycle.yaml', '"careteam"') });
  });

  it('reports unknown sources, $ref targets, lookups, functions and variables with both names', async () => {
    const { issues } = await issuesOf(() => compileFixture('names.yaml'));
    const file = fixture('names.yaml');
    const at = (needle: string) => ({ file, ...positionIn('names.yaml', needle) });
    expect(issueWith(issues, 'source-unknown')).toMatchObject({
      message: expect.stringMatching(/`patient` reads from `rowz`.*sources: rows.*did you mean `rows`/),
      location: at('rowz'),
    });
    expect(issueWith(issues, 'ref-context', '/resources/0/key').location).toEqual(at('"practitioner", NPI)\n'));
    expect(issueWith(issues, 'ref-unknown')).toMatchObject({
      message: expect.stringMatching(/`patient` refers to `practitionr`.*mappings: patient, practitioner.*did you mean `practitioner`/),
      location: at('"practitionr"'),
    });
    expect(issueWith(issues, 'ref-dynamic').location).toEqual(at('TYPE'));
    expect(issueWith(issues, 'lookup-unknown')).toMatchObject({
      message: expect.stringContaining('lookup table `$gendr` is not defined under `lookups:` (defined: gender); did you mean `$gender`?'),
      location: at('$gendr'),
    });
    expect(issueWith(issues, 'function-unknown')).toMatchObject({
      message: expect.stringContaining('`$dat` is not a function (did you mean `$date`?)'),
      location: at('$dat('),
    });
    expect(issueWith(issues, 'variable-unknown')).toMatchObject({
      message: expect.stringContaining('`$unknownVar` is not defined'),
      location: at('$unknownVar'),
    });
    expect(issueWith(issues, 'date-format-invalid')).toMatchObject({ message: expect.stringContaining('`DDD`'), location: at('"YYYY-MM-DDD"') });
    // the map's literal keys the Patient schema lacks (test/mapping/map-fields.test.ts)
    expect(issues.filter((i) => i.code === 'map-field-unknown').map((i) => i.message.match(/no field `(\w+)`/)![1])).toEqual([
      'generalPractitioner',
      'deceasedDateTime',
      'x',
      'y',
      'z',
    ]);
    // $g (bound with :=) and $v (lambda parameter) are not reported; nothing else is
    expect(issues.filter((i) => i.code !== 'map-field-unknown')).toHaveLength(8);
  });
});

describe('compileMapping: evaluation', () => {
  let c: CompiledMapping;
  beforeAll(async () => {
    c = await compileFixture('valid.yaml');
  });

  const row = { MRN: '00123', LAST: 'SMITH-JONES', FIRST: ' Mary  Ann ', SEX: 'F', DOB: '02/12/1985', PHONE: '(555) 123-4567', MARITAL: 'M' };

  it('maps a patient record', async () => {
    const p = c.resources.get('patient')!;
    expect(await p.evalKey(row)).toBe('00123');
    expect(await p.evalMap(row, ctx)).toEqual({
      resourceType: 'Patient',
      identifier: [{ system: 'urn:clinic:mrn', value: '00123' }],
      name: [{ family: 'Smith-Jones', given: ['Mary', 'Ann'] }],
      gender: 'female',
      birthDate: '1985-02-12',
      telecom: [{ system: 'phone', value: '+15551234567' }],
      extension: [{ url: 'urn:clinic:marital', valueString: 'married' }],
    });
  });

  it('drops empty values: missing fields, empty phone, blank strings, empty arrays and objects', async () => {
    const p = c.resources.get('patient')!;
    const out = await p.evalMap({ MRN: '7', LAST: '', FIRST: '  ', SEX: '', DOB: '', PHONE: '', MARITAL: '' }, ctx);
    expect(out).toEqual({
      resourceType: 'Patient',
      identifier: [{ system: 'urn:clinic:mrn', value: '7' }],
      extension: [{ url: 'urn:clinic:marital' }],
    });
  });

  it('stringifies numeric keys, trims them, and rejects empty ones with key-missing', async () => {
    const p = c.resources.get('patient')!;
    expect(await p.evalKey({ MRN: 42 })).toBe('42');
    expect(await p.evalKey({ MRN: '  00042 ' })).toBe('00042');
    for (const bad of [{}, { MRN: '' }, { MRN: '   ' }, { MRN: null }]) {
      const e = await evalError(p.evalKey(bad));
      expect(e.code).toBe('key-missing');
      expect(e.resource).toBe('patient');
      expect(e.exitCode).toBe(ExitCode.rejected);
      expect(e.issue.location).toEqual({ file: fixture('valid.yaml'), ...positionIn('valid.yaml', 'MRN\n    map') });
    }
    expect((await evalError(p.evalKey({ MRN: ['1', '2'] }))).code).toBe('key-invalid');
    expect((await evalError(p.evalKey({ MRN: { a: 1 } }))).code).toBe('key-invalid');
    // a NUL byte in the cell: a PostgreSQL state cannot store the key (every run of the tenant failed on it)
    const nul = await evalError(p.evalKey({ MRN: '000\u00002' }));
    expect(nul.code).toBe('key-invalid');
    expect(nul.message).toContain('holds a NUL character (U+0000)');
    // past 1,024 bytes of UTF-8: a PostgreSQL state cannot index it (no identifier is that long)
    expect(await p.evalKey({ MRN: 'k'.repeat(1024) })).toBe('k'.repeat(1024));
    expect(await p.evalKey({ MRN: 'é'.repeat(512) })).toBe('é'.repeat(512));
    for (const long of ['k'.repeat(1025), 'é'.repeat(513), '€'.repeat(342)]) {
      const e = await evalError(p.evalKey({ MRN: long }));
      expect(e.code).toBe('key-invalid');
      expect(e.message).toContain(`is ${Buffer.byteLength(long).toLocaleString('en-US')} bytes long`);
    }
  });

  it('groups: the group key comes from groupBy and the map sees the array of records', async () => {
    const ct = c.resources.get('careteam')!;
    const rows = [
      { MRN: '1', NPI: 'A', START: '2024-01-02' },
      { MRN: '1', NPI: 'B', START: '' },
    ];
    expect(await ct.evalGroupKey!(rows[0])).toBe('1');
    expect(await ct.evalKey(rows[0])).toBe('1');
    expect(await ct.evalMap(rows, ctx)).toEqual({
      resourceType: 'CareTeam',
      status: 'active',
      subject: { reference: 'Patient/patient-1' },
      participant: [
        { member: { reference: 'Practitioner/practitioner-A' }, period: { start: '2024-01-02' } },
        { member: { reference: 'Practitioner/practitioner-B' } },
      ],
    });
    // a group of one still gives an array of participants ([$.{…}])
    const one = (await ct.evalMap([rows[0]], ctx)) as { participant: unknown[] };
    expect(one.participant).toHaveLength(1);
    expect(c.resources.get('patient')!.evalGroupKey).toBeUndefined();
  });

  it('rejects a row whose date is impossible, positioned at the $date call', async () => {
    const p = c.resources.get('patient')!;
    const e = await evalError(p.evalMap({ ...row, DOB: '02/30/1985' }, ctx));
    expect(e.code).toBe('date-invalid');
    expect(e.resource).toBe('patient');
    expect(e.role).toBe('map');
    expect(e.issue.message).toBe('mapping `patient` map: the value is not a valid date in format `MM/DD/YYYY` (day out of range)'); // never the birth date itself
    expect(e.issue.location).toEqual({ file: fixture('valid.yaml'), line: 40, column: 22 });
    expect(e.issue.location).toMatchObject(positionIn('valid.yaml', '$date(DOB'));
  });

  it('rejects an unknown code with lookup-miss', async () => {
    const e = await evalError(c.resources.get('patient')!.evalMap({ ...row, SEX: 'Z' }, ctx));
    expect(e.code).toBe('lookup-miss');
    expect(e.message).toContain('the code (1 character) is not in lookup table `gender`');
    expect(e.message).not.toContain('`Z`');
    expect(e.issue.location).toMatchObject(positionIn('valid.yaml', '$lookup($gender'));
  });

  it('passes RefError through as the cause, with its code', async () => {
    const failing: EvalContext = {
      ...ctx,
      resolveRef: (name, key) => {
        throw new RefError(name, key);
      },
    };
    const e = await evalError(c.resources.get('careteam')!.evalMap([{ MRN: '1', NPI: 'A' }], failing));
    expect(e.code).toBe('ref-unresolved');
    expect(e.cause).toBeInstanceOf(RefError);
    expect((e.cause as RefError).target).toBe('patient');
    expect(e.issue.location).toMatchObject(positionIn('valid.yaml', '$ref("patient"'));
  });

  it('evaluates match: identifier by default, references for CareTeam, or an expression', async () => {
    const patient = c.resources.get('patient')!;
    expect(await patient.evalMatch!({ identifier: [{ value: 'x' }, { system: 'urn:clinic:mrn', value: '00123' }] })).toBe('urn:clinic:mrn|00123');
    expect(await patient.evalMatch!({})).toBeUndefined();
    const practitioner = c.resources.get('practitioner')!;
    expect(
      await practitioner.evalMatch!({
        identifier: [
          { system: 'urn:other', value: '1' },
          { system: 'urn:npi', value: '999' },
        ],
      }),
    ).toBe('999');
    expect(await practitioner.evalMatch!({ identifier: [] })).toBeUndefined();
    const team = {
      subject: { reference: 'Patient/p1' },
      participant: [{ member: { reference: 'Practitioner/b' } }, { member: { reference: 'Practitioner/a' } }],
    };
    expect(await c.resources.get('careteam')!.evalMatch!(team)).toBe('subject=Patient/p1;members=Practitioner/a,Practitioner/b');
  });

  it('adds resourceType when the map leaves it out', async () => {
    expect(await c.resources.get('practitioner')!.evalMap({ npi: '1', last: 'Doe', first: 'Jo' }, ctx)).toEqual({
      resourceType: 'Practitioner',
      identifier: [{ system: 'urn:npi', value: '1' }],
      name: [{ family: 'Doe', given: ['Jo'] }],
    });
  });

  it('evaluates export columns with $sourceKey', async () => {
    const ex = c.exports.get('observations')!;
    expect(ex.columns).toEqual(['id', '2', 'mrn']);
    expect(await ex.evalRow({ id: 'o1', subject: { reference: 'Patient/p9' } }, ctx)).toEqual({ id: 'o1', 2: 'Patient/p9', mrn: 'MRN-p9' });
    expect(await ex.evalRow({ id: 'o2' }, ctx)).toEqual({ id: 'o2', 2: undefined, mrn: undefined });
  });

  it('evaluates rows sequentially without mixing contexts', async () => {
    const p = c.resources.get('careteam')!;
    for (let i = 0; i < 50; i++) {
      const local: EvalContext = { ...ctx, resolveRef: (name, key) => `X/${i}-${name}-${key}` };
      const out = (await p.evalMap([{ MRN: String(i), NPI: 'n' }], local)) as { subject: { reference: string } };
      expect(out.subject.reference).toBe(`X/${i}-patient-${i}`);
    }
  });
});

describe('compileMapping: runtime errors and map results', () => {
  let c: CompiledMapping;
  beforeAll(async () => {
    c = await compileFixture('runtime.yaml');
  });

  it('maps a JSONata runtime error to file:line:col with its code', async () => {
    const p = c.resources.get('patient')!;
    const e = await evalError(p.evalMap([{ MRN: '1', ORDER: 'first' }], ctx));
    expect(e.code).toBe('jsonata');
    expect(e.jsonataCode).toBe('T2001');
    expect(e.message).toContain('[T2001]');
    // `"active": $[0].ORDER + 1 > 0,` — the + operator
    expect(e.issue.location).toEqual({ file: fixture('runtime.yaml'), ...positionIn('runtime.yaml', '+ 1') });
  });

  it('evaluates the groupBy key, reporting a missing group key', async () => {
    const p = c.resources.get('patient')!;
    expect(await p.evalGroupKey!({ SITE: 'A', MRN: 1 })).toBe('A1');
    expect(await p.evalKey({ SITE: 'A', MRN: 1 })).toBe('1');
    const e = await evalError(p.evalGroupKey!({ SITE: '', MRN: '' }));
    expect(e.code).toBe('key-missing');
    expect(e.role).toBe('groupBy');
    expect(e.issue.message).toContain('group key');
  });

  it('positions errors inside double-quoted expressions', async () => {
    const ct = c.resources.get('careteam')!;
    const e = await evalError(ct.evalMap({ TEAM: 1, MRN: '' }, ctx));
    expect(e.code).toBe('ref-key-missing');
    expect(e.issue.location).toEqual({ file: fixture('runtime.yaml'), ...positionIn('runtime.yaml', '$ref(\\"patient') });
  });

  it('checks the map result: an object of the mapping type', async () => {
    const ct = c.resources.get('careteam')!;
    expect(await ct.evalMap({ MRN: '1', NAME: 'Team' }, ctx)).toEqual({
      resourceType: 'CareTeam',
      subject: { reference: 'Patient/patient-1' },
      name: 'Team',
    });
  });
});

describe('prune', () => {
  it('removes undefined, null, blank strings, empty arrays and objects recursively', () => {
    expect(
      prune({
        a: undefined,
        b: null,
        c: '',
        d: '  ',
        e: [],
        f: {},
        g: [{ h: undefined }, null, ''],
        i: { j: { k: [] } },
        keep: [0, false, 'x', { y: 1 }],
        n: Number.NaN,
      }),
    ).toEqual({ keep: [0, false, 'x', { y: 1 }] });
    expect(prune({ telecom: [] })).toBeUndefined();
    expect(prune('  ')).toBeUndefined();
  });

  it('returns plain arrays (no JSONata sequence flags)', () => {
    const seq = Object.assign([1, 2], { sequence: true });
    const out = prune({ a: seq }) as { a: unknown[] };
    expect(Object.keys(out.a)).toEqual(['0', '1']);
    expect((out.a as unknown as { sequence?: boolean }).sequence).toBeUndefined();
  });
});

describe('identifierMatch', () => {
  it('uses the first identifier having system and value', () => {
    expect(identifierMatch({ identifier: [{ system: 's', value: 1 }] })).toBe('s|1');
    expect(identifierMatch({ identifier: [{ system: '', value: '1' }] })).toBeUndefined();
    expect(identifierMatch(null)).toBeUndefined();
  });
});

describe('compileMapping: map results and expression contexts', () => {
  const yaml = (resources: string, extra = '') => `version: 1\nsources:\n  rows: { path: rows.csv }\nresources:\n${resources}${extra}`;

  async function compileText(text: string): Promise<CompiledMapping> {
    const { mkdtemp, writeFile, rm } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = await mkdtemp(join(tmpdir(), 'care-etl-compile-'));
    try {
      await writeFile(join(dir, 'm.yaml'), text);
      return compileMapping(await loadMapping(join(dir, 'm.yaml'), { env: {} }));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  it('skips a record when the map produces nothing', async () => {
    const c = await compileText(yaml('  - { name: p, type: Patient, from: rows, key: ID, map: \'STATUS != "deleted" ? { "active": true }\' }\n'));
    const p = c.resources.get('p')!;
    expect(await p.evalMap({ ID: 1, STATUS: 'deleted' }, ctx)).toBeUndefined();
    expect(await p.evalMap({ ID: 1, STATUS: 'ok' }, ctx)).toEqual({ resourceType: 'Patient', active: true });
  });

  it('rejects a map result that is not one object of the mapping type', async () => {
    const c = await compileText(
      yaml(
        '  - { name: a, type: Patient, from: rows, key: ID, map: "[1, 2]" }\n' +
          '  - { name: b, type: Patient, from: rows, key: ID, map: \'{ "resourceType": "Practitioner" }\' }\n',
      ),
    );
    expect((await evalError(c.resources.get('a')!.evalMap({}, ctx))).code).toBe('map-not-object');
    const e = await evalError(c.resources.get('b')!.evalMap({}, ctx));
    expect(e.code).toBe('resource-type-mismatch');
    expect(e.issue.location).toMatchObject({ line: 6 });
  });

  it('allows $ref only in map and $sourceKey only in map and export columns', async () => {
    const { issues } = await issuesOf(() =>
      compileText(
        yaml(
          '  - { name: p, type: Patient, from: rows, key: $sourceKey(ID), match: \'$ref("p", ID)\', map: "{}" }\n',
          'exports:\n  obs:\n    columns: { a: \'$ref("p", x)\', b: $sourceKey(subject.reference) }\n',
        ),
      ),
    );
    expect(issues.map((i) => [i.code, i.path])).toEqual([
      ['ref-context', '/resources/0/key'],
      ['ref-context', '/resources/0/match'],
      ['ref-context', '/exports/obs/columns/a'],
    ]);
  });

  it('fails a runaway expression with a guardrail error instead of hanging', async () => {
    const c = await compileText(
      yaml('  - { name: p, type: Patient, from: rows, key: ID, map: \'( $f := function($n) { 1 + $f($n + 1) }; { "active": $f(0) } )\' }\n'),
    );
    const e = await evalError(c.resources.get('p')!.evalMap({}, ctx));
    expect(e.code).toBe('jsonata');
    expect(['D1011', 'D1012']).toContain(e.jsonataCode);
  });
});
