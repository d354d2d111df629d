/**
 * Issue 22 item 2: a skipped row's key is not "seen" — with `onMissing: end`, a patient loaded earlier whose row is
 * now left out (by `where:`, or by a map that produces nothing) is deactivated, as if the row had left the export.
 * `runPipeline` against the in-process sandbox over HTTP.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CareClient } from '../../src/api/client.js';
import { resolveConnection } from '../../src/api/connection.js';
import { planPipeline, runPipeline } from '../../src/pipeline/run-pipeline.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';

const N = 30;
let sb: Sandbox;
beforeAll(async () => {
  sb = await startSandbox({ tenants: ['t-where-end', 't-empty-end'], observationsPerPatient: 0 });
});
afterAll(async () => {
  await sb?.close();
});

const mrn = (i: number) => String(i).padStart(3, '0');
const csv = (deleted: Set<number>) =>
  `MRN,LAST,STATUS\n${Array.from({ length: N }, (_, i) => `${mrn(i + 1)},Name${i + 1},${deleted.has(i + 1) ? 'deleted' : 'active'}`).join('\n')}\n`;
const body = `{ "identifier": [{ "system": "urn:end:mrn", "value": MRN }], "active": true, "name": [{ "family": LAST }] }`;
const VARIANTS = [
  { how: 'where:', tenant: 't-where-end', resource: `    where: STATUS != "deleted"\n    map: '${body}'` },
  { how: 'a map producing nothing', tenant: 't-empty-end', resource: `    map: 'STATUS != "deleted" ? ${body}'` },
];

async function activeOnServer(tenantId: string): Promise<Map<string, boolean>> {
  const client = new CareClient(resolveConnection({ baseUrl: sb.url, apiKey: sb.credentials.apiKey, emrId: sb.credentials.emrId, tenantId }), { retry: false });
  try {
    const out = new Map<string, boolean>();
    for await (const p of client.list('Patient', { pageSize: 100 })) {
      const r = p as unknown as { identifier: { value: string }[]; active?: boolean };
      out.set(r.identifier[0]!.value, r.active !== false);
    }
    return out;
  } finally {
    await client.close();
  }
}

describe('onMissing: end — a skipped key is not seen', () => {
  for (const v of VARIANTS) {
    it(`a patient left out by ${v.how} after being loaded is deactivated (plan says so first)`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'care-etl-where-end-'));
      writeFileSync(join(dir, 'patients.csv'), csv(new Set([30])));
      writeFileSync(
        join(dir, 'mapping.yaml'),
        `version: 1\nsources:\n  patients: { path: patients.csv }\nresources:\n  - name: patient\n    type: Patient\n    from: patients\n    key: MRN\n    onMissing: end\n${v.resource}\n`,
      );
      const opts = {
        mappingFile: join(dir, 'mapping.yaml'),
        env: {},
        connection: { baseUrl: sb.url, apiKey: sb.credentials.apiKey, emrId: sb.credentials.emrId, tenantId: v.tenant },
      };
      const first = await runPipeline(opts);
      expect(first.mappings.patient).toMatchObject({ read: N, skipped: 1, created: N - 1, rejected: 0, ended: 0 });
      expect(first.exitCode).toBe(0);
      expect((await activeOnServer(v.tenant)).size).toBe(N - 1);

      writeFileSync(join(dir, 'patients.csv'), csv(new Set([7, 30])));
      const plan = await planPipeline(opts);
      expect(plan.plan!.patient!.counts).toMatchObject({ skipped: 2, ended: 1, rejected: 0 });
      expect(plan.plan!.patient!.ends.map((e) => e.key)).toEqual(['007']);

      const second = await runPipeline(opts);
      expect(second.mappings.patient).toMatchObject({ read: N, skipped: 2, unchanged: N - 2, rejected: 0, ended: 1 });
      expect(second.ended.map((e) => e.key)).toEqual(['007']);
      const active = await activeOnServer(v.tenant);
      expect(active.get('007')).toBe(false);
      expect([...active.values()].filter(Boolean)).toHaveLength(N - 2);
    }, 60_000);
  }
});
