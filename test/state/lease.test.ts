/** The run lease (src/state/lease.ts) on a real SQLite file and a real PostgreSQL: acquire, refuse, wait, heartbeat, fencing, stale takeover. */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startPostgres, type PgCluster } from '../helpers/postgres.js';
import { CareEtlError, ExitCode } from '../../src/core/issues.js';
import { Ledger } from '../../src/state/ledger.js';
import { acquireLease, type HeldLease } from '../../src/state/lease.js';

const BASE = 'https://care.example.org/api';
const BACKENDS = ['sqlite', 'postgres'] as const;
let cluster: Promise<PgCluster> | undefined;
/** One PostgreSQL cluster for this file, started by the first test that needs it. */
const pgCluster = () => (cluster ??= startPostgres());
afterAll(async () => {
  if (cluster) await (await cluster).stop();
});
let dir: string;
let path: string;
const open: Ledger[] = [];
const held: HeldLease[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'care-etl-lease-'));
  path = join(dir, 'state.db');
});
afterEach(() => {
  held.splice(0).forEach((l) => l.release());
  open.splice(0).forEach((l) => l.close());
  rmSync(dir, { recursive: true, force: true });
});

/** A second process's view: its own connection to the same file. */
function connect(now?: () => Date): Ledger {
  const l = Ledger.open(path, now ? { now } : {});
  expect(l.dialect).toBe(path.startsWith('postgres://') ? 'postgres' : 'sqlite');
  open.push(l);
  return l;
}
async function lease(l: Ledger, tenant: string, opts: Parameters<typeof acquireLease>[2] = {}): Promise<HeldLease> {
  const h = await acquireLease(l, l.scopeIdOf(l.scope(BASE, tenant)), opts);
  held.push(h);
  return h;
}
async function refusal(p: Promise<unknown>): Promise<CareEtlError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CareEtlError);
  return err as CareEtlError;
}
const intent = (runId: number) => ({ mapping: 'patient', key: 'p1', resourceType: 'Patient', hash: 'h', runId });

