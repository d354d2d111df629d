/**
 * The run lease on one (server, tenant) of a state file: one row per scope holding who runs (run number, host,
 * pid, user, since), a heartbeat, and a fencing token bumped on every acquisition. A run that lost its lease
 * (its token no longer current) is stopped by the ledger before its next write. Different scopes lease
 * independently, so two tenants share one state file in parallel. On PostgreSQL a session advisory lock of the scope,
 * held by the run's connection, comes first: a killed holder's lease is free the moment its connection closes.
 * Design: docs/design/ledger.md, docs/state.md.
 */
import { hostname, userInfo } from 'node:os';
import { CareEtlError, ExitCode } from '../core/issues.js';
import type { Ledger } from './ledger.js';

export interface LeaseHolder {
  token: number;
  runId?: number;
  host: string;
  pid: number;
  user?: string;
  since: string;
  heartbeatAt: string;
}

export interface LeaseOptions {
  /** Wait this long for a held lease (default 0: fail at once, exit 3). */
  waitMs?: number;
  /** A lease whose heartbeat is older than this is taken over (default 60 s: its holder was killed). */
  staleMs?: number;
  /** Heartbeat period (default 10 s). */
  heartbeatMs?: number;
  /** While waiting, how often the lease is tried again (default 1 s). */
  pollMs?: number;
  /** A line for the operator: waiting (every 30 s), or a stale lease taken over. */
  onNotice?: (line: string) => void;
  signal?: AbortSignal;
  now?: () => Date;
}

export interface HeldLease {
  readonly token: number;
  /** Set when a stale lease was taken over: whose it was. */
  readonly tookOverFrom?: LeaseHolder;
  release(): void;
}

const STALE_MS = 60_000;
const HEARTBEAT_MS = 10_000;
const WAIT_LINE_MS = 30_000;

interface LeaseRow {
  token: number;
  run_id: number | null;
  host: string;
  pid: number;
  user: string | null;
  since: string;
  heartbeat_at: string;
  released: number;
}

function holderOf(r: LeaseRow): LeaseHolder {
  const h: LeaseHolder = { token: r.token, host: r.host, pid: r.pid, since: r.since, heartbeatAt: r.heartbeat_at };
  if (r.run_id !== null) h.runId = r.run_id;
  if (r.user !== null) h.user = r.user;
  return h;
}

/** "run 12 on host ci-7 (pid 4411) since 2026-11-25T17:02:11Z, last seen 3 s ago" */
export function describeHolder(h: LeaseHolder, now: Date): string {
  const ago = Math.max(0, Math.round((now.getTime() - Date.parse(h.heartbeatAt)) / 1000));
  const run = h.runId !== undefined ? `run ${h.runId}` : 'a run (starting)';
  if (h.pid === 0) return `a run (starting) of another process, its lock taken at ${h.since.replace(/\.\d{3}Z$/, 'Z')}`;
  return `${run} on host ${h.host} (pid ${h.pid}) since ${h.since.replace(/\.\d{3}Z$/, 'Z')}, last seen ${ago} s ago`;
}

/** `lockMissing`: a PostgreSQL lease taken from a frozen holder that still holds the advisory lock. */
type Acquired = { token: number; tookOverFrom?: LeaseHolder; lockMissing?: boolean };
type Attempt = Acquired | { heldBy: LeaseHolder };

/**
 * One try, in one IMMEDIATE transaction: free, released or stale → ours with the next token. On PostgreSQL the
 * session advisory lock of the scope comes first: held by another connection → held (unless its row is stale: a
 * frozen holder, fenced off by the new token); ours → the row is ours too, at once (a killed holder's connection
 * closed, releasing its lock).
 */
function tryAcquire(ledger: Ledger, scopeId: number, now: Date, staleMs: number): Attempt {
  const locked = ledger.tryLock(lockName(scopeId));
  try {
    const got = ledger.guard('taking the run lease', () =>
      ledger.rawTransaction((): Attempt => {
        const row = ledger.stmt('SELECT * FROM leases WHERE scope_id = ?').get(scopeId) as LeaseRow | undefined;
        // Stale: no heartbeat for `staleMs`, or its holder on this host is gone (SIGKILL): no need to wait then.
        const stale = row !== undefined && row.released === 0 && (locked === true || now.getTime() - Date.parse(row.heartbeat_at) > staleMs || deadHere(row));
        if (row && row.released === 0 && !stale) return { heldBy: holderOf(row) };
        if (locked === false && !stale) return { heldBy: startingHolder(row, now) };
        const token = (row?.token ?? 0) + 1;
        const iso = now.toISOString();
        // Only over the row as read: two runs taking over one frozen holder's lease at once on PostgreSQL (READ
        // COMMITTED: both read the stale row) would both write token + 1; the second's update now finds the token
        // moved and takes nothing.
        const taken = ledger
          .stmt(
            `INSERT INTO leases (scope_id, token, run_id, host, pid, "user", since, heartbeat_at, released) VALUES (?, ?, NULL, ?, ?, ?, ?, ?, 0)
             ON CONFLICT (scope_id) DO UPDATE SET token = excluded.token, run_id = NULL, host = excluded.host, pid = excluded.pid,
               "user" = excluded."user", since = excluded.since, heartbeat_at = excluded.heartbeat_at, released = 0
             WHERE leases.token = ? RETURNING token`,
          )
          .get(scopeId, token, hostname(), process.pid, currentUser() ?? null, iso, iso, row?.token ?? 0);
        if (taken === undefined) {
          const winner = ledger.stmt('SELECT * FROM leases WHERE scope_id = ?').get(scopeId) as LeaseRow | undefined;
          return { heldBy: winner ? holderOf(winner) : startingHolder(row, now) };
        }
        return stale ? { token, tookOverFrom: holderOf(row), lockMissing: locked === false } : { token };
      }),
    );
    if ('heldBy' in got && locked === true) ledger.unlock(lockName(scopeId));
    return got;
  } catch (err) {
    if (locked === true) ledger.unlock(lockName(scopeId));
    throw err;
  }
}

