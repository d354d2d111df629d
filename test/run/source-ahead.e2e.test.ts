/**
 * Issue 28 (the phase boundary): a mapping's source is opened and its first record read once the mappings it refers
 * to with `$ref` have ended their creates — while their check after the creates runs (src/pipeline/source-ahead.ts)
 * — and nothing of it is sent before that check is over. The run is in this process: the test sees the care teams'
 * file among its open descriptors (/proc/self/fd) — the file is large enough (rows skipped by `where:`) that reading
 * its first record leaves it open; the patients' verification listing is held at a proxy (test/helpers/watch-proxy.ts)
 * until then, or 5 s. A FIFO is never read ahead (its open waits for a writer in a thread nothing can stop).
 */
import { execFileSync } from 'node:child_process';
import { closeSync, constants, existsSync, mkdtempSync, openSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { startWatchProxy, type WatchedRequest } from '../helpers/watch-proxy.js';
import { mrn, patientsCsv } from '../sync/helpers.js';

const PATIENTS = 20;
const SKIPPED = 60_000;
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
    where: STATUS = "active"
    map: |
      { "status": "active", "name": "Care team " & TEAM, "subject": { "reference": $ref("patient", MRN) } }
`;

let sb: Sandbox;
beforeAll(async () => {
  sb = await startSandbox({ tenants: ['t-ahead', 't-ahead-fifo'], observationsPerPatient: 0 });
});
afterAll(async () => {
  await sb.close();
});

describe('a source read ahead while the mappings it refers to are checked', () => {
  it('the care teams’ source is opened during the patients’ check, and no care team is sent before the check is over', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-ahead-'));
    writeFileSync(join(dir, 'mapping.yaml'), MAPPING);
    writeFileSync(join(dir, 'patients.csv'), patientsCsv(PATIENTS));
    const teamsFile = join(dir, 'teams.csv');
    let teams = 'TEAM,MRN,STATUS\n';
    for (let i = 1; i <= PATIENTS; i++) teams += `T${i},${mrn(i)},active\n`;
    for (let i = 1; i <= SKIPPED; i++) teams += `X${i},${mrn(1)},skip\n`; // ~1.5 MB: more than a reading's buffers
    writeFileSync(teamsFile, teams);
    if (!existsSync('/proc/self/fd')) throw new Error('this test reads /proc/self/fd (Linux)');
    const isOpen = () =>
      readdirSync('/proc/self/fd').some((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`) === teamsFile;
        } catch {
          return false; // closed meanwhile
        }
      });
    let heldUntil: 'opened' | 'timeout' | undefined;
    let heldAt = -1;
    let seen: WatchedRequest[] = [];
    const onRequest = async (r: WatchedRequest) => {
      const listing = r.method === 'GET' && r.path.startsWith('/Patient');
      if (heldUntil !== undefined || heldAt >= 0 || !listing || !seen.some((x) => x.method === 'POST' && x.path === '/Patient')) return;
      heldAt = seen.length - 1;
      // Held until the run opens the care teams' file (polled), or 5 s.
      const deadline = Date.now() + 5000;
      while (!isOpen() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      heldUntil = isOpen() ? 'opened' : 'timeout';
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
      expect(report.mappings.careteam).toMatchObject({ read: PATIENTS + SKIPPED, skipped: SKIPPED, created: PATIENTS, rejected: 0 });
      expect(report.exitCode).toBe(0);
    } finally {
      await proxy.close();
    }
  }, 30_000);
  it('a FIFO is not read ahead: a run whose patients’ check fails ends (exit 3) though nothing ever writes the care teams’ pipe', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-ahead-fifo-'));
    writeFileSync(join(dir, 'mapping.yaml'), MAPPING);
    writeFileSync(join(dir, 'patients.csv'), patientsCsv(PATIENTS));
    const fifo = join(dir, 'teams.csv');
    try {
      execFileSync('mkfifo', [fifo]);
    } catch (err) {
      throw new Error(`mkfifo is needed for this test (coreutils): ${(err as Error).message}`);
    }
    // Every listing of the patients after their first create is refused: the check fails, the care teams never start.
    let created = false;
    const proxy = await startWatchProxy(sb.url, {
      onRequest: (r) => void (r.method === 'POST' && (created = true)),
      answer: (r) =>
        created && r.method === 'GET' && r.path.startsWith('/Patient')
          ? { status: 400, body: JSON.stringify({ resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'invalid', diagnostics: 'refused' }] }) }
          : undefined,
    });
    try {
      const run = runPipeline({
        mappingFile: join(dir, 'mapping.yaml'),
        env: {},
        connection: { baseUrl: proxy.url, apiKey: sb.credentials.apiKey, emrId: sb.credentials.emrId, tenantId: 't-ahead-fifo' },
      }).then(
        (report) => report.exitCode,
        (err: { exitCode?: number }) => err.exitCode,
      );
      let timer: NodeJS.Timeout | undefined;
      const hung = new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), 10_000)));
      const ended = await Promise.race([run, hung]);
      clearTimeout(timer);
      expect(ended, 'the run ended (a FIFO opened ahead waits for a writer for good)').toBe(3);
    } finally {
      await proxy.close();
      // A reader stuck in the pipe's open (the failure this guards against) is let go: it would hold a thread.
      try {
        closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
      } catch {
        // no reader: nothing waits
      }
    }
  }, 30_000);
});
