/**
 * Issue 28 (the phase boundary): a mapping's source is opened and its first record read once the mappings it refers
 * to with `$ref` have ended their creates — while their check after the creates runs (src/pipeline/source-ahead.ts)
 * — and nothing of it is sent before that check is over. The care teams' source is a FIFO: its writer's open returns
 * only once the run opened it for reading, so the test sees when that happened; the patients' verification listing
 * is held at a proxy (test/helpers/watch-proxy.ts) until then, or 5 s.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { startWatchProxy, type WatchedRequest } from '../helpers/watch-proxy.js';
import { mrn, patientsCsv } from '../sync/helpers.js';

const PATIENTS = 20;
const MAPPING = `version: 1
sources:
  patients: { path: patients.csv }
  teams: { path: teams.csv }
resources:
  - name: patient
    type: Patient
    from: patients
    key: MRN
    map: |
      { "identifier": [{ "system": "urn:ahead-test:mrn", "value": MRN }], "active": true }
  - name: careteam
    type: CareTeam
    from: teams
    key: TEAM
    match: name
    map: |
      { "status": "active", "name": "Care team " & TEAM, "subject": { "reference": $ref("patient", MRN) } }
`;

let sb: Sandbox;
beforeAll(async () => {
  sb = await startSandbox({ tenants: ['t-ahead'], observationsPerPatient: 0 });
});
afterAll(async () => {
  await sb.close();
});

describe('a source read ahead while the mappings it refers to are checked', () => {
  it('the care teams’ source is opened during the patients’ check, and no care team is sent before the check is over', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-ahead-'));
    writeFileSync(join(dir, 'mapping.yaml'), MAPPING);
    writeFileSync(join(dir, 'patients.csv'), patientsCsv(PATIENTS));
    const fifo = join(dir, 'teams.csv');
    try {
      execFileSync('mkfifo', [fifo]);
    } catch (err) {
      throw new Error(`mkfifo is needed for this test (coreutils): ${(err as Error).message}`);
    }
    let teams = 'TEAM,MRN\n';
    for (let i = 1; i <= PATIENTS; i++) teams += `T${i},${mrn(i)}\n`;
    // Resolves when the run opens the FIFO for reading; then the teams are written and the pipe closed.
    const opened = open(fifo, 'w').then(async (h) => {
      await h.writeFile(teams);
      await h.close();
      return 'opened' as const;
    });
    let heldUntil: 'opened' | 'timeout' | undefined;
    let heldAt = -1;
    let seen: WatchedRequest[] = [];
    const onRequest = async (r: WatchedRequest) => {
      const listing = r.method === 'GET' && r.path.startsWith('/Patient');
      if (heldUntil !== undefined || heldAt >= 0 || !listing || !seen.some((x) => x.method === 'POST' && x.path === '/Patient')) return;
      heldAt = seen.length - 1;
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), 5000)));
      heldUntil = await Promise.race([opened, timeout]);
      clearTimeout(timer);
    };
    const proxy = await startWatchProxy(sb.url, { onRequest });
    seen = proxy.seen as WatchedRequest[];
    try {
      const report = await runPipeline({
        mappingFile: join(dir, 'mapping.yaml'),
        env: {},
        connection: { baseUrl: proxy.url, apiKey: sb.credentials.apiKey, emrId: sb.credentials.emrId, tenantId: 't-ahead' },
      });
      expect(heldUntil, 'the patients’ verification listing released by the care teams’ source being opened, not by the time-out').toBe('opened');
      const firstTeam = seen.findIndex((r) => r.method === 'POST' && r.path === '/CareTeam');
      const lastPatientList = seen.findLastIndex((r) => r.method === 'GET' && r.path.startsWith('/Patient'));
      expect(firstTeam, 'a care team sent only after the patients’ check read its last page').toBeGreaterThan(lastPatientList);
      expect(lastPatientList).toBeGreaterThanOrEqual(heldAt);
      expect(report.verification?.find((v) => v.mapping === 'patient')).toMatchObject({ checked: PATIENTS, duplicateCount: 0, missingCount: 0 });
      expect(report.mappings.careteam).toMatchObject({ read: PATIENTS, created: PATIENTS, rejected: 0 });
      expect(report.exitCode).toBe(0);
    } finally {
      await proxy.close();
      await opened.catch(() => undefined);
    }
  }, 30_000);
});
