import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CareEtlError } from '../../src/core/issues.js';
import { generateStarterMapping, writeStarterMapping, type StarterResult } from '../../src/init/starter-mapping.js';
import { validateMapping } from '../../src/pipeline/validate-mapping.js';
import { all, checkReferences, startMappingRun, type MappingRun } from '../mappings/helpers.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const NDJSON = join(ROOT, 'test/fixtures/init/fhir-ndjson');
const SYNTHEA_FHIR = join(ROOT, 'mappings/synthea-fhir/sample');
const ALL_ROWS = 10_000;

const tmp = () => mkdtempSync(join(tmpdir(), 'care-etl-init-fhir-'));

/** The `todo` issues validate reports for a mapping file ([] when it is valid). */
async function todoIssues(file: string) {
  try {
    await validateMapping(file);
    return [];
  } catch (err) {
    expect(err).toBeInstanceOf(CareEtlError);
    const issues = (err as CareEtlError).issues;
    // nothing but the markers: init wrote no other problem
    expect(issues.filter((i) => i.code !== 'todo')).toEqual([]);
    return issues;
  }
}

/** init, then validate: the count init printed is the number of `todo` issues, each with its marker's text. */
async function initAndCount(from: string[], cwd: string): Promise<{ r: StarterResult; file: string; asked: string[] }> {
  const out = join(tmp(), 'mapping.yaml');
  const r = await writeStarterMapping({ from, cwd, out });
  const issues = await todoIssues(out);
  expect(issues).toHaveLength(r.todos);
  const asked = [...r.text.matchAll(/\$TODO\("((?:[^"\\]|\\.)*)"\)/g)].filter((m) => !/^\s*(#|\/\*)/.test(lineOf(r.text, m.index))).map((m) => m[1]!);
  expect(issues.map((i) => i.message.replace(/^.*?: TODO — /, ''))).toEqual(asked);
  return { r, file: out, asked };
}

const lineOf = (text: string, offset: number) => text.slice(text.lastIndexOf('\n', offset) + 1, offset);

/** Every rejection of a `validate --sample` over all rows, as `mapping: code message`. */
async function sampleRejects(file: string) {
  const report = await validateMapping(file, { sample: ALL_ROWS });
  return { report, rejects: Object.entries(report.samples!).flatMap(([m, s]) => s.rejects.map((x) => `${m}: ${x.issues[0]?.code} ${x.issues[0]?.message}`)) };
}

