import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import { all, checkReferences, startMappingRun, type MappingRun } from './helpers.js';

const MAPPING = fileURLToPath(new URL('../../mappings/generic-csv/mapping.yaml', import.meta.url));
let ctx: MappingRun;

beforeAll(async () => {
  ctx = await startMappingRun();
});
afterAll(async () => {
  await ctx.close();
});

describe('mappings/generic-csv on its sample, loaded into the sandbox', () => {
  it('loads the sample export with every care team pointing at loaded resources', async () => {
    const report = await ctx.run(MAPPING);
    expect(report.exitCode).toBe(0);
    expect(report.mappings.patient).toMatchObject({ read: 6, created: 6, rejected: 0 });
    expect(report.mappings.practitioner).toMatchObject({ read: 5, created: 5, rejected: 0 });
    expect(report.mappings.careteam).toMatchObject({ read: 9, created: 6, rejected: 0 });
    const client = ctx.client();
    const { participants, dangling } = checkReferences(await all(client, 'Patient'), await all(client, 'Practitioner'), await all(client, 'CareTeam'));
    expect(dangling).toEqual([]);
    expect(participants).toBe(9);
  });
});
