import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { generateStarterMapping } from '../../src/init/starter-mapping.js';
import { omopTableOf } from '../../src/init/omop-starter.js';
import { validateMapping } from '../../src/pipeline/validate-mapping.js';

const SAMPLE = join(import.meta.dirname, '..', '..', 'mappings', 'omop-cdm', 'sample');

/** A sample table rewritten: columns kept, renamed and reordered by `cols(header)`, rows filtered. */
function table(
  dir: string,
  file: string,
  from: string,
  opts: { cols?: (h: string[]) => string[]; rename?: (c: string) => string; rows?: (r: Record<string, string>) => Record<string, string> } = {},
): string {
  const [head, ...lines] = readFileSync(join(SAMPLE, from), 'utf8').trim().split('\n');
  const header = head!.split(',');
  const records = lines.map((l) => Object.fromEntries(l.split(',').map((v, i) => [header[i]!, v])) as Record<string, string>).map(opts.rows ?? ((r) => r));
  const cols = opts.cols ? opts.cols(header) : header;
  const rename = opts.rename ?? ((c: string) => c);
  writeFileSync(join(dir, file), [cols.map(rename).join(','), ...records.map((r) => cols.map((c) => r[c] ?? '').join(','))].join('\n') + '\n');
  return file;
}

/** The answers a user gives: a URI for each identifier system asked for. */
const fillIn = (text: string) =>
  text
    .split('\n')
    .map((l) =>
      l.trimStart().startsWith('#')
        ? l
        : l.replace(/'?\$TODO\("the namespace \(URI\) of ([^"]*?)(?:,[^"]*)?"\)'?/g, (_, what: string) =>
            JSON.stringify(`urn:test:${what.replace(/\W+/g, '-')}`),
          ),
    )
    .join('\n');

describe('init on OMOP CDM tables', () => {
  it('recognises a table by its columns, whatever the file name, case and column order', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-omop-'));
    const files = [
      table(dir, 'export_1.csv', 'person.csv', { cols: (h) => [...h].reverse(), rename: (c) => c.toUpperCase() }),
      table(dir, 'export_2.csv', 'provider.csv', { rename: (c) => c.toUpperCase() }),
      table(dir, 'export_3.csv', 'visit_occurrence.csv', { rename: (c) => c.toUpperCase() }),
    ];
    const r = await generateStarterMapping({ from: files, cwd: dir });
    expect(r.omopTables).toEqual(['person', 'provider', 'visit_occurrence']);
    expect(r.resources.map((x) => [x.name, x.type, x.key ?? `groupBy ${x.groupBy}`])).toEqual([
      ['patient', 'Patient', 'PERSON_ID'],
      ['practitioner', 'Practitioner', 'PROVIDER_ID'],
      ['careteam', 'CareTeam', 'groupBy PERSON_ID'],
    ]);
    expect(r.text).toContain('$ref("patient", $pid)');
    expect(r.text).toContain('$[PROVIDER_ID].{ "provider": $string(PROVIDER_ID), "start": VISIT_START_DATE }');
    expect(r.text).not.toContain('visitDetailProviders');
    expect(r.todos).toBe(4);
    writeFileSync(join(dir, 'filled.yaml'), fillIn(r.text));
    const report = await validateMapping(join(dir, 'filled.yaml'), { sample: 100 });
    for (const s of Object.values(report.samples!)) expect(s.rejects).toEqual([]);
    expect(report.samples!.careteam).toMatchObject({ rows: 60, valid: 20 });
  });

  it('visit_detail alone makes the care teams; a table without a person or provider export leaves $ref TODOs', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-omop-'));
    const r = await generateStarterMapping({
      from: [table(dir, 'person.csv', 'person.csv'), table(dir, 'provider.csv', 'provider.csv'), table(dir, 'visit_detail.csv', 'visit_detail.csv')],
      cwd: dir,
    });
    expect(r.resources.map((x) => [x.source, x.type, x.groupBy])).toContainEqual(['visit_detail', 'CareTeam', 'person_id']);
    expect(r.text).toContain('"start": visit_detail_start_date');
    writeFileSync(join(dir, 'filled.yaml'), fillIn(r.text));
    const report = await validateMapping(join(dir, 'filled.yaml'), { sample: 100 });
    for (const s of Object.values(report.samples!)) expect(s.rejects).toEqual([]);
    expect(report.samples!.careteam).toMatchObject({ rows: 18, valid: 10 });

    const alone = await generateStarterMapping({ from: ['visit_detail.csv'], cwd: dir });
    expect(alone.text).toContain('$ref($TODO("the name of the Patient mapping keyed by person_id (no person table was given)"), $pid)');
    expect(alone.text).toContain('$ref($TODO("the name of the Practitioner mapping keyed by provider_id (no provider table was given)"), $provider)');
    expect(alone.todos).toBe(2);
  });

  it('an NDJSON export (numbers for ids and concepts, null for NULL) gives maps that work on it too', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-omop-'));
    const ndjson = (name: string) => {
      const [head, ...lines] = readFileSync(join(SAMPLE, `${name}.csv`), 'utf8')
        .trim()
        .split('\n');
      const header = head!.split(',');
      const typed = (v: string) => (v === '' ? null : /^\d+$/.test(v) ? Number(v) : v);
      writeFileSync(
        join(dir, `${name}.ndjson`),
        lines.map((l) => JSON.stringify(Object.fromEntries(l.split(',').map((v, i) => [header[i]!, typed(v)])))).join('\n') + '\n',
      );
      return `${name}.ndjson`;
    };
    const r = await generateStarterMapping({ from: ['person', 'provider', 'visit_occurrence', 'visit_detail'].map(ndjson), cwd: dir });
    expect(r.omopTables).toEqual(['person', 'provider', 'visit_occurrence', 'visit_detail']);
    writeFileSync(join(dir, 'filled.yaml'), fillIn(r.text));
    const report = await validateMapping(join(dir, 'filled.yaml'), { sample: 100 });
    for (const s of Object.values(report.samples!)) expect(s.rejects).toEqual([]);
    expect(report.samples!.patient).toMatchObject({ rows: 20, valid: 20 });
    expect(report.samples!.careteam).toMatchObject({ rows: 60, valid: 20 });
  });

  it('a gender concept or source code without a standard label is a TODO in the gender tables', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-omop-'));
    const person = table(dir, 'person.csv', 'person.csv', {
      rows: (r) => (r.person_id === '101' ? { ...r, gender_concept_id: '4215271', gender_source_value: 'X' } : r),
    });
    const r = await generateStarterMapping({ from: [person], cwd: dir });
    expect(r.text).toContain(`"4215271": '$TODO("the FHIR gender of the OMOP gender concept 4215271: male, female, other or unknown")'`);
    expect(r.text).toContain(`"X": '$TODO("the FHIR gender of the gender_source_value X: male, female, other or unknown")'`);
    expect(r.todos).toBe(4);
  });

  it('a table missing one of its signature columns falls back to the generic starter', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-omop-'));
    const file = table(dir, 'person.csv', 'person.csv', { cols: (h) => h.filter((c) => c !== 'race_concept_id') });
    const r = await generateStarterMapping({ from: [file], cwd: dir });
    expect(r.omopTables).toBeUndefined();
    expect(r.resources[0]).toMatchObject({ name: 'person', type: undefined });
    expect(omopTableOf([{ name: 'MRN', seen: true }])).toBeUndefined();
  });
});