describe('init on a FHIR Bulk Data export (Patient, Practitioner, PractitionerRole, Encounter NDJSON)', () => {
  const from = ['Patient.ndjson', 'Practitioner.ndjson', 'PractitionerRole.ndjson', 'Encounter.ndjson'];

  it('maps FHIR arrays as FHIR, keys practitioners by the NPI the encounters use, builds care teams from encounters', async () => {
    const r = await generateStarterMapping({ from, cwd: NDJSON, out: join(tmp(), 'm.yaml') });
    expect(r.resources.map((x) => [x.file, x.name, x.type, x.key ?? x.groupBy])).toEqual([
      ['Patient.ndjson', 'patient', 'Patient', 'id'],
      ['Practitioner.ndjson', 'practitioner', 'Practitioner', 'identifier http://hl7.org/fhir/sid/us-npi'],
      ['Encounter.ndjson', 'careteam', 'CareTeam', 'subject (patient)'],
    ]);
    // PractitionerRole is not a second Practitioner mapping: a note, and its source left commented.
    expect(r.notes).toEqual([
      {
        file: 'PractitionerRole.ndjson',
        resourceType: 'PractitionerRole',
        note: expect.stringContaining('a second Practitioner mapping would load each of them twice'),
      },
    ]);
    expect(r.text.match(/^ {4}type: Practitioner$/gm)).toHaveLength(1);
    expect(r.text).toMatch(/^ {2}# practitionerrole: +\{ path: \S*PractitionerRole\.ndjson \} +# not a mapping/m);
    expect(r.text).toContain('mappings/synthea-fhir/mapping.yaml does exactly this');

    // identifier, telecom and name arrays are read as arrays, not as columns
    expect(r.text).not.toContain('$substringAfter(name');
    expect(r.text).not.toContain('no obvious Patient field');
    expect(r.text).toContain('"name": [name.{ "use": use, "family": family, "given": [given], "prefix": [prefix] }],');
    expect(r.text).toContain('"telecom": [telecom[value].{ "system": system, "value": value, "use": use }],');
    // national identifiers (SSN, driver's licence) seen in the sample are left out
    expect(r.text).toContain('"identifier": [identifier[value and $not($exists(type.coding[code in ["SS", "DL"]]))].{ "system": system, "value": value }],');
    expect(r.text).toContain(`key: 'identifier[system = "http://hl7.org/fhir/sid/us-npi"].value'`);
    expect(r.text).toContain('$ref("practitioner", $member)');
    // the ready-made mappings are named, as paths that exist from the mapping's folder
    expect(r.readyMade!.map((p) => p.slice(ROOT.length))).toEqual(['mappings/fhir-r4-bulk/mapping.yaml', 'mappings/synthea-fhir/mapping.yaml']);
    for (const m of ['fhir-r4-bulk', 'synthea-fhir']) {
      const rel = new RegExp(`^#\\s+(\\S*mappings/${m}/mapping\\.yaml)$`, 'm').exec(r.text)![1]!;
      expect(resolve(join(r.out, '..'), rel)).toBe(join(ROOT, 'mappings', m, 'mapping.yaml'));
      expect(existsSync(join(ROOT, 'mappings', m, 'mapping.yaml'))).toBe(true);
    }
    expect(r.todos).toBe(0);
  });

  it('validate agrees (no TODO) and --sample maps every row: one care team per patient, no rejection', async () => {
    const { file } = await initAndCount(from, NDJSON);
    const { report, rejects } = await sampleRejects(file);
    expect(rejects).toEqual([]);
    expect(report.order).toEqual(['patient', 'practitioner', 'careteam']);
    expect(report.samples).toMatchObject({ patient: { rows: 3, valid: 3 }, practitioner: { rows: 3, valid: 3 }, careteam: { rows: 7, valid: 3 } });
  });

  it('without the Practitioner export: a TODO where the members would be, counted and reported with its text; filled, valid', async () => {
    const { r, file, asked } = await initAndCount(['Patient.ndjson', 'Encounter.ndjson'], NDJSON);
    expect(r.todos).toBe(1);
    expect(asked[0]).toMatch(/^Encounter participants refer to practitioners, but no Practitioner export was given to init: .* or write \[\] /);
    writeFileSync(file, readFileSync(file, 'utf8').replace(/\$TODO\("Encounter participants[^"]*"\)/, '[]'));
    expect(await todoIssues(file)).toEqual([]);
    const { report, rejects } = await sampleRejects(file);
    expect(rejects).toEqual([]);
    expect(report.samples!.careteam).toMatchObject({ rows: 7, valid: 3 });
  });

  it('two exports of one type: the second mapping names the first; a file mixing types keeps each mapping to its own lines', async () => {
    const r = await generateStarterMapping({
      from: [join(NDJSON, 'Patient.ndjson'), join(ROOT, 'test/fixtures/init/fhir-mixed/export.ndjson')],
      cwd: ROOT,
      out: join(tmp(), 'm.yaml'),
    });
    expect(r.resources.map((x) => [x.name, x.type, x.source])).toEqual([
      ['patient', 'Patient', 'patient'],
      ['export_patient', 'Patient', 'export'],
      ['practitioner', 'Practitioner', 'export'],
    ]);
    expect(r.text).toContain('# Another Patient mapping — the first is `patient` (from');
    expect(r.text).toContain(': $error("line holds a " & resourceType & ", not a Patient: this mapping (Patient) reads only the Patient lines")');

    const out = r.out;
    writeFileSync(out, r.text);
    const { report, rejects } = await sampleRejects(out);
    // the mixed file's mappings reject exactly the lines of the other type, saying why
    expect(rejects).toEqual([
      'export_patient: jsonata mapping `export_patient` map: line holds a Practitioner, not a Patient: this mapping (Patient) reads only the Patient lines [D3137]',
      'practitioner: jsonata mapping `practitioner` map: line holds a Patient, not a Practitioner: this mapping (Practitioner) reads only the Practitioner lines [D3137]',
      'practitioner: jsonata mapping `practitioner` map: line holds a Patient, not a Practitioner: this mapping (Practitioner) reads only the Practitioner lines [D3137]',
    ]);
    expect(report.samples).toMatchObject({ patient: { valid: 3 }, export_patient: { valid: 2 }, practitioner: { valid: 1 } });
  });
});

describe('init on a FHIR Bundle (urn:uuid references)', () => {
  it('one source per resource type, selected from the entries; keys by id; validate --sample accepts every row', async () => {
    const { r, file } = await initAndCount(['patient-bundle.json'], join(ROOT, 'test/fixtures/init/fhir-bundle'));
    expect(r.text).toMatch(
      /patient-bundle_patient: +\{ path: \S+patient-bundle\.json, records: 'entry\.resource\[resourceType = "Patient"\]', optional: \[identifier, active, [^\]]*\] \}/,
    );
    expect(r.resources.map((x) => [x.name, x.type, x.key ?? x.groupBy])).toEqual([
      ['patient', 'Patient', 'id'],
      ['practitioner', 'Practitioner', 'id'],
      ['careteam', 'CareTeam', 'subject (patient)'],
    ]);
    expect(r.todos).toBe(0);
    const { report, rejects } = await sampleRejects(file);
    expect(rejects).toEqual([]);
    expect(report.samples).toMatchObject({ patient: { rows: 1, valid: 1 }, practitioner: { rows: 1, valid: 1 }, careteam: { rows: 2, valid: 1 } });
  });
});

describe('init on the repository FHIR bulk sample (mappings/synthea-fhir/sample)', () => {
  const from = ['Patient.ndjson', 'Practitioner.ndjson', 'PractitionerRole.ndjson', 'Encounter.ndjson'];
  let run: MappingRun;
  beforeAll(async () => {
    run = await startMappingRun();
  });
  afterAll(async () => {
    await run.close();
  });

  it('yields a mapping validate accepts once the TODOs it lists are filled (there are none), and every row maps', async () => {
    const { r, file } = await initAndCount(from, SYNTHEA_FHIR);
    expect(r.todos).toBe(0);
    const { report, rejects } = await sampleRejects(file);
    expect(rejects).toEqual([]);
    expect(report.samples).toMatchObject({ patient: { rows: 27, valid: 27 }, practitioner: { rows: 45, valid: 45 }, careteam: { rows: 222, valid: 27 } });

    // Loaded into the sandbox: every care-team reference (patients by id, members by NPI) finds its resource.
    const loaded = await run.run(file);
    expect(loaded.totals).toMatchObject({ created: 27 + 45 + 27, rejected: 0 });
    const client = run.client();
    const { participants, dangling } = checkReferences(await all(client, 'Patient'), await all(client, 'Practitioner'), await all(client, 'CareTeam'));
    expect(dangling).toEqual([]);
    // every practitioner of the sample is some patient's care-team member (they were chosen from the encounters)
    expect(participants).toBeGreaterThanOrEqual(45);
  });
});