describe.each(BACKENDS)('run lease (%s)', (backend) => {
  beforeEach(async () => {
    if (backend === 'postgres') path = await (await pgCluster()).freshState();
  });

  it('refuses a second holder at once, naming run, host, pid and since (exit 3); free again after release, token bumped', async () => {
    const a = connect();
    const first = await lease(a, 't1');
    const runId = a.scope(BASE, 't1').beginRun({ mappingFile: 'm.yaml', dryRun: false });
    const err = await refusal(lease(connect(), 't1'));
    expect(err.exitCode).toBe(ExitCode.incomplete);
    expect(err.message).toMatch(
      new RegExp(
        `another run holds this state: run ${runId} on host ${hostname()} \\(pid ${process.pid}\\) since \\d{4}-\\d\\d-\\d\\dT[\\d:]+Z, last seen \\d+ s ago`,
      ),
    );
    expect(err.hint).toMatch(/--wait-for-lock 10m/);
    first.release();
    const second = await lease(connect(), 't1');
    expect(second.token).toBe(first.token + 1);
  });

  it('leases each (server, tenant) on its own: two tenants of one state file at once', async () => {
    await lease(connect(), 't1');
    const b = connect();
    await lease(b, 't2');
    b.scope(BASE, 't2').recordIntent(intent(1));
    expect(b.scope(BASE, 't2').get('patient', 'p1')?.status).toBe('pending');
  });

  it('--wait-for-lock: waits, says so, and takes the lease once the holder releases it', async () => {
    const first = await lease(connect(), 't1');
    const lines: string[] = [];
    const waiting = lease(connect(), 't1', { waitMs: 60_000, pollMs: 20, onNotice: (l) => lines.push(l) });
    setTimeout(() => first.release(), 200);
    const second = await waiting;
    expect(second.token).toBe(first.token + 1);
    expect(lines[0]).toMatch(/^waiting for the lease: a run \(starting\) on host/);
  });

  it('--wait-for-lock: exit 3 when the wait ends and the lease is still held', async () => {
    await lease(connect(), 't1');
    const err = await refusal(lease(connect(), 't1', { waitMs: 100, pollMs: 20 }));
    expect(err.exitCode).toBe(ExitCode.incomplete);
    expect(err.message).toMatch(/another run holds this state: .* \(waited 0 s\)/);
  });

  it('the heartbeat keeps the lease fresh', async () => {
    const a = connect();
    await lease(a, 't1', { heartbeatMs: 20 });
    const other = connect();
    const beat = () => (other.stmt('SELECT heartbeat_at FROM leases').get() as { heartbeat_at: string }).heartbeat_at;
    const before = beat();
    for (let i = 0; i < 200 && beat() === before; i++) await new Promise((r) => setTimeout(r, 10));
    expect(beat() > before).toBe(true);
  });

  it('a holder whose lease was taken over learns it at its next heartbeat: it stops trusting what it remembers of the scope', async () => {
    const a = connect();
    await lease(a, 't1', { heartbeatMs: 20 });
    const scopeId = a.scopeIdOf(a.scope(BASE, 't1'));
    expect(a.leaseHeld(scopeId)).toBe(true);
    connect().stmt('UPDATE leases SET token = token + 1').run(); // another run's takeover, as the row shows it
    for (let i = 0; i < 200 && a.leaseHeld(scopeId); i++) await new Promise((r) => setTimeout(r, 10));
    expect(a.leaseHeld(scopeId)).toBe(false);
  });

  it('takes over a lease whose heartbeat is older than the stale limit, and fences the old holder off its next write', async () => {
    const t0 = Date.parse('2026-11-25T17:00:00Z');
    const a = connect(() => new Date(t0));
    const old = await lease(a, 't1', { now: () => new Date(t0), heartbeatMs: 3_600_000 });
    const oldRun = a.scope(BASE, 't1').beginRun({ mappingFile: 'm.yaml', dryRun: false });
    const lines: string[] = [];
    const b = connect();
    const fresh = await lease(b, 't1', { now: () => new Date(t0 + 61_000), onNotice: (l) => lines.push(l) });
    expect(fresh.token).toBe(old.token + 1);
    expect(fresh.tookOverFrom?.runId).toBe(oldRun);
    expect(lines[0]).toMatch(new RegExp(`^took over a stale lease: run ${oldRun} on host .* last seen 61 s ago`));
    // The old holder stops before its next write: nothing of it reaches the ledger.
    let err: unknown;
    try {
      a.scope(BASE, 't1').recordIntent(intent(oldRun));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CareEtlError);
    expect((err as CareEtlError).exitCode).toBe(ExitCode.incomplete);
    expect((err as CareEtlError).message).toMatch(/lost its lease .* took it over/);
    expect(b.scope(BASE, 't1').get('patient', 'p1')).toBeUndefined();
    // The loader's batched write (synced records and intents of one turn) is fenced as a whole: none of it lands.
    const synced = { mapping: 'patient', key: 'p0', resourceType: 'Patient', serverId: 's0', hash: 'h', runId: oldRun };
    expect(() => a.scope(BASE, 't1').recordBatch([intent(oldRun), { ...intent(oldRun), key: 'p2' }], [synced])).toThrow(/lost its lease .* took it over/);
    for (const key of ['p0', 'p1', 'p2']) expect(b.scope(BASE, 't1').get('patient', key)).toBeUndefined();
  });

  it('a lease left by a process of this host that is gone (SIGKILL) is taken over at once', async () => {
    const a = connect();
    await lease(a, 't1');
    const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
    a.stmt('UPDATE leases SET pid = ?').run(Number(gone));
    const fresh = await lease(connect(), 't1');
    expect(fresh.tookOverFrom?.pid).toBe(Number(gone));
  });

  it('a lease of this host and pid taken before this process started (a restarted container reusing the pid) is taken over at once', async () => {
    const a = connect();
    await lease(a, 't1');
    a.stmt('UPDATE leases SET since = ?').run(new Date(performance.timeOrigin - 3_600_000).toISOString());
    const fresh = await lease(connect(), 't1');
    expect(fresh.tookOverFrom?.pid).toBe(process.pid);
  });

  it.runIf(backend === 'postgres')(
    'a holder whose connection closed without releasing (kill -9) leaves its lease free at once, fresh heartbeat or not',
    async () => {
      const a = connect();
      await lease(a, 't1');
      const runId = a.scope(BASE, 't1').beginRun({ mappingFile: 'm.yaml', dryRun: false });
      a.close(); // the connection goes, its advisory lock with it; the row still says "held", heartbeat fresh
      const lines: string[] = [];
      const next = await lease(connect(), 't1', { onNotice: (l) => lines.push(l) });
      expect(next.tookOverFrom?.runId).toBe(runId);
      expect(lines[0]).toMatch(/^took over a stale lease: run \d+ .* last seen [1-5]?\d s ago/); // fresh: well inside the 60 s stale limit
    },
  );
});

