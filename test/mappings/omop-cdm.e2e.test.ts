import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import { all, checkReferences, startMappingRun, type MappingRun } from './helpers.js';

const MAPPING = fileURLToPath(new URL('../../mappings/omop-cdm/mapping.yaml', import.meta.url));
let ctx: MappingRun;

beforeAll(async () => {
  ctx = await startMappingRun();
});
afterAll(async () => {
  await ctx.close();
});

describe('mappings/omop-cdm on its OMOP CDM v5.4 sample, loaded into the sandbox', () => {
  it('loads every person and provider, one care team per person, all references resolved', async () => {
    const report = await ctx.run(MAPPING);
    expect(report.exitCode).toBe(0);
    expect(report.order).toEqual(['patient', 'practitioner', 'careteam']);
    expect(report.mappings.patient).toMatchObject({ read: 20, created: 20, rejected: 0 });
    expect(report.mappings.practitioner).toMatchObject({ read: 5, created: 5, rejected: 0 });
    expect(report.mappings.careteam).toMatchObject({ read: 60, created: 20, rejected: 0 });

    const client = ctx.client();
    const [patients, practitioners, teams] = [await all(client, 'Patient'), await all(client, 'Practitioner'), await all(client, 'CareTeam')];
    expect([patients.length, practitioners.length, teams.length]).toEqual([20, 5, 20]);
    const { participants, dangling } = checkReferences(patients, practitioners, teams);
    expect(dangling).toEqual([]);
    // distinct (person_id, provider_id) pairs of visit_occurrence.csv and visit_detail.csv with a provider
    expect(participants).toBe(39);
    expect(patients.filter((p) => p.birthDate === '1941' || p.birthDate === '1987')).toHaveLength(2); // year_of_birth only
  });

  it('a second run changes nothing', async () => {
    const report = await ctx.run(MAPPING);
    expect(report.exitCode).toBe(0);
    expect(report.totals).toMatchObject({ created: 0, updated: 0, unchanged: 20 + 5 + 20, rejected: 0 });
  });
});
