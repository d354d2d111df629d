/**
 * Issue 25 item 1, through the built CLI with real signals: a run cancelled (SIGINT/SIGTERM) while it waits on a
 * 429 back-off (Retry-After 60), a create the server never answers, or a create answer trickling a byte a second
 * ends with exit 3 long before the server's wait would — the rejects file and the run history written, the
 * creates whose answer was lost left pending — and the next run creates nothing twice. A second signal quits at
 * once; a cancel stuck on something that cannot be aborted (a FIFO source nobody writes) is ended by the grace
 * bound. No timing is asserted: each case's own time-out (far below the server's waits) bounds it.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import { acquireLease } from '../../src/state/lease.js';
import { Ledger } from '../../src/state/ledger.js';
import { BIN, cleanEnv, runCli } from '../helpers/cli.js';
import { makeClinic, patientsCsv } from '../sync/helpers.js';

const KEY = 'sk-cancel-CANARY-41c7';
const TENANT = 't-cancel';
/**
 * A run still going this long after the test's first signal is killed (SIGKILL): far below the 60 s the server makes
 * it wait. (Counted from the signal, not the spawn: on a loaded machine the start alone can take seconds.)
 */
const AFTER_SIGNAL_MS = 20_000;
const CASE_MS = 90_000;

/** How the server treats creates: stores and answers them, or stalls them one of three ways. */
type CreateMode = 'ok' | 'retry-after-60' | 'store-then-hang' | 'store-then-trickle';

interface StallServer {
  url: string;
  mode: CreateMode;
  /** POSTs received (each one stored unless refused with 429). */
  posts: number;
  stored(type: string): Record<string, unknown>[];
  /** Resolves at the first create the server stalls. */
  stalled: Promise<void>;
  close(): Promise<void>;
}

/** A small store (lists in one page, reads, updates) whose creates misbehave as `mode` says. */
async function startStallServer(mode: CreateMode): Promise<StallServer> {
  const store = new Map<string, Map<string, Record<string, unknown>>>();
  const timers = new Set<NodeJS.Timeout>();
  let seq = 0;
  let onStall!: () => void;
  const of = (t: string) => store.get(t) ?? store.set(t, new Map()).get(t)!;
  const json = (res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}) => {
    const text = JSON.stringify(value);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
    res.end(text);
  };
  const readBody = (req: IncomingMessage) =>
    new Promise<string>((resolve) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => resolve(body));
    });
  const s: StallServer = {
    url: '',
    mode,
    posts: 0,
    stored: (type) => [...of(type).values()],
    stalled: new Promise<void>((resolve) => (onStall = resolve)),
    close: async () => {},
  };
  const server: Server = createServer(async (req, res) => {
    const body = await readBody(req);
    const [type, id] = new URL(req.url ?? '/', 'http://127.0.0.1').pathname.split('/').filter(Boolean) as [string, string | undefined];
    const meta = () => ({ versionId: '1', lastUpdated: new Date().toISOString() });
    if (req.method === 'GET' && id === undefined) {
      return json(res, 200, { resourceType: 'Bundle', type: 'searchset', meta: meta(), link: [], entry: s.stored(type).map((resource) => ({ resource })) });
    }
    if (req.method === 'GET') {
      const r = of(type).get(id!);
      return r ? json(res, 200, r) : json(res, 404, { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'not-found' }] });
    }
    if (req.method !== 'POST' || id !== undefined) {
      const updated = { ...(JSON.parse(body) as object), resourceType: type, id, meta: meta() };
      of(type).set(id!, updated);
      return json(res, 200, updated);
    }
    s.posts++;
    if (s.mode === 'retry-after-60') {
      onStall();
      return json(res, 429, { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'throttled' }] }, { 'retry-after': '60' });
    }
    const stored = { ...(JSON.parse(body) as object), id: `s-${++seq}`, meta: meta() };
    of(type).set(stored.id, stored);
    if (s.mode === 'ok') return json(res, 201, stored);
    onStall();
    if (s.mode === 'store-then-hang') return; // never answered
    const text = JSON.stringify(stored);
    res.writeHead(201, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    let i = 0;
    const t = setInterval(() => (i < text.length ? res.write(text[i++]) : res.end()), 1000);
    timers.add(t);
    res.on('close', () => clearInterval(t));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  s.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  s.close = () =>
    new Promise<void>((resolve) => {
      for (const t of timers) clearInterval(t);
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return s;
}

const servers: StallServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

interface Spawned {
  child: ChildProcess;
  /** Sends `sig`; the first one arms the AFTER_SIGNAL_MS kill. */
  send(sig: NodeJS.Signals): void;
  stderr: () => string;
  /** Resolves once stderr contains `text`. */
  said(text: string): Promise<void>;
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>;
}

/** The built CLI, spawned (runCli cannot signal it). */
function spawnCli(args: string[], env: Record<string, string>): Spawned {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...cleanEnv(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  const waiters: { text: string; resolve: () => void }[] = [];
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => {
    stderr += d;
    for (const w of waiters.filter((w) => stderr.includes(w.text))) w.resolve();
  });
  let timer: NodeJS.Timeout | undefined;
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resolve) =>
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    }),
  );
  return {
    child,
    send: (sig) => {
      timer ??= setTimeout(() => child.kill('SIGKILL'), AFTER_SIGNAL_MS);
      child.kill(sig);
    },
    stderr: () => stderr,
    said: (text) => (stderr.includes(text) ? Promise.resolve() : new Promise((resolve) => waiters.push({ text, resolve }))),
    done,
  };
}