/** Runs `sql` (several statements, one simple query: the server runs it without the client) on its own connection. */
async function onOwnConnection(stateUrl: string, sql: (schema: string) => string): Promise<{ done: Promise<unknown>; watcher: pg.Client }> {
  const url = new URL(stateUrl);
  const schema = url.searchParams.get('schema')!;
  url.searchParams.delete('schema');
  const [other, watcher] = [new pg.Client({ connectionString: url.toString() }), new pg.Client({ connectionString: url.toString() })];
  await Promise.all([other.connect(), watcher.connect()]);
  const done = other.query(sql(schema)).finally(() => other.end());
  return { done, watcher };
}

describe('run lease (postgres): two runs taking over one frozen holder at once', () => {
  it('only one gets the lease; the other is refused naming the winner (the second write finds the token moved)', async () => {
    path = await (await pgCluster()).freshState();
    const t0 = Date.parse('2026-11-25T17:00:00Z');
    const frozen = connect(() => new Date(t0)); // keeps its connection, so its advisory lock: only its heartbeat stops
    const old = await lease(frozen, 't1', { now: () => new Date(t0), heartbeatMs: 3_600_000 });
    const at = new Date(t0 + 61_000).toISOString();
    // The other runner has read the stale row and is writing its takeover (token + 1), not yet committed; this
    // runner reads the same stale row and writes after it.
    const { done, watcher } = await onOwnConnection(
      path,
      (schema) =>
        `BEGIN; UPDATE ${schema}.leases SET token = token + 1, host = 'racer-host', pid = 4242, since = '${at}', heartbeat_at = '${at}';
         SELECT pg_sleep(0.4); COMMIT;`,
    );
    try {
      while (Number((await watcher.query(`SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event = 'PgSleep'`)).rows[0].n) === 0);
      const refused = await refusal(lease(connect(), 't1', { now: () => new Date(t0 + 61_000) }));
      expect(refused.exitCode).toBe(ExitCode.incomplete);
      expect(refused.message).toMatch(/another run holds this state: .*racer-host \(pid 4242\)/);
      await done;
      const row = (await watcher.query(`SELECT token::int AS token, host FROM ${new URL(path).searchParams.get('schema')}.leases`)).rows[0];
      expect(row).toEqual({ token: old.token + 1, host: 'racer-host' });
    } finally {
      await done.catch(() => undefined);
      await watcher.end();
    }
  });
});

describe('run lease (sqlite file)', () => {
  it('a write blocked by another connection past the busy timeout is a clear error (exit 3), not a silent wait', () => {
    const l = Ledger.open(path, { busyTimeoutMs: 50 });
    open.push(l);
    const raw = new Database(path);
    raw.exec('BEGIN IMMEDIATE');
    try {
      let err: unknown;
      try {
        l.scope(BASE, 't1').recordIntent(intent(1));
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(CareEtlError);
      expect((err as CareEtlError).exitCode).toBe(ExitCode.incomplete);
      expect((err as CareEtlError).message).toMatch(/waited 50 ms for another process writing the same file/);
    } finally {
      raw.exec('ROLLBACK');
      raw.close();
    }
  });
});
