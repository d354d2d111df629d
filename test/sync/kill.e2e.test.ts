/**
 * Issue 4: `kill -9` of the built CLI at several points of a load never duplicates nor forgets a resource.
 * One export, one state file, one sandbox tenant; the CLI is SIGKILLed
 *   1. in the patient phase, creates in flight (intents recorded, some POSTs at the server, some still queued),
 *   2. in the patient phase again, with ambiguous creates (stored, answer lost) happening,
 *   3. in the care-team phase, with ambiguous creates on (the CareTeam match rule reconciles them),
 *   4. in the care-team phase again, while the previous kill's pending intents wait for reconciliation,
 *   5. in the care-team reconciliation itself (after its listing, while not-found intents are re-created),
 * then a last run completes. The CLI talks to the sandbox through a recording proxy (to see the stage).
 * After every kill the server holds no duplicate; at the end every source record exists exactly once and the
 * ledger is fully synced (and the `markSeen` batches lost with each kill ended nothing by mistake).
 * Two more cases: the export changes after a kill; a kill while `onMissing: end` is ending care teams.
 * Needs `npm run build`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Resource } from '../../src/api/types.js';
import type { RunReport } from '../../src/pipeline/run-report.js';
import { startSandbox, type FaultOptions, type Sandbox } from '../../src/sandbox/server.js';
import { BIN, ROOT } from '../helpers/cli.js';
import { countBy, duplicates, identifierValue, listAll, makeClinic, mrn, npi, startRecordingProxy, until, withLedger } from './helpers.js';
import { MatchDigest } from '../../src/load/match-digest.js';

const N = 300; // patients (and care teams)
const M = 15; // practitioners
const TENANT = 't-kill';
let sb: Sandbox;
let proxy: Awaited<ReturnType<typeof startRecordingProxy>>;

beforeAll(async () => {
  sb = await startSandbox({ tenants: [TENANT, 't-orphan', 't-end-kill'], observationsPerPatient: 0 });
  proxy = await startRecordingProxy(sb.url);
});
afterAll(async () => {
  await proxy.close();
  await sb.close();
});

const clinic = makeClinic(N, M, 'care-etl-sync-kill-');

type Done = Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>;

/** The built CLI on `mapping`, through `baseUrl` (the proxy unless said otherwise). */
function spawnRun(extra: string[] = [], mapping = clinic.mapping, baseUrl = proxy.url, tenant = TENANT): { child: ChildProcess; done: Done } {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CARE_')));
  const child = spawn(process.execPath, [BIN, 'run', mapping, '--progress', 'none', ...extra], {
    cwd: ROOT,
    env: { ...base, CARE_BASE_URL: baseUrl, CARE_API_KEY: sb.credentials.apiKey, CARE_EMR_ID: sb.credentials.emrId, CARE_TENANT_ID: tenant },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const done = once(child, 'close').then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null, stdout, stderr }));
  return { child, done };
}

const count = (type: string, tenant = TENANT): number => sb.stats().resources[tenant]?.[type] ?? 0;