const target = (url: string) => ['--base-url', url, '--emr-id', 'emr', '--tenant-id', TENANT];
const PATIENTS = 3;

/** A clinic of 3 patients, 2 practitioners, with one patient row the transform rejects (so the rejects file has a line). */
function clinic() {
  const c = makeClinic(PATIENTS, 2, 'care-etl-cancel-');
  c.writePatients(`${patientsCsv(PATIENTS)}000999,Bad,Date,13/45/2020,F,555-200-0001\n`);
  return c;
}

/** Every stored Patient's MRN → how many copies the server holds. */
function copiesByMrn(s: StallServer): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of s.stored('Patient')) {
    const v = (r.identifier as { value: string }[])[0]!.value;
    m.set(v, (m.get(v) ?? 0) + 1);
  }
  return m;
}

describe.each([
  { mode: 'retry-after-60' as const, what: 'a 429 back-off (Retry-After 60)', sig: 'SIGINT' as const, historyByCli: true },
  { mode: 'store-then-hang' as const, what: 'a create the server never answers', sig: 'SIGINT' as const },
  { mode: 'store-then-trickle' as const, what: 'a create answer trickling a byte a second', sig: 'SIGINT' as const },
  { mode: 'store-then-hang' as const, what: 'a create the server never answers (SIGTERM)', sig: 'SIGTERM' as const },
])('cancelled during $what', ({ mode, sig, historyByCli }) => {
  it(
    `${sig}: exit 3 before the server's wait ends, bookkeeping written, pending creates reconciled by the next run`,
    async () => {
      const server = await startStallServer(mode);
      servers.push(server);
      const c = clinic();
      const reportFile = join(c.dir, 'report.json');
      const run = spawnCli(['run', c.mapping, ...target(server.url), '--report', reportFile, '--progress', 'none'], { CARE_API_KEY: KEY });
      await server.stalled;
      run.send(sig);
      const r = await run.done;
      expect(r.signal, r.stderr).toBeNull(); // neither killed by the test nor ended by the grace bound
      expect(r.code, r.stderr).toBe(3);
      expect(r.stdout).toContain('Cancelled (SIGINT/SIGTERM): the run stopped; the rejects file and run 1 of the history written');
      expect(r.stdout + r.stderr).not.toContain(KEY);

      // The bookkeeping: the rejects file (the bad row), the report, the run history.
      expect(readFileSync(c.rejects, 'utf8').trim().split('\n')).toHaveLength(1);
      expect(JSON.parse(readFileSync(reportFile, 'utf8'))).toMatchObject({ interrupted: true, exitCode: 3 });
      const history = historyByCli ? await historyOfCli(c.mapping) : historyOf(c.state);
      expect(history[0]).toMatchObject({ outcome: 'aborted', summary: { exitCode: 3, interrupted: true } });

      // A create cut off is an outcome unknown: pending, never "rejected" (which would let the next run create blindly).
      const ledger = Ledger.open(c.state);
      try {
        const statuses = [...ledger.scope(server.url, TENANT).entries('patient')].map((e) => e.status);
        expect(statuses).not.toContain('rejected');
        expect(statuses).toContain('pending');
      } finally {
        ledger.close();
      }

      // The next run, against a server that answers: every patient exactly once on the server.
      server.mode = 'ok';
      const again = await runPipeline({ mappingFile: c.mapping, env: {}, connection: { baseUrl: server.url, apiKey: KEY, emrId: 'emr', tenantId: TENANT } });
      expect(again.exitCode).toBe(1); // the bad row only
      const copies = copiesByMrn(server);
      expect(copies.size).toBe(PATIENTS);
      expect(
        [...copies.values()].every((n) => n === 1),
        JSON.stringify([...copies]),
      ).toBe(true);
    },
    CASE_MS,
  );
});

