import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { all, checkReferences, startMappingRun, type MappingRun } from './helpers.js';

const MAPPING = fileURLToPath(new URL('../../mappings/fhir-r4-bulk/mapping.yaml', import.meta.url));
let ctx: MappingRun;

beforeAll(async () => {
  ctx = await startMappingRun();
});
afterAll(async () => {
  await ctx.close();
});

describe('mappings/fhir-r4-bulk on the FHIR R4 examples, loaded into the sandbox', () => {
  it('loads every example patient and practitioner and the care teams with rewritten references', async () => {
    const report = await ctx.run(MAPPING);
    expect(report.exitCode).toBe(0);
    expect(report.mappings.patient).toMatchObject({ read: 22, created: 22, rejected: 0 });
    expect(report.mappings.practitioner).toMatchObject({ read: 14, created: 14, rejected: 0 });
    expect(report.mappings.careteam).toMatchObject({ read: 3, created: 3, rejected: 0 });

    const client = ctx.client();
    const [patients, practitioners, teams] = [await all(client, 'Patient'), await all(client, 'Practitioner'), await all(client, 'CareTeam')];
    expect([patients.length, practitioners.length, teams.length]).toEqual([22, 14, 3]);
    const { participants, dangling } = checkReferences(patients, practitioners, teams);
    expect(dangling).toEqual([]);
    expect(participants).toBe(4); // CareTeam/example keeps none (a Patient and a contained member), 2 + 2 in ours

    // The server ids are new: the source id `example` is nowhere, the identifiers are.
    const chalmers = patients.find((p) => (p.identifier as { value?: string }[] | undefined)?.some((i) => i.value === '12345' && (p.name as { family?: string }[])[0]?.family === 'Chalmers'));
    expect(chalmers?.id).toBeDefined();
    expect(chalmers?.id).not.toBe('example');
    const team = teams.find((t) => t.name === 'Peter James Charlmers Care Plan for Inpatient Encounter');
    expect(team?.subject).toEqual({ reference: `Patient/${chalmers!.id}` });
  });

  it('a second run changes nothing', async () => {
    const report = await ctx.run(MAPPING);
    expect(report.exitCode).toBe(0);
    expect(report.totals).toMatchObject({ created: 0, updated: 0, unchanged: 22 + 14 + 3, rejected: 0 });
  });

  it('with the state lost (a fresh runner), a run finds everything on the server and writes nothing', async () => {
    rmSync(join(ctx.dir, 'state.db'), { force: true });
    const before = ctx.sb.stats().byStatus;
    const report = await ctx.run(MAPPING);
    expect(report.exitCode).toBe(0);
    expect(report.totals).toMatchObject({ created: 0, updated: 0, unchanged: 22 + 14 + 3, adopted: 22 + 14 + 3, rejected: 0 });
    expect(ctx.sb.stats().resources[ctx.connection.tenantId!]).toMatchObject({ Patient: 22, Practitioner: 14, CareTeam: 3 });
    expect(ctx.sb.stats().byStatus[200]! - (before[200] ?? 0)).toBe(1 + report.indexes.reduce((n, b) => n + b.pages, 0)); // reads only
  });
});
