/**
 * mappings/synthea-fhir on its bundled Synthea FHIR Bulk sample: care teams built from Encounter.ndjson, members
 * found through an NDJSON lookup of practitioners by NPI — a dry run, then a load into the real sandbox. The
 * expected members are worked out here from the NDJSON files with plain code, not with the mapping's lookups.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { placeholderId } from '../../src/mapping/placeholder-id.js';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import { all, checkReferences, startMappingRun, type MappingRun } from '../mappings/helpers.js';

const MAPPING = fileURLToPath(new URL('../../mappings/synthea-fhir/mapping.yaml', import.meta.url));
const SAMPLE = fileURLToPath(new URL('../../mappings/synthea-fhir/sample/', import.meta.url));
const NPI = 'http://hl7.org/fhir/sid/us-npi';
const SYNTHEA = 'https://github.com/synthetichealth/synthea';

// parsed FHIR JSON, navigated freely in the assertions
type Json = Record<string, any>;
const ndjson = (file: string): Json[] =>
  readFileSync(join(SAMPLE, file), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Json);

/** Patient source id → the NPIs of the practitioners of its encounters (from `…|<NPI>` references). */
function expectedNpis(): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const e of ndjson('Encounter.ndjson')) {
    const patient = String(e.subject.reference).replace(/^Patient\//, '');
    const npis = out.get(patient) ?? new Set<string>();
    for (const p of e.participant) npis.add(String(p.individual.reference).split('|')[1]!);
    out.set(patient, npis);
  }
  return out;
}
const npiOf = (p: Json): string | undefined => (p.identifier as Json[] | undefined)?.find((i) => i.system === NPI)?.value;
/** NPI → practitioner source id, from Practitioner.ndjson. */
const sourceIdByNpi = new Map(ndjson('Practitioner.ndjson').map((p) => [npiOf(p)!, p.id as string]));
// the shipped env of a run must not depend on the caller's shell
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CARE_') && k !== 'SYNTHEA_FHIR_DIR'));

