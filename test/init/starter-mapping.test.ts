import { cpSync, mkdirSync, mkdtempSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CareEtlError } from '../../src/core/issues.js';
import { findRecordsPath, sniffDelimiter } from '../../src/init/inspect-export.js';
import { generateStarterMapping, guessType, writeStarterMapping } from '../../src/init/starter-mapping.js';
import { validateMapping } from '../../src/pipeline/validate-mapping.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLINIC = [join('data', 'patients.csv'), join('data', 'practitioners.json'), join('data', 'assignments.csv')];

/** A temp folder holding a copy of the example clinic's exports. */
function clinicCopy(): string {
  const dir = mkdtempSync(join(tmpdir(), 'care-etl-init-'));
  cpSync(join(ROOT, 'examples/clinic/data'), join(dir, 'data'), { recursive: true });
  return dir;
}

/**
 * What an author does: resolve every `$TODO("…")` (a gender code's label, else a namespace URI) and uncomment
 * every suggested field.
 */
function fillIn(text: string): string {
  return text
    .replace(/'?\$TODO\("((?:[^"\\]|\\.)*)"\)'?/g, (_, ask: string) => (ask.startsWith('the FHIR gender of the code') ? 'other' : '"urn:example:filled"'))
    .replace(/^(\s*)\/\* (".*,) \*\/$/gm, '$1$2');
}

async function issuesOf(f: () => Promise<unknown>) {
  try {
    await f();
  } catch (err) {
    expect(err).toBeInstanceOf(CareEtlError);
    return err as CareEtlError;
  }
  throw new Error('expected a CareEtlError');
}

describe('care-etl init on the example clinic exports', () => {
  it('writes sources, one guessed resource per export, the editor modeline and a commented target', async () => {
    const dir = clinicCopy();
    const r = await writeStarterMapping({ from: CLINIC, cwd: dir });
    const text = readFileSync(join(dir, 'mapping.yaml'), 'utf8');
    expect(r.text).toBe(text);

    const modeline = /^# yaml-language-server: \$schema=(\S+)\n/.exec(text);
    expect(modeline).not.toBeNull();
    expect(modeline![1]).toBe('./mapping.schema.json');
    expect(readFileSync(join(dir, 'mapping.schema.json'), 'utf8')).toBe(readFileSync(join(ROOT, 'schemas', 'mapping.schema.json'), 'utf8'));
    expect(text).toContain('# target:\n#   baseUrl: ${CARE_BASE_URL}\n#   apiKey: ${CARE_API_KEY}');
    expect(text).toContain('  patients:       { path: data/patients.csv }');
    expect(text).toContain('  practitioners:  { path: data/practitioners.json, records: staff }');
    expect(text).toContain('  assignments:    { path: data/assignments.csv, csv: { delimiter: ";" } }');

    expect(r.resources.map((x) => [x.name, x.type, x.key ?? `groupBy ${x.groupBy}`])).toEqual([
      ['patient', 'Patient', 'MRN'],
      ['practitioner', 'Practitioner', 'npi'],
      ['careteam', 'CareTeam', 'groupBy MRN'],
    ]);
    // Every column of every export is listed in its map.
    for (const col of ['FIRST', 'LAST', 'DOB', 'SEX', 'PHONE', 'EMAIL', 'ADDRESS', 'CITY', 'STATE', 'ZIP']) expect(text).toContain(col);
    for (const col of ['firstName', 'lastName', 'title', 'gender', 'role', 'phone', 'email', 'active']) expect(text).toContain(col);
    expect(text).toContain('/* "birthDate": $date(DOB, "MM/DD/YYYY"), */');
    expect(text).toContain('"subject": { "reference": $ref("patient", $[0].MRN) }');
    expect(text).toContain('"member": { "reference": $ref("practitioner", NPI) }');
    expect(text).toContain('/* "period": { "start": $dateTime(START, "YYYY-MM-DD"), "end": $dateTime(END, "YYYY-MM-DD") }, */');
    // The sex code X has no obvious label: a marker in the lookup table, counted like the others.
    expect(text).toContain(`  gender: { "F": female, "M": male, "X": '$TODO("the FHIR gender of the code X: male, female, other or unknown")' }`);
    expect(r.todos).toBe(2);
  });

  it('`validate` points at every TODO left, then accepts the mapping once they are filled in', async () => {
    const dir = clinicCopy();
    const r = await writeStarterMapping({ from: CLINIC, cwd: dir });
    const err = await issuesOf(() => validateMapping(join(dir, 'mapping.yaml')));
    expect(err.exitCode).toBe(2);
    // as many issues as init counted, each a `todo` with its text, pointing at the marker itself
    expect(err.issues.map((i) => [i.code, i.path, i.message])).toEqual([
      ['todo', '/lookups/gender/X', 'lookup `gender` code `X`: TODO — the FHIR gender of the code X: male, female, other or unknown'],
      ['todo', '/resources/0/map', 'mapping `patient` map: TODO — the namespace (URI) of your MRNs, e.g. urn:your-clinic:mrn'],
    ]);
    expect(err.issues).toHaveLength(r.todos);
    for (const todo of err.issues) {
      const line = r.text.split('\n')[todo.location!.line! - 1]!;
      expect(line.slice(todo.location!.column! - 1)).toMatch(/^\$TODO\("/);
    }

    writeFileSync(join(dir, 'filled.yaml'), fillIn(r.text));
    const report = await validateMapping(join(dir, 'filled.yaml'), { sample: 6 });
    expect(report.order).toEqual(['patient', 'practitioner', 'careteam']);
    for (const s of Object.values(report.samples!)) expect(s.rejects).toEqual([]);
    expect(report.samples!.patient).toMatchObject({ rows: 6, valid: 6 });
  });

  it('never overwrites an existing file without force', async () => {
    const dir = clinicCopy();
    writeFileSync(join(dir, 'mapping.yaml'), 'mine\n');
    const err = await issuesOf(() => writeStarterMapping({ from: CLINIC, cwd: dir }));
    expect(err.exitCode).toBe(2);
    expect(err.message).toBe('mapping.yaml already exists: not overwritten');
    expect(err.hint).toContain('--force');
    expect(readFileSync(join(dir, 'mapping.yaml'), 'utf8')).toBe('mine\n');
    await writeStarterMapping({ from: CLINIC, cwd: dir, force: true });
    expect(readFileSync(join(dir, 'mapping.yaml'), 'utf8')).toMatch(/^# yaml-language-server:/);
  });

  it('writes source paths relative to --out', async () => {
    const dir = clinicCopy();
    const r = await generateStarterMapping({ from: CLINIC, cwd: dir, out: 'onboarding/clinic.yaml' });
    expect(r.text).toContain('{ path: ../data/patients.csv }');
    expect(r.text).toMatch(/^# yaml-language-server: \$schema=\.\/mapping\.schema\.json\n/);
  });

  it('a mapping written by init, its folder moved elsewhere (a commit cloned on another machine): $schema still resolves, it validates', async () => {
    const dir = clinicCopy();
    mkdirSync(join(dir, 'onboarding'));
    const r = await writeStarterMapping({ from: CLINIC, cwd: dir, out: 'onboarding/clinic.yaml' });
    expect(r.schemaCopy).toBe(join(dir, 'onboarding', 'mapping.schema.json'));
    const moved = join(mkdtempSync(join(tmpdir(), 'care-etl-clone-')), 'repo');
    renameSync(dir, moved);
    const mapping = join(moved, 'onboarding', 'clinic.yaml');
    const schema = /^# yaml-language-server: \$schema=(\S+)\n/.exec(readFileSync(mapping, 'utf8'))![1]!;
    expect(JSON.parse(readFileSync(resolve(dirname(mapping), schema), 'utf8'))).toEqual(
      JSON.parse(readFileSync(join(ROOT, 'schemas', 'mapping.schema.json'), 'utf8')),
    );
    writeFileSync(mapping, fillIn(r.text));
    expect((await validateMapping(mapping)).order).toEqual(['patient', 'practitioner', 'careteam']);
  });
});

describe('care-etl init on other exports', () => {
  it('an export with no obvious type gets TODO markers that validate reports with positions', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-init-'));
    writeFileSync(join(dir, 'misc.csv'), 'Code|Value|Comment\n1|2|x\n');
    const r = await writeStarterMapping({ from: ['misc.csv'], cwd: dir });
    expect(r.resources[0]).toMatchObject({ name: 'misc', type: undefined });
    expect(r.text).toMatch(/ {2}misc: +\{ path: misc\.csv, csv: \{ delimiter: "\|" \} \}/);
    expect(r.text).toContain(`    key: '$TODO("the column that identifies a record")'`);
    expect(r.text).toContain(`    type: '$TODO("Patient, Practitioner or CareTeam")'`);
    expect(r.text).toContain('/* columns (choose the type, then map them): Code, Value, Comment */');
    expect(r.todos).toBe(2);
    // One pass: the type (a schema error) and the key (an expression) together, each with its text; the
    // schema's own "must be one of" for the marker is not repeated.
    const err = await issuesOf(() => validateMapping(join(dir, 'mapping.yaml')));
    expect(err.issues.map((i) => [i.code, i.path, i.message])).toEqual([
      ['todo', '/resources/0/type', 'mapping `misc` type: TODO — Patient, Practitioner or CareTeam'],
      ['todo', '/resources/0/key', 'mapping `misc` key: TODO — the column that identifies a record'],
    ]);
    expect(err.message).toMatch(/: 2 TODO markers$/);
    expect(r.text.split('\n')[err.issues[0]!.location!.line! - 1]).toContain(`type: '$TODO(`);
  });

  it('JSON records nested in the document, NDJSON, and names that need quoting', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-init-'));
    writeFileSync(
      join(dir, 'clients.json'),
      JSON.stringify({ meta: { n: 1 }, data: { clients: [{ 'Client Id': 'c1', 'First Name': 'A', 'Last Name': 'B', Sex: 'male' }] } }),
    );
    writeFileSync(join(dir, 'Practitioner.ndjson'), `${JSON.stringify({ NPI: '1234567893', Gender: 'F' })}\n`);
    const r = await generateStarterMapping({ from: ['clients.json', 'Practitioner.ndjson'], cwd: dir });
    expect(r.text).toContain('{ path: clients.json, records: data.clients }');
    expect(r.resources.map((x) => [x.type, x.key])).toEqual([
      ['Patient', 'Client Id'],
      ['Practitioner', 'NPI'],
    ]);
    expect(r.text).toContain('    key: "`Client Id`"');
    expect(r.text).toContain('/* "name": [{ "use": "official", "family": $name(`Last Name`), "given": [$name(`First Name`)] }], */');
    expect(r.text).toContain('/* "gender": Sex, */'); // already FHIR codes: no lookup
    expect(r.text).toContain('"identifier": [{ "system": "http://hl7.org/fhir/sid/us-npi", "value": NPI }]');
  });

  it('a JSON `name` that holds objects is not split as text: a TODO says so (no $substringAfter on an array)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-init-'));
    const rows = [{ mrn: 'm1', name: [{ first: 'Ana', last: 'Diaz' }], sex: 'F' }];
    writeFileSync(join(dir, 'patients.json'), JSON.stringify(rows));
    const r = await generateStarterMapping({ from: ['patients.json'], cwd: dir });
    expect(r.text).not.toContain('$substringAfter(name');
    expect(r.text).toContain('$TODO("name holds objects or arrays, not text');
  });

  it('Synthea-style exports: Id keys, a CareTeam grouped by PATIENT with PROVIDER members', async () => {
    const r = await generateStarterMapping({
      from: ['mappings/synthea/sample/patients.csv', 'mappings/synthea/sample/providers.csv', 'mappings/synthea/sample/encounters.csv'],
      cwd: ROOT,
      out: join(tmpdir(), 'synthea-starter.yaml'),
    });
    expect(r.resources.map((x) => [x.type, x.key ?? x.groupBy])).toEqual([
      ['Patient', 'Id'],
      ['Practitioner', 'Id'],
      ['CareTeam', 'PATIENT'],
    ]);
    expect(r.text).toContain('"member": { "reference": $ref("practitioner", PROVIDER) }');
    expect(r.text).toContain('$dateTime(START, "YYYY-MM-DDTHH:mm:ssZ")');
  });

  it('a column empty in every sampled row is never chosen as a key, groupBy or member column', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-init-'));
    writeFileSync(join(dir, 'patients.csv'), 'MRN,PATIENT_ID,LAST\n,p-1,A\n ,p-2,B\n');
    writeFileSync(join(dir, 'staff.csv'), 'NPI,STAFF_ID,LAST\n,s-1,C\n,s-2,D\n');
    writeFileSync(join(dir, 'assignments.csv'), 'MRN,PATIENT_ID,NPI,STAFF_ID\n,p-1,,s-1\n,p-2,,s-2\n');
    writeFileSync(join(dir, 'clients.csv'), 'MRN,NOTE\n,x\n');
    const r = await generateStarterMapping({ from: ['patients.csv', 'staff.csv', 'assignments.csv', 'clients.csv'], cwd: dir });
    expect(r.resources.map((x) => [x.name, x.key ?? x.groupBy])).toEqual([
      ['patients', 'PATIENT_ID'],
      ['practitioner', 'STAFF_ID'],
      ['careteam', 'PATIENT_ID'],
      ['clients', undefined],
    ]);
    expect(r.text).toContain('"member": { "reference": $ref("practitioner", STAFF_ID) }');
    // No candidate holds a value: a TODO naming the empty column (its name only, never a value).
    expect(r.text).toContain(`key: '$TODO("the column that identifies a record, e.g. MRN (MRN: empty in every sampled row)")'`);
    // A header-only export has no sampled row: its columns stay candidates.
    writeFileSync(join(dir, 'header-only.csv'), 'MRN,LAST\n');
    const h = await generateStarterMapping({ from: ['header-only.csv'], cwd: dir });
    expect(h.resources[0]).toMatchObject({ type: 'Patient', key: 'MRN' });
  });

  it('two exports guessed as one type: two mappings, the second naming the first', async () => {
    const dir = clinicCopy();
    cpSync(join(dir, 'data/patients.csv'), join(dir, 'data/patients-2024.csv'));
    const r = await generateStarterMapping({ from: [join('data', 'patients.csv'), join('data', 'patients-2024.csv')], cwd: dir });
    expect(r.resources.map((x) => [x.name, x.type])).toEqual([
      ['patients', 'Patient'],
      ['patients-2024', 'Patient'],
    ]);
    const at = r.text.indexOf('  - name: patients-2024');
    expect(r.text.slice(0, at)).toMatch(
      / {2}# Another Patient mapping — the first is `patients` \(from data\/patients\.csv\)\. Each loads the records of its\n {2}# own export: one present in both is loaded twice\./,
    );
  });

  it('a missing or unknown file is an exit-2 error', async () => {
    const err = await issuesOf(() => generateStarterMapping({ from: ['nope.csv'], cwd: tmpdir() }));
    expect(err.exitCode).toBe(2);
    expect(err.message).toContain('file not found');
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-init-'));
    writeFileSync(join(dir, 'x.xlsx'), '');
    expect((await issuesOf(() => generateStarterMapping({ from: ['x.xlsx'], cwd: dir }))).message).toContain('cannot tell the format');
  });
});