/** Waits until the server has finished what the dead client left in flight (stored counts stable for a while). */
async function settle(): Promise<void> {
  let last = '';
  let stableSince = Date.now();
  for (;;) {
    const now = JSON.stringify([sb.stats().resources, sb.stats().requests]);
    if (now !== last) {
      last = now;
      stableSince = Date.now();
    } else if (Date.now() - stableSince > 300) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

interface Snapshot {
  patients: Resource[];
  practitioners: Resource[];
  teams: Resource[];
}
async function serverState(): Promise<Snapshot> {
  return {
    patients: await listAll(sb, TENANT, 'Patient'),
    practitioners: await listAll(sb, TENANT, 'Practitioner'),
    teams: await listAll(sb, TENANT, 'CareTeam'),
  };
}
const subjectOf = (t: Resource) => (t.subject as { reference: string }).reference;
const STATE_DIGEST = new MatchDigest();

function expectNoDuplicates(s: Snapshot): void {
  expect(duplicates(countBy(s.patients, identifierValue)), 'duplicate patients').toEqual([]);
  expect(duplicates(countBy(s.practitioners, identifierValue)), 'duplicate practitioners').toEqual([]);
  expect(duplicates(countBy(s.teams, subjectOf)), 'duplicate care teams').toEqual([]);
}

/** Pending intents of the ledger, split by whether their resource reached the server before/after the kill. */
function pendingAfterKill(s: Snapshot): { patient: { stored: number; notStored: number }; careteam: { stored: number; notStored: number } } {
  // The state keeps match values as digests (unkeyed: these runs have no CARE_STATE_SECRET).
  const patientIds = new Set(s.patients.map((p) => STATE_DIGEST.of(`urn:sync-test:mrn|${identifierValue(p)}`)));
  const teamSubjects = new Set(s.teams.map((t) => STATE_DIGEST.of(subjectOf(t))));
  const out = { patient: { stored: 0, notStored: 0 }, careteam: { stored: 0, notStored: 0 } };
  withLedger(clinic.state, proxy, TENANT, (scope) => {
    for (const e of scope.pending()) {
      const on = e.mapping === 'careteam' ? teamSubjects.has(e.matchValue!) : patientIds.has(e.matchValue!);
      if (e.mapping === 'patient' || e.mapping === 'careteam') out[e.mapping][on ? 'stored' : 'notStored']++;
    }
  });
  return out;
}

async function killWhen(cond: () => boolean, faults: FaultOptions | undefined, run = () => spawnRun(['--concurrency', '8'])): Promise<void> {
  sb.setFaults(faults);
  try {
    const { child, done } = run();
    let exited = false;
    void done.then(() => (exited = true));
    await until(() => exited || cond(), 2);
    child.kill('SIGKILL');
    const r = await done;
    expect(r.signal, `the run ended before the kill point: ${r.stderr}${r.stdout}`).toBe('SIGKILL');
    await settle();
  } finally {
    sb.setFaults(undefined);
  }
}

describe('SIGKILL of the CLI at several points, then a completing run', () => {
  const pendingSeen = { patient: { stored: 0, notStored: 0 }, careteam: { stored: 0, notStored: 0 } };
  const tally = (s: Snapshot) => {
    const p = pendingAfterKill(s);
    for (const m of ['patient', 'careteam'] as const) for (const k of ['stored', 'notStored'] as const) pendingSeen[m][k] += p[m][k];
  };

  it('kill 1: patient phase, creates in flight', async () => {
    await killWhen(() => count('Patient') >= 60, { latencyMs: 15, seed: 11 });
    const s = await serverState();
    expect(s.patients.length).toBeGreaterThanOrEqual(60);
    expect(s.patients.length).toBeLessThan(N);
    expect(s.teams).toHaveLength(0);
    expectNoDuplicates(s);
    tally(s);
  }, 60_000);

  it('kill 2: patient phase, ambiguous creates (stored, answer lost) in flight', async () => {
    const before = sb.stats().ambiguousCreates;
    const start = count('Patient');
    await killWhen(() => sb.stats().ambiguousCreates - before >= 3 && count('Patient') > start, { latencyMs: 15, ambiguousCreateRate: 0.1, seed: 12 });
    const s = await serverState();
    expect(s.patients.length).toBeLessThan(N);
    expectNoDuplicates(s);
    tally(s);
  }, 60_000);

  it('kill 3: care-team phase, ambiguous creates on', async () => {
    const before = sb.stats().ambiguousCreates;
    await killWhen(() => count('CareTeam') >= 40 && sb.stats().ambiguousCreates - before >= 1, { latencyMs: 15, ambiguousCreateRate: 0.1, seed: 13 });
    const s = await serverState();
    expect(s.patients).toHaveLength(N); // the patient phase completed, pending intents reconciled
    expect(s.practitioners).toHaveLength(M);
    expect(s.teams.length).toBeLessThan(N);
    expectNoDuplicates(s);
    tally(s);
  }, 60_000);

  it("kill 4: care-team phase again, while the previous kill's pending intents wait for reconciliation", async () => {
    const start = count('CareTeam');
    await killWhen(() => count('CareTeam') >= start + 20, { latencyMs: 15, seed: 14 });
    const s = await serverState();
    expect(s.teams.length).toBeLessThan(N);
    expectNoDuplicates(s);
    tally(s);
  }, 60_000);

  it('kill 5: during the care-team reconciliation, re-creates in flight', async () => {
    const from = proxy.log.length;
    // The first CareTeam listing is the look-up before creating keys the state does not know (kill 4 left
    // some); the second is the reconciliation of the creates whose answer was lost.
    const reconciling = () => {
      const lists = proxy.log.map((l, i) => (i >= from && l === 'GET /CareTeam?_count=1000' ? i : -1)).filter((i) => i >= 0);
      return lists.length >= 2 && proxy.log.slice(lists[1]! + 1).includes('POST /CareTeam');
    };
    // Many lost answers → a long reconciliation; every create is slow. Lost answers of creates that were stored are
    // adopted by the reconciliation; dropped ones (never stored) are what it re-creates — without them there may be no
    // re-create to kill during, and the run ends first.
    await killWhen(reconciling, { latencyMs: 80, ambiguousCreateRate: 0.4, dropRate: 0.1, seed: 15 });
    const s = await serverState();
    expect(s.teams.length).toBeLessThan(N);
    expectNoDuplicates(s);
    tally(s);
  }, 60_000);

  it('the kills hit both kinds of interrupted create: POST stored but not recorded, and intent recorded but POST never sent', () => {
    expect(pendingSeen.patient.stored).toBeGreaterThan(0);
    expect(pendingSeen.patient.notStored).toBeGreaterThan(0);
    expect(pendingSeen.careteam.stored).toBeGreaterThan(0);
    expect(pendingSeen.careteam.notStored).toBeGreaterThan(0);
  });

  it('a run to completion: every record exactly once on the server, the ledger fully synced', async () => {
    const { done } = spawnRun(['--json']);
    const r = await done;
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as RunReport;
    expect(report.totals.rejected).toBe(0);

    const s = await serverState();
    expectNoDuplicates(s);
    const perMrn = countBy(s.patients, identifierValue);
    const perNpi = countBy(s.practitioners, identifierValue);
    expect(s.patients).toHaveLength(N);
    expect(s.practitioners).toHaveLength(M);
    expect(s.teams).toHaveLength(N);
    for (let i = 1; i <= N; i++) expect(perMrn.get(mrn(i))).toBe(1);
    for (let j = 1; j <= M; j++) expect(perNpi.get(npi(j))).toBe(1);

    // Each care team belongs to its patient and lists exactly the assigned practitioners, none ended.
    const mrnOf = new Map(s.patients.map((p) => [`Patient/${p.id}`, identifierValue(p)]));
    const npiOf = new Map(s.practitioners.map((p) => [`Practitioner/${p.id}`, identifierValue(p)]));
    for (const t of s.teams) {
      const m = mrnOf.get(subjectOf(t))!;
      const members = (t.participant as { member: { reference: string }; period?: { end?: string } }[]).map((p) => npiOf.get(p.member.reference)).sort();
      expect(members).toEqual(
        clinic.assignments
          .filter((a) => a.mrn === m)
          .map((a) => a.npi)
          .sort(),
      );
      expect(t.period).toBeUndefined();
    }

    withLedger(clinic.state, proxy, TENANT, (scope) => {
      expect(scope.counts('patient')).toEqual({ pending: 0, synced: N, rejected: 0 });
      expect(scope.counts('practitioner')).toEqual({ pending: 0, synced: M, rejected: 0 });
      expect(scope.counts('careteam')).toEqual({ pending: 0, synced: N, rejected: 0 });
      const ids = new Set([...s.patients, ...s.practitioners, ...s.teams].map((x) => x.id));
      for (let i = 1; i <= N; i++) {
        expect(ids.has(scope.serverIdOf('patient', mrn(i))!)).toBe(true);
        expect(ids.has(scope.serverIdOf('careteam', mrn(i))!)).toBe(true);
      }
    });

    // And one more run writes nothing.
    const before = sb.stats().requests;
    const again = await spawnRun(['--json']).done;
    expect(again.code, again.stderr).toBe(0);
    expect((JSON.parse(again.stdout) as RunReport).totals).toMatchObject({ created: 0, updated: 0, adopted: 0, rejected: 0, unchanged: N + M + N });
    expect(sb.stats().requests - before).toBe(1);
  }, 120_000);
});

describe('a kill, then the export changes before the next run', () => {
  it('an interrupted create whose rows were then removed is still found, and ended by onMissing: end', async () => {
    const T = 't-orphan';
    const c = makeClinic(120, 6, 'care-etl-sync-orphan-');
    // Ending is what is tested here, not the ending guard (issue 22): its allowance is lifted.
    const runC = (extra: string[] = []) => spawnRun(['--allow-ending', '100%', ...extra], c.mapping, sb.url, T);
    await killWhen(
      () => count('CareTeam', T) >= 30,
      // Some creates stored with their answer lost (ambiguous): at the kill they are pending yet on the server, so
      // "stored" never depends on the kill landing between a store and its answer (a window of microseconds).
      { latencyMs: 25, seed: 21, ambiguousCreateRate: 0.2 },
      () => runC(['--concurrency', '8']),
    );

    // Which care-team creates were interrupted, and which of them reached the server anyway?
    const mrnOf = new Map((await listAll(sb, T, 'Patient')).map((p) => [`Patient/${p.id}`, identifierValue(p)]));
    const teamsBefore = await listAll(sb, T, 'CareTeam');
    const onServer = new Set(teamsBefore.map((t) => STATE_DIGEST.of(subjectOf(t))));
    const pending = withLedger(c.state, sb, T, (scope) => scope.pending('careteam'));
    const stored = pending.filter((e) => onServer.has(e.matchValue!)).map((e) => e.key);
    const notStored = pending.filter((e) => !onServer.has(e.matchValue!)).map((e) => e.key);
    expect(stored.length).toBeGreaterThan(0);
    expect(notStored.length).toBeGreaterThan(0);

    // Before the next run, those patients' assignment rows disappear from the export.
    const gone = new Set(pending.map((e) => e.key));
    c.writeAssignments(c.assignments.filter((a) => !gone.has(a.mrn)));
    const r = await runC(['--json']).done;
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as RunReport;

    const teams = await listAll(sb, T, 'CareTeam');
    expect(duplicates(countBy(teams, subjectOf))).toEqual([]);
    const byMrn = new Map(teams.map((t) => [mrnOf.get(subjectOf(t))!, t]));
    // Stored before the kill: still there once, and ended like any care team gone from the export.
    for (const k of stored) {
      const t = byMrn.get(k)!;
      expect(t.period, k).toEqual({ end: report.startedAt });
      expect(report.ended).toContainEqual({ mapping: 'careteam', key: k, serverId: t.id });
    }
    // Never stored: nothing on the server, nothing created now.
    for (const k of notStored) expect(byMrn.has(k), k).toBe(false);
    expect(teams).toHaveLength(120 - notStored.length);
    expect(report.mappings.careteam.ended).toBe(stored.length);
    withLedger(c.state, sb, T, (scope) => {
      expect(scope.pending()).toEqual([]);
      for (const k of stored) expect(scope.get('careteam', k)).toMatchObject({ status: 'synced', serverId: byMrn.get(k)!.id });
      for (const k of notStored) expect(scope.get('careteam', k)!.serverId).toBeUndefined();
    });
  }, 120_000);
});

describe('a kill while onMissing: end is ending care teams', () => {
  it('the next run ends the rest and does not write again what the killed run already ended', async () => {
    const T = 't-end-kill';
    const c = makeClinic(60, 6, 'care-etl-sync-endkill-');
    // Half of the care teams end on purpose: the ending guard's allowance (issue 22) is lifted.
    const runC = (extra: string[] = []) => spawnRun(['--allow-ending', '100%', ...extra], c.mapping, proxy.url, T);
    const first = await runC().done;
    expect(first.code, first.stderr).toBe(0);
    const teams1 = await listAll(sb, T, 'CareTeam');
    expect(teams1).toHaveLength(60);

    // Half of the patients leave: their care teams are ended one by one (GET, then PUT) after the phase.
    const leaving = new Set(Array.from({ length: 30 }, (_, i) => mrn(2 * i + 1)));
    c.writeAssignments(c.assignments.filter((a) => !leaving.has(a.mrn)));
    const from = proxy.log.length;
    const puts = () => proxy.log.slice(from).filter((l) => l.startsWith('PUT /CareTeam/')).length;
    await killWhen(
      () => puts() >= 5,
      { latencyMs: 30, seed: 31 },
      () => runC(),
    );
    const endedByKilledRun = (await listAll(sb, T, 'CareTeam')).filter((t) => (t.period as { end?: string } | undefined)?.end);
    expect(endedByKilledRun.length).toBeGreaterThanOrEqual(5);
    expect(endedByKilledRun.length).toBeLessThan(30);

    const r = await runC(['--json']).done;
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as RunReport;
    const teams = await listAll(sb, T, 'CareTeam');
    expect(teams).toHaveLength(60);
    const mrnOf = new Map((await listAll(sb, T, 'Patient')).map((p) => [`Patient/${p.id}`, identifierValue(p)]));
    const already = new Set(endedByKilledRun.map((t) => t.id));
    for (const t of teams) {
      const m = mrnOf.get(subjectOf(t))!;
      const end = (t.period as { end?: string } | undefined)?.end;
      if (!leaving.has(m)) {
        expect(end, m).toBeUndefined();
        expect(t.meta?.versionId).toBe('1');
      } else if (already.has(t.id)) {
        expect(end, m).toBe((endedByKilledRun.find((x) => x.id === t.id)!.period as { end: string }).end); // kept, not re-dated
        expect(t.meta?.versionId, `${m} was written again`).toBe('2');
      } else {
        expect(end, m).toBe(report.startedAt);
        expect(t.meta?.versionId).toBe('2');
      }
    }
    expect(report.ended.map((e) => e.key).sort()).toEqual(
      teams
        .filter((t) => leaving.has(mrnOf.get(subjectOf(t))!) && !already.has(t.id))
        .map((t) => mrnOf.get(subjectOf(t))!)
        .sort(),
    );
    withLedger(c.state, proxy, T, (scope) => {
      expect(scope.notSeenSince('careteam', report.runId!)).toEqual([]); // every leaving team recorded as ended
    });
  }, 120_000);
});