describe('mappings/synthea-fhir: care teams from encounters, members joined by NPI', () => {
  const expected = expectedNpis();

  it('the sample has what the test relies on: 27 patients, each with encounters, 45 practitioners with NPIs', () => {
    expect(expected.size).toBe(27);
    expect(sourceIdByNpi.size).toBe(45);
    for (const npis of expected.values()) for (const n of npis) expect(sourceIdByNpi.has(n), n).toBe(true);
  });

  it('a dry run writes one care team per patient whose members are its encounters’ practitioners', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-synthea-fhir-'));
    try {
      const report = await runPipeline({ mappingFile: MAPPING, env, dryRun: true, outDir: dir, rejectsFile: join(dir, 'rejects.ndjson') });
      expect(report.exitCode).toBe(0);
      expect(report.mappings.careteam).toMatchObject({ read: 222, rejected: 0 });
      const teams = readFileSync(join(dir, 'CareTeam.ndjson'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Json);
      expect(teams).toHaveLength(27);
      for (const t of teams) {
        const patient = [...expected.keys()].find((id) => t.subject.reference === `Patient/${placeholderId(id, 'dryrun')}`);
        expect(patient, t.subject.reference).toBeDefined();
        const members = (t.participant as Json[]).map((p) => p.member.reference).sort();
        const want = [...expected.get(patient!)!].map((n) => `Practitioner/${placeholderId(sourceIdByNpi.get(n)!, 'dryrun')}`).sort();
        expect(members, patient).toEqual(want);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a patient deceased without a date (`deceasedBoolean`) is inactive, and so is its care team, which has no end', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-synthea-fhir-'));
    try {
      const dead = '261ad2a4-7c6f-da54-6a5b-3441beab9a6a';
      for (const f of ['Patient', 'Practitioner', 'PractitionerRole', 'Encounter']) {
        let text = readFileSync(join(SAMPLE, `${f}.ndjson`), 'utf8');
        if (f === 'Patient') {
          text = text
            .split('\n')
            .map((l) => {
              if (!l.includes(`"id":"${dead}"`)) return l;
              const { deceasedDateTime: _date, ...p } = JSON.parse(l) as Json;
              return JSON.stringify({ ...p, deceasedBoolean: true });
            })
            .join('\n');
        }
        writeFileSync(join(dir, `${f}.ndjson`), text);
      }
      const out = join(dir, 'out');
      const report = await runPipeline({
        mappingFile: MAPPING,
        env: { ...env, SYNTHEA_FHIR_DIR: dir },
        dryRun: true,
        outDir: out,
        rejectsFile: join(dir, 'rejects.ndjson'),
      });
      expect(report.exitCode).toBe(0);
      const rows = (file: string) =>
        readFileSync(join(out, file), 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as Json);
      const ref = `Patient/${placeholderId(dead, 'dryrun')}`;
      const team = rows('CareTeam.ndjson').find((t) => t.subject.reference === ref)!;
      expect(team.status).toBe('inactive');
      expect(team.period.end).toBeUndefined();
      for (const p of team.participant as Json[]) expect(p.period.end).toBeUndefined();
      // the other deceased patient still ends on its date of death
      expect(
        rows('CareTeam.ndjson')
          .filter((t) => t.status === 'inactive')
          .map((t) => t.period.end)
          .sort(),
      ).toEqual(['2004-03-21', undefined]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('loaded into the sandbox', () => {
    let ctx: MappingRun;
    beforeAll(async () => {
      ctx = await startMappingRun();
    });
    afterAll(async () => {
      await ctx.close();
    });

    it('each care team’s members are the server ids of the practitioners its patient saw', async () => {
      const report = await ctx.run(MAPPING);
      expect(report.exitCode).toBe(0);
      expect(report.mappings.patient).toMatchObject({ read: 27, created: 27, rejected: 0 });
      expect(report.mappings.practitioner).toMatchObject({ read: 45, created: 45, rejected: 0 });
      expect(report.mappings.careteam).toMatchObject({ read: 222, created: 27, rejected: 0 });

      const client = ctx.client();
      const [patients, practitioners, teams] = [await all(client, 'Patient'), await all(client, 'Practitioner'), await all(client, 'CareTeam')];
      expect(checkReferences(patients, practitioners, teams).dangling).toEqual([]);
      // server ids → what identifies them in the export (the server assigned new ids)
      const patientSourceId = new Map(patients.map((p) => [`Patient/${p.id}`, (p.identifier as Json[]).find((i) => i.system === SYNTHEA)!.value as string]));
      const practitionerNpi = new Map(practitioners.map((p) => [`Practitioner/${p.id}`, npiOf(p as Json)!]));
      expect(new Set(practitionerNpi.values()).size).toBe(45);

      expect(teams).toHaveLength(27);
      const seen = new Set<string>();
      for (const t of teams) {
        const patient = patientSourceId.get((t.subject as Json).reference)!;
        seen.add(patient);
        const memberNpis = (t.participant as Json[]).map((p) => practitionerNpi.get(p.member.reference)).sort();
        expect(memberNpis, patient).toEqual([...expected.get(patient)!].sort());
        // the role is the practitioner's specialty, joined from PractitionerRole.ndjson by NPI
        for (const p of t.participant as Json[]) expect(p.role[0].coding[0]).toMatchObject({ system: 'http://nucc.org/provider-taxonomy', code: '208D00000X' });
      }
      expect(seen.size).toBe(27);
      // the two deceased patients' teams ended on the day of death
      expect(
        teams
          .filter((t) => t.status === 'inactive')
          .map((t) => (t.period as Json).end)
          .sort(),
      ).toEqual(['1976-07-25', '2004-03-21']);
    });

    it('a second run changes nothing', async () => {
      const report = await ctx.run(MAPPING);
      expect(report.exitCode).toBe(0);
      expect(report.totals).toMatchObject({ created: 0, updated: 0, unchanged: 27 + 45 + 27, rejected: 0 });
    });
  });
});