type History = { outcome?: string; summary?: unknown }[];

async function historyOfCli(mapping: string): Promise<History> {
  const runs = await runCli(['runs', mapping, '--json']);
  expect(runs.code, runs.stderr).toBe(0);
  return (JSON.parse(runs.stdout) as { runs: History }).runs;
}

function historyOf(state: string): History {
  const ledger = Ledger.open(state);
  try {
    return ledger.runs();
  } finally {
    ledger.close();
  }
}

describe('cancelled while waiting for the lease (--wait-for-lock)', () => {
  it(
    'SIGINT ends the wait at once: exit 3, said as a cancel (not as a held lease), no rejects file replaced',
    async () => {
      const server = await startStallServer('ok');
      servers.push(server);
      const c = clinic();
      const holder = Ledger.open(c.state);
      try {
        await acquireLease(holder, holder.scopeIdOf(holder.scope(server.url, TENANT)));
        const run = spawnCli(['run', c.mapping, ...target(server.url), '--wait-for-lock', '10m', '--progress', 'none'], { CARE_API_KEY: KEY });
        await run.said('waiting for the lease');
        run.send('SIGINT');
        const r = await run.done;
        expect(r.signal, r.stderr).toBeNull();
        expect(r.code, r.stderr).toBe(3);
        expect(r.stdout).toContain('Cancelled (SIGINT/SIGTERM): the run stopped; no create is pending');
        expect(r.stderr).not.toContain('another run holds');
        expect(existsSync(c.rejects)).toBe(false); // no run began: nothing replaced
        expect(server.posts).toBe(0);
      } finally {
        holder.close();
      }
    },
    CASE_MS,
  );
});

describe.concurrent('signals the cancel cannot wait for', () => {
  it(
    'a second SIGINT ends the process at once, by that signal (a shell shows 130), without bookkeeping',
    async () => {
      const { c, run } = stuckOnFifo();
      await run.said('cancelling');
      run.send('SIGINT');
      const r = await run.done;
      expect(r.signal, r.stderr).toBe('SIGINT');
      expect(r.stderr).toContain('SIGINT again: exiting without bookkeeping');
      expect(r.stderr).not.toContain('not stopped within'); // not the grace bound
      rmSync(c.dir, { recursive: true, force: true });
    },
    CASE_MS,
  );

  it(
    'a cancel stuck on what cannot be aborted is ended by the grace bound, by the signal, before the test kills it',
    async () => {
      const { c, run } = stuckOnFifo();
      const r = await run.done;
      expect(r.signal, r.stderr).toBe('SIGINT'); // the test's own kill would be SIGKILL
      expect(r.stderr).toMatch(/SIGINT: not stopped within \d+ s/);
      rmSync(c.dir, { recursive: true, force: true });
    },
    CASE_MS,
  );
});

/**
 * A run whose patients source is a FIFO nobody writes to: opening it blocks in a worker thread that no signal can
 * interrupt. The first SIGINT is sent once the run is past its start (the signal handler installed).
 */
function stuckOnFifo(): { c: ReturnType<typeof makeClinic>; run: Spawned } {
  const c = makeClinic(1, 1, 'care-etl-cancel-fifo-');
  const fifo = join(c.dir, 'data', 'patients.csv');
  rmSync(fifo);
  execFileSync('mkfifo', [fifo]);
  expect(existsSync(fifo)).toBe(true);
  const run = spawnCli(['run', c.mapping, '--sandbox', '--progress', 'none', '--verbose'], {});
  void run.said('[').then(() => run.send('SIGINT'));
  return { c, run };
}