describe('helpers', () => {
  it('sniffDelimiter counts outside quotes', () => {
    expect(sniffDelimiter('a,b,c')).toBe(',');
    expect(sniffDelimiter('MRN;NPI;"A,B,C,D"')).toBe(';');
    expect(sniffDelimiter('a\tb\tc')).toBe('\t');
    expect(sniffDelimiter('single')).toBe(',');
  });

  it('findRecordsPath finds the first array of objects', () => {
    expect(findRecordsPath({ clinic: 'x', staff: [{ a: 1 }] })).toBe('staff');
    expect(findRecordsPath({ a: { b: { c: [{}] } } })).toBe('a.b.c');
    expect(findRecordsPath({ tags: ['x'], n: 1 })).toBeUndefined();
  });

  it('guessType: file name first, then MRN / NPI columns', () => {
    const cols = (...names: string[]) => names.map((name) => ({ name, seen: true }));
    expect(guessType('x/clients.csv', cols('ID')).type).toBe('Patient');
    expect(guessType('x/export.csv', cols('MRN', 'NPI')).type).toBe('CareTeam');
    expect(guessType('x/export.csv', cols('Patient MRN')).type).toBe('Patient');
    expect(guessType('x/export.csv', cols('Code', 'Value')).type).toBeUndefined();
    expect(guessType('x/export.csv', cols('mrn')).type).toBe('Patient');
    expect(guessType('x/export.csv', cols('npi')).type).toBe('Practitioner');
  });
});