const lockName = (scopeId: number) => `lease:${scopeId}`;

/** The advisory lock is held but its holder has not written its row yet (or left a released one). */
function startingHolder(row: LeaseRow | undefined, now: Date): LeaseHolder {
  return { token: row?.token ?? 0, host: '', pid: 0, since: now.toISOString(), heartbeatAt: now.toISOString() };
}

function heldError(h: LeaseHolder, now: Date, waitedMs: number): CareEtlError {
  const waited = waitedMs > 0 ? ` (waited ${Math.round(waitedMs / 1000)} s)` : '';
  return new CareEtlError(`another run holds this state: ${describeHolder(h, now)}${waited}`, {
    hint: waitedMs > 0 ? 'wait longer with a larger --wait-for-lock, or find that run' : 'wait for it, or pass --wait-for-lock 10m',
    exitCode: ExitCode.incomplete,
  });
}

/**
 * Takes the lease of `scopeId` (waiting up to `waitMs`), starts its heartbeat and arms the ledger's fence: every
 * write of that scope first checks the token. `release()` stops the heartbeat and frees the lease.
 */
export async function acquireLease(ledger: Ledger, scopeId: number, opts: LeaseOptions = {}): Promise<HeldLease> {
  const now = opts.now ?? (() => new Date());
  const staleMs = opts.staleMs ?? STALE_MS;
  const started = now().getTime();
  let lastLine = -Infinity;
  for (;;) {
    const t = now();
    const got = tryAcquire(ledger, scopeId, t, staleMs);
    if (!('heldBy' in got)) return hold(ledger, scopeId, got, opts);
    const waited = t.getTime() - started;
    if (waited >= (opts.waitMs ?? 0) || opts.signal?.aborted) throw heldError(got.heldBy, t, waited);
    if (t.getTime() - lastLine >= WAIT_LINE_MS) {
      lastLine = t.getTime();
      opts.onNotice?.(`waiting for the lease: ${describeHolder(got.heldBy, t)}; waited ${Math.round(waited / 1000)} s`);
    }
    await sleep(Math.min(opts.pollMs ?? 1000, (opts.waitMs ?? 0) - waited), opts.signal);
  }
}

function hold(ledger: Ledger, scopeId: number, got: Acquired, opts: LeaseOptions): HeldLease {
  const now = opts.now ?? (() => new Date());
  if (got.tookOverFrom) opts.onNotice?.(`took over a stale lease: ${describeHolder(got.tookOverFrom, now())} (its process is gone or its heartbeat stopped)`);
  ledger.holdLease(scopeId, got.token);
  let lockMissing = got.lockMissing === true;
  const beat = setInterval(() => {
    try {
      const beating = ledger
        .stmt('UPDATE leases SET heartbeat_at = ? WHERE scope_id = ? AND token = ? AND released = 0 RETURNING token')
        .get(now().toISOString(), scopeId, got.token);
      // Taken over (this process was frozen past the stale limit): what it remembers of the scope (`leaseHeld`) is
      // no longer its own — read from the state again; the fence stops its next write.
      if (beating === undefined) ledger.leaseReleased(scopeId);
      // Taken from a frozen holder: its advisory lock is ours once its connection goes, so a third run cannot take the row.
      if (lockMissing && ledger.tryLock(lockName(scopeId))) lockMissing = false;
    } catch {
      // a busy or closed file: the fence stops the run at its next write if the lease is really gone
    }
  }, opts.heartbeatMs ?? HEARTBEAT_MS);
  beat.unref();
  let released = false;
  return {
    token: got.token,
    tookOverFrom: got.tookOverFrom,
    release() {
      if (released) return;
      released = true;
      clearInterval(beat);
      ledger.leaseReleased(scopeId);
      try {
        ledger.stmt('UPDATE leases SET released = 1 WHERE scope_id = ? AND token = ?').run(scopeId, got.token);
        ledger.unlock(lockName(scopeId));
      } catch {
        // closed or busy: the heartbeat stops, the lease goes stale and is taken over (PostgreSQL: the lock goes with the connection)
      }
    },
  };
}

function deadHere(row: LeaseRow): boolean {
  if (row.host !== hostname()) return false;
  // This process's own pid, taken before it started: an earlier process that had the pid was killed (a container
  // restarted under the same hostname numbers its processes alike) — asking the pid would find this process alive.
  if (row.pid === process.pid) return Date.parse(row.since) < performance.timeOrigin;
  try {
    process.kill(row.pid, 0);
    return false;
  } catch (err) {
    return (err as { code?: unknown }).code === 'ESRCH';
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, Math.max(0, ms));
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

function currentUser(): string | undefined {
  try {
    return userInfo().username;
  } catch {
    return process.env.USER ?? undefined;
  }
}
