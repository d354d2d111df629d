/**
 * Issue 28 item 1: the window used across the whole run. Real HTTP against the sandbox (15 ms latency); the order
 * the server saw is recorded by a loopback proxy in front of it (`startRecordingProxy`: arrivals and answers).
 * - listings up front: the care teams' listing reaches the server before the last patient create is answered;
 * - mappings alongside: practitioners (no `$ref` between them) are created while patients still are, and no care
 *   team is sent before every patient and practitioner it may refer to has been answered;
 * - the window remembered per target (server URL + tenant) in the state's run history;
 * - an answer's bookkeeping after the request sent in its place is written (src/load/after-sends.ts), seen through
 *   undici's own diagnostics channel (what it wrote) and the run's progress events (what the loader booked).
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import { socketsForWindow } from '../../src/api/connection.js';
import { Ledger } from '../../src/state/ledger.js';
import { connectionOf, defaultAssignments, makeClinic, makePatients, patientsCsv, run, startRecordingProxy } from './helpers.js';

const N = 60; // patients
const M = 6; // practitioners
let sb: Sandbox;

beforeAll(async () => {
  sb = await startSandbox({
    tenants: ['t-window', 't-new', 't-remember', 't-other', 't-sends', 't-commits'],
    observationsPerPatient: 0,
    faults: { latencyMs: 15 },
  });
});
afterAll(async () => {
  await sb.close();
});

const first = (log: string[], prefix: string) => log.findIndex((l) => l.startsWith(prefix));
const last = (log: string[], prefix: string) => log.findLastIndex((l) => l.startsWith(prefix));

describe('the window across phases', () => {
  it('lists every type up front and runs practitioners alongside patients; care teams only after both', async () => {
    const clinic = makeClinic(N, M, 'care-etl-window-');
    const proxy = await startRecordingProxy(sb.url);
    try {
      const report = await runPipeline({
        mappingFile: clinic.mapping,
        env: {},
        connection: { ...connectionOf(sb, 't-window'), baseUrl: proxy.url },
        statePath: clinic.state,
        rejectsFile: clinic.rejects,
      });
      expect(report.exitCode).toBe(0);
      expect(report.totals).toMatchObject({ created: N + M + new Set(clinic.assignments.map((a) => a.mrn)).size, rejected: 0 });
      const t = proxy.timeline;
      const lastPatientAnswered = last(t, '< POST /Patient');
      // (a) the next phase's listing is not waiting for the previous phase's creates
      expect(first(t, '> GET /CareTeam')).toBeGreaterThan(-1);
      expect(first(t, '> GET /CareTeam')).toBeLessThan(lastPatientAnswered);
      // practitioners do not wait for the patients: no `$ref` between them
      expect(first(t, '> POST /Practitioner')).toBeLessThan(lastPatientAnswered);
      // (c) the `$ref` order holds: no care team before every patient and practitioner create was answered
      const firstTeam = first(t, '> POST /CareTeam');
      expect(firstTeam).toBeGreaterThan(lastPatientAnswered);
      expect(firstTeam).toBeGreaterThan(last(t, '< POST /Practitioner'));
    } finally {
      await proxy.close();
    }
  });

  it('a later run with new patients lists the care teams while the patients load (their `$ref` target has new keys)', async () => {
    const clinic = makeClinic(N, M, 'care-etl-window-new-');
    const opts = { statePath: clinic.state, rejectsFile: clinic.rejects };
    const proxy = await startRecordingProxy(sb.url);
    try {
      const runVia = () => runPipeline({ mappingFile: clinic.mapping, env: {}, connection: { ...connectionOf(sb, 't-new'), baseUrl: proxy.url }, ...opts });
      expect((await runVia()).exitCode).toBe(0);
      // Unchanged: no key is new, nothing is listed.
      proxy.timeline.length = 0;
      expect((await runVia()).totals).toMatchObject({ created: 0, rejected: 0 });
      expect(proxy.timeline.filter((l) => l.startsWith('> GET /CareTeam') || l.startsWith('> GET /Practitioner'))).toEqual([]);
      // 20 new patients with their care teams: the care teams' listing does not wait for the patient phase.
      clinic.writePatients(patientsCsv(N + 20));
      clinic.writeAssignments(defaultAssignments(N + 20, M));
      proxy.timeline.length = 0;
      const report = await runVia();
      expect(report.mappings.patient).toMatchObject({ created: 20, rejected: 0 });
      expect(report.mappings.careteam).toMatchObject({ created: 20, rejected: 0 });
      const t = proxy.timeline;
      expect(first(t, '> GET /CareTeam')).toBeGreaterThan(-1);
      expect(first(t, '> GET /CareTeam')).toBeLessThan(last(t, '< POST /Patient'));
      expect(first(t, '> POST /CareTeam')).toBeGreaterThan(last(t, '< POST /Patient'));
    } finally {
      await proxy.close();
    }
  });

  it('starts the next run of the same target at the window the last one settled at, not another target', async () => {
    const clinic = makeClinic(N, M, 'care-etl-window-remember-');
    const opts = { statePath: clinic.state, rejectsFile: clinic.rejects };
    const one = await run(sb, 't-remember', clinic.mapping, opts);
    expect(one.exitCode).toBe(0);
    expect(one.concurrency).toMatchObject({ mode: 'discovered', started: 4 });
    expect(one.concurrency?.rememberedFrom).toBeUndefined();
    const settled = one.concurrency!.settled;

    // Same server and tenant, same state, new patients: discovery starts where the first run settled.
    clinic.writePatients(patientsCsv(N + 20));
    const windows: number[] = [];
    const two = await run(sb, 't-remember', clinic.mapping, { ...opts, onEvent: (e) => void (e.type === 'progress' && windows.push(e.limit!)) });
    expect(two.mappings.patient).toMatchObject({ created: 20, rejected: 0 });
    expect(two.concurrency).toMatchObject({ mode: 'discovered', started: settled, rememberedFrom: one.runId });
    expect(windows[0]).toBe(settled);

    // Bounded by --max-concurrency; a pinned --concurrency is what it says.
    const capped = await run(sb, 't-remember', clinic.mapping, { ...opts, maxConcurrency: 2 });
    expect(capped.concurrency).toMatchObject({ started: Math.min(2, two.concurrency!.settled), ceiling: 2 });
    const pinned = await run(sb, 't-remember', clinic.mapping, { ...opts, concurrency: 3 });
    expect(pinned.concurrency).toMatchObject({ mode: 'pinned', started: 3 });
    expect(pinned.concurrency?.rememberedFrom).toBeUndefined();

    // Another tenant in the same state file is another target: it discovers from 4.
    const other = await run(sb, 't-other', clinic.mapping, opts);
    expect(other.exitCode).toBe(0);
    expect(other.concurrency).toMatchObject({ mode: 'discovered', started: 4 });
    expect(other.concurrency?.rememberedFrom).toBeUndefined();
  });

  it('gives a window above the client default its own keep-alive sockets, with spares, without `connections` set', async () => {
    // Its own sandbox: the peak the server saw in flight is this run's (100 ms latency: the 36 creates overlap).
    const own = await startSandbox({ tenants: ['t-sockets'], observationsPerPatient: 0, faults: { latencyMs: 100 } });
    const p = makePatients(72, 'care-etl-window-sockets-');
    let sockets = 0;
    const onConnected = () => void sockets++;
    subscribe('undici:client:connected', onConnected);
    try {
      const report = await run(own, 't-sockets', p.mapping, { concurrency: 36, statePath: p.state });
      expect(report.totals).toMatchObject({ created: 72, rejected: 0 });
      // Before: 32 sockets whatever the window (the client's default) — the server never saw more than 32.
      expect(own.stats().capacity.maxInFlight).toBeGreaterThanOrEqual(36);
      expect(sockets).toBeGreaterThanOrEqual(36);
      expect(sockets).toBeLessThanOrEqual(socketsForWindow(36));
    } finally {
      unsubscribe('undici:client:connected', onConnected);
      await own.close();
    }
  });

  it("writes the request that takes an answer's slot before that answer is booked (counted, recorded, the next row read)", async () => {
    const p = makePatients(20, 'care-etl-window-sends-');
    let written = 0;
    const onWrite = (m: unknown) => void ((m as { request: { method: string } }).request.method === 'POST' && written++);
    /** Per create booked (its progress event): the creates written by then, less those booked. */
    const ahead: number[] = [];
    subscribe('undici:client:sendHeaders', onWrite);
    try {
      // One request at a time: the next create is queued (its intent committed) when an answer comes.
      const report = await run(sb, 't-sends', p.mapping, {
        concurrency: 1,
        statePath: p.state,
        onEvent: (e) => void (e.type === 'progress' && e.counts.created > ahead.length && ahead.push(written - e.counts.created)),
      });
      expect(report.totals).toMatchObject({ created: 20, rejected: 0 });
    } finally {
      unsubscribe('undici:client:sendHeaders', onWrite);
    }
    // Before: each answer was booked before the create sent in its place was written (0 ahead); now that one is out first.
    expect(ahead).toEqual([...Array<number>(19).fill(1), 0]);
  });

  it('commits the ledger writes a freed slot makes due only once the requests already sent are written', async () => {
    const p = makePatients(120, 'care-etl-window-commits-');
    /** Creates handed to undici and not yet written; per commit, how many there were when it began. */
    const unwritten = new Set<unknown>();
    const heldAtCommit: number[] = [];
    const onCreate = (m: unknown) =>
      void ((m as { request: { method: string } }).request.method === 'POST' && unwritten.add((m as { request: unknown }).request));
    const onWrite = (m: unknown) => void unwritten.delete((m as { request: unknown }).request);
    // Seen, not changed: the scope's batch commit notes how many creates it found held back.
    const ledger = Ledger.open(':memory:');
    const proto = Object.getPrototypeOf(ledger.scope('http://x.test', 't')) as { recordBatch: (...a: unknown[]) => void };
    ledger.close();
    const recordBatch = proto.recordBatch;
    proto.recordBatch = function (this: unknown, ...a: unknown[]) {
      heldAtCommit.push(unwritten.size);
      recordBatch.apply(this, a);
    };
    subscribe('undici:request:create', onCreate);
    subscribe('undici:client:sendHeaders', onWrite);
    try {
      const report = await run(sb, 't-commits', p.mapping, { concurrency: 8, statePath: p.state });
      expect(report.totals).toMatchObject({ created: 120, rejected: 0 });
    } finally {
      proto.recordBatch = recordBatch;
      unsubscribe('undici:request:create', onCreate);
      unsubscribe('undici:client:sendHeaders', onWrite);
    }
    // Before: most commits ran in an answer's callback, holding up the creates sent in that loop turn (and the one
    // sent into the freed slot right after it).
    // Best effort, not a guarantee: after-sends.ts runs the commit after the requests dispatched before its immediate
    // ran; one dispatched by a later immediate of the same loop turn is not covered — rare (a loaded fresh-clone CI
    // saw one commit of ~20 with 2 held). Before the change: 7-8 of ~20, every run.
    expect(heldAtCommit.length).toBeGreaterThan(5);
    expect(heldAtCommit.filter((n) => n > 0).length).toBeLessThanOrEqual(Math.floor(heldAtCommit.length / 5));
  });
});
