import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { all, checkReferences, startMappingRun, type MappingRun } from './helpers.js';

const MAPPING = fileURLToPath(new URL('../../mappings/synthea/mapping.yaml', import.meta.url));
let ctx: MappingRun;

beforeAll(async () => {
  ctx = await startMappingRun();
});
afterAll(async () => {
  await ctx.close();
});

describe('mappings/synthea on the Synthea 3.0.0 sample, loaded into the sandbox', () => {
  it('loads every patient, provider and one care team per patient, all references resolved', async () => {
    const report = await ctx.run(MAPPING);
    expect(report.exitCode).toBe(0);
    expect(report.order).toEqual(['patient', 'practitioner', 'careteam']);
    expect(report.mappings.patient).toMatchObject({ read: 27, created: 27, rejected: 0 });
    expect(report.mappings.practitioner).toMatchObject({ read: 166, created: 166, rejected: 0 });
    expect(report.mappings.careteam).toMatchObject({ read: 604, created: 27, rejected: 0 });

    const client = ctx.client();
    const [patients, practitioners, teams] = [await all(client, 'Patient'), await all(client, 'Practitioner'), await all(client, 'CareTeam')];
    expect([patients.length, practitioners.length, teams.length]).toEqual([27, 166, 27]);
    const { participants, dangling } = checkReferences(patients, practitioners, teams);
    expect(dangling).toEqual([]);
    expect(participants).toBe(57); // distinct (PATIENT, PROVIDER) pairs of encounters.csv

    // The two deceased patients: inactive, and their care teams ended on the death date.
    expect(patients.filter((p) => p.active === false)).toHaveLength(2);
    const ended = teams.filter((t) => (t.period as { end?: string } | undefined)?.end);
    expect(ended.map((t) => [t.status, (t.period as { end: string }).end]).sort()).toEqual([
      ['inactive', '1976-07-25'],
      ['inactive', '2004-03-21'],
    ]);
  });

  it('a second run changes nothing', async () => {
    const report = await ctx.run(MAPPING);
    expect(report.exitCode).toBe(0);
    expect(report.totals).toMatchObject({ created: 0, updated: 0, unchanged: 27 + 166 + 27, rejected: 0 });
  });

  it('with the state lost (a fresh runner), a run finds everything on the server and writes nothing', async () => {
    rmSync(join(ctx.dir, 'state.db'), { force: true });
    const before = ctx.sb.stats().byStatus;
    const report = await ctx.run(MAPPING);
    expect(report.exitCode).toBe(0);
    expect(report.totals).toMatchObject({ created: 0, updated: 0, unchanged: 27 + 166 + 27, adopted: 27 + 166 + 27, rejected: 0 });
    expect(ctx.sb.stats().resources[ctx.connection.tenantId!]).toMatchObject({ Patient: 27, Practitioner: 166, CareTeam: 27 });
    expect(ctx.sb.stats().byStatus[200]! - (before[200] ?? 0)).toBe(1 + report.indexes.reduce((n, b) => n + b.pages, 0)); // reads only
  });
});
