/**
 * Durable ledger (better-sqlite3): source key → server id, content hash, create intents, watermarks. An intent
 * to create is committed before the POST is sent; WAL + synchronous=NORMAL, 0600. One run per (server, tenant):
 * the run lease (lease.ts), checked by every write of a leased scope (the fence); short transactions, so runs on
 * other scopes of the same file go on in parallel. Design: docs/design/ledger.md.
 */
import { isWellFormed } from '../core/well-formed.js';
import { reasonText, versionIdOf } from '../core/state-text.js';
import { redactKnown } from '../core/secret.js';
import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import { CareEtlError, ExitCode } from '../core/issues.js';
import { simulatedFull, storageFailureHint } from '../core/secure-fs.js';
import { SqliteDriver, type SqlDialect, type SqlDriver, type SqlStatement } from './sql-driver.js';
import type { WalCheckpointOptions } from './wal-checkpointer.js';
import { PgDriver } from './postgres/pg-driver.js';
import { BridgeError } from './postgres/sync-bridge.js';
import { isPostgresLocation, parsePostgresLocation } from './state-location.js';

export type EntryStatus = 'pending' | 'synced' | 'rejected';

export interface LedgerEntry {
  mapping: string;
  key: string;
  resourceType: string;
  /** pending = a create intent was recorded and its outcome is unknown. */
  status: EntryStatus;
  serverId?: string;
  versionId?: string;
  /**
   * Hash of the resource content last sent successfully — or intended, while pending; a rejected create
   * (no server id) keeps the hash of the refused content. (A failed update does not touch the entry at all:
   * the loader leaves it synced with the old hash, so the next run retries the update.)
   */
  hash?: string;
  /** The run that last saw the key in the source. */
  lastRunId?: number;
  /** The reconciliation match value (e.g. "urn:clinic:mrn|123") recorded with the intent. */
  matchValue?: string;
  /** When an association was ended by onMissing: end. */
  endedAt?: string;
  /** Why the last write of this key was rejected (status rejected). */
  reason?: string;
  updatedAt: string;
}

export type RunOutcome = 'completed' | 'aborted' | 'failed';

export interface RunInfo {
  id: number;
  /** The server and tenant the run wrote to (`runs` across every scope of a state file). */
  baseUrl?: string;
  tenantId?: string;
  mappingFile: string;
  dryRun: boolean;
  startedAt: string;
  finishedAt?: string;
  /** Undefined while running — or when the process died without finishing the run. */
  outcome?: RunOutcome;
  summary?: unknown;
}

export interface IntentInput {
  mapping: string;
  key: string;
  resourceType: string;
  hash: string;
  matchValue?: string;
  runId: number;
}

export interface SyncedInput {
  mapping: string;
  key: string;
  resourceType: string;
  serverId: string;
  versionId?: string;
  hash: string;
  runId: number;
}

export interface RejectedInput {
  mapping: string;
  key: string;
  resourceType: string;
  runId: number;
  reason?: string;
}

export interface LedgerScope {
  readonly baseUrl: string;
  readonly tenantId: string;
  beginRun(info: { mappingFile: string; dryRun: boolean }): number;
  finishRun(runId: number, outcome: RunOutcome, summary?: object): void;
  /** Most recent runs of this scope, newest first. */
  recentRuns(limit?: number): RunInfo[];
  get(mapping: string, key: string): LedgerEntry | undefined;
  /**
   * Records the intent to create (status pending). Durable when it returns — unless called inside
   * `transaction()`, then durable when the transaction returns: send the POST only after that.
   * Clears any previous server id (a create will produce a new one).
   */
  recordIntent(e: IntentInput): void;
  /** After a create/update/adopt succeeded. Clears `endedAt` and the rejection reason. */
  recordSynced(e: SyncedInput): void;
  /**
   * `recordSynced` for each of `synced`, then `recordIntent` for each of `intents`, in ONE transaction behind one
   * fence check: durable together when it returns, or not at all (the loader's hot path: one commit per turn).
   */
  recordBatch(intents: readonly IntentInput[], synced: readonly SyncedInput[]): void;
  /** The server refused the write (definitive 4xx). Keeps the server id, version and hash if any. */
  recordRejected(e: RejectedInput): void;
  /** Drops a key's entry (`state rebuild`: its recorded resource is gone from the server). */
  forget(mapping: string, key: string): void;
  /** Every entry of `mapping`, in key order (state check). */
  entries(mapping: string): IterableIterator<LedgerEntry>;
  /** The keys `mapping` has entries for, or undefined when there are more than `max` (one statement instead of one per row). */
  keys(mapping: string, max: number): Set<string> | undefined;
  /** Marks unchanged keys as seen by `runId` (one transaction). Unknown keys are ignored. */
  markSeen(mapping: string, keys: readonly string[], runId: number): void;
  /** Interrupted creates to reconcile. */
  pending(mapping?: string): LedgerEntry[];
  /**
   * Synced entries of `mapping` not seen by `runId` and not already ended — for onMissing: end.
   * Only meaningful once the whole source has been read by that run.
   */
  notSeenSince(mapping: string, runId: number, limit?: number): LedgerEntry[];
  /** How many entries `notSeenSince` would return without a limit (one statement, no entry read). */
  notSeenCount(mapping: string, runId: number): number;
  /** Synced entries of `mapping` not ended: what it has loaded (the ending guard's base). */
  loadedCount(mapping: string): number;
  markEnded(mapping: string, key: string, endedAt: string, versionId?: string, hash?: string): void;
  keyOfServerId(resourceType: string, serverId: string): { mapping: string; key: string } | undefined;
  serverIdOf(mapping: string, key: string): string | undefined;
  getWatermark(name: string): string | undefined;
  setWatermark(name: string, value: string): void;
  /**
   * `--since last` de-duplication (schema 2): the observations an export delivered inside the next export's
   * overlap window, by resource id → version fingerprint, per watermark name. `delivered` reads the set the
   * last *complete* export left; `stageDelivered` adds to the set of the export in progress (durable at once,
   * so memory stays bounded); `commitDelivered` replaces the former by the latter (call it in the transaction
   * that moves the watermark); `discardStagedDelivered` drops what a failed or crashed export staged.
   */
  deliveredVersion(name: string, resourceId: string): string | undefined;
  deliveredCount(name: string): number;
  stageDelivered(name: string, items: readonly { id: string; version: string }[]): void;
  commitDelivered(name: string): void;
  discardStagedDelivered(name: string): void;
  counts(mapping?: string): Record<EntryStatus, number>;
  /** Runs `fn` in one SQLite transaction (nestable: inner calls become savepoints). Returns its result. */
  transaction<T>(fn: () => T): T;
}

export interface LedgerOptions {
  /**
   * 'NORMAL' (default) survives process crashes/kills; 'FULL' also survives OS crashes / power loss (PostgreSQL:
   * `synchronous_commit` off / on — off survives care-etl's crashes, not the database server's last ~0.6 s).
   */
  synchronous?: 'NORMAL' | 'FULL';
  /** Hold an exclusive lock on the file while open (default false: the run lease keeps one run per scope). */
  exclusive?: boolean;
  /** How long one statement waits for another connection's write transaction (default 5000 ms); then a clear error. */
  busyTimeoutMs?: number;
  /** Clock for `updatedAt` / run timestamps (tests). */
  now?: () => Date;
  /** SQLite file: the WAL's checkpoints in a worker thread (default on; false: SQLite's automatic checkpoint only). */
  walCheckpoint?: WalCheckpointOptions | false;
}

const SCHEMA_VERSION = 3;
const HINT = 'delete or move the state file with --state';
const STATUSES: readonly EntryStatus[] = ['pending', 'synced', 'rejected'];

const MIGRATIONS: Record<number, string> = {
  1: `
    CREATE TABLE scopes (
      id        INTEGER PRIMARY KEY,
      base_url  TEXT NOT NULL,
      tenant_id TEXT NOT NULL,
      UNIQUE (base_url, tenant_id)
    );
    CREATE TABLE runs (
      id           INTEGER PRIMARY KEY AUTOINCREMENT,
      scope_id     INTEGER NOT NULL REFERENCES scopes(id),
      mapping_file TEXT NOT NULL,
      dry_run      INTEGER NOT NULL,
      started_at   TEXT NOT NULL,
      finished_at  TEXT,
      outcome      TEXT,
      summary      TEXT
    );
    CREATE INDEX runs_scope ON runs (scope_id, id);
    CREATE TABLE entries (
      scope_id      INTEGER NOT NULL,
      mapping       TEXT NOT NULL,
      key           TEXT NOT NULL,
      resource_type TEXT NOT NULL,
      status        TEXT NOT NULL CHECK (status IN ('pending', 'synced', 'rejected')),
      server_id     TEXT,
      version_id    TEXT,
      hash          TEXT,
      last_run_id   INTEGER,
      match_value   TEXT,
      ended_at      TEXT,
      reason        TEXT,
      updated_at    TEXT NOT NULL,
      PRIMARY KEY (scope_id, mapping, key)
    ) WITHOUT ROWID;
    CREATE INDEX entries_server_id ON entries (scope_id, resource_type, server_id) WHERE server_id IS NOT NULL;
    CREATE INDEX entries_pending ON entries (scope_id, mapping) WHERE status = 'pending';
    CREATE TABLE watermarks (
      scope_id   INTEGER NOT NULL,
      name       TEXT NOT NULL,
      value      TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      PRIMARY KEY (scope_id, name)
    ) WITHOUT ROWID;
  `,
  // Additive only: a schema-1 file gains this table and keeps everything else as it was.
  2: `
    CREATE TABLE export_delivered (
      scope_id    INTEGER NOT NULL,
      name        TEXT NOT NULL,
      staged      INTEGER NOT NULL CHECK (staged IN (0, 1)),
      resource_id TEXT NOT NULL,
      version     TEXT NOT NULL,
      PRIMARY KEY (scope_id, name, staged, resource_id)
    ) WITHOUT ROWID;
  `,
  // The run lease (lease.ts): one row per scope, its token bumped on every acquisition.
  3: `
    CREATE TABLE leases (
      scope_id     INTEGER PRIMARY KEY,
      token        INTEGER NOT NULL,
      run_id       INTEGER,
      host         TEXT NOT NULL,
      pid          INTEGER NOT NULL,
      "user"       TEXT,
      since        TEXT NOT NULL,
      heartbeat_at TEXT NOT NULL,
      released     INTEGER NOT NULL CHECK (released IN (0, 1))
    );
  `,
};

interface EntryRow {
  mapping: string;
  key: string;
  resource_type: string;
  status: EntryStatus;
  server_id: string | null;
  version_id: string | null;
  hash: string | null;
  last_run_id: number | null;
  match_value: string | null;
  ended_at: string | null;
  reason: string | null;
  updated_at: string;
}

interface RunRow {
  id: number;
  base_url?: string;
  tenant_id?: string;
  mapping_file: string;
  dry_run: number;
  started_at: string;
  finished_at: string | null;
  outcome: RunOutcome | null;
  summary: string | null;
}

function runInfo(r: RunRow): RunInfo {
  const info: RunInfo = { id: r.id, mappingFile: r.mapping_file, dryRun: r.dry_run === 1, startedAt: r.started_at };
  if (r.base_url !== undefined) info.baseUrl = r.base_url;
  if (r.tenant_id !== undefined) info.tenantId = r.tenant_id;
  if (r.finished_at !== null) info.finishedAt = r.finished_at;
  if (r.outcome !== null) info.outcome = r.outcome;
  if (r.summary !== null) info.summary = JSON.parse(r.summary);
  return info;
}

const ENTRY_COLUMNS = 'mapping, key, resource_type, status, server_id, version_id, hash, last_run_id, match_value, ended_at, reason, updated_at';

function toEntry(r: EntryRow): LedgerEntry {
  const e: LedgerEntry = {
    mapping: r.mapping,
    key: r.key,
    resourceType: r.resource_type,
    status: r.status,
    updatedAt: r.updated_at,
  };
  if (r.server_id !== null) e.serverId = r.server_id;
  if (r.version_id !== null) e.versionId = r.version_id;
  if (r.hash !== null) e.hash = r.hash;
  if (r.last_run_id !== null) e.lastRunId = r.last_run_id;
  if (r.match_value !== null) e.matchValue = r.match_value;
  if (r.ended_at !== null) e.endedAt = r.ended_at;
  if (r.reason !== null) e.reason = r.reason;
  return e;
}

/** Same service, written differently (`https://X/fhir/` vs `https://x/fhir`), is one scope. */
export function normalizeBaseUrl(baseUrl: string): string {
  let s = baseUrl.trim();
  try {
    const u = new URL(s);
    u.hash = '';
    s = u.toString();
  } catch {
    // not a URL: keep as typed
  }
  return s.replace(/\/+$/, '');
}

const isBusy = (err: unknown): boolean => /^SQLITE_(BUSY|LOCKED)/.test(String((err as { code?: unknown } | null)?.code));

/** A write transaction of another connection outlasted the busy timeout: never a silent wait, never a config error. */
function busyError(path: string, what: string, timeoutMs: number, err: unknown): CareEtlError {
  return new CareEtlError(`State file ${path}: ${what} waited ${timeoutMs} ms for another process writing the same file, and gave up.`, {
    hint: 'another care-etl process (or a tool holding the file open) keeps it locked; retry when it is done',
    cause: err,
    exitCode: ExitCode.incomplete,
  });
}

function errorText(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return typeof code === 'string' ? `${err.message} (${code})` : err.message;
  }
  return String(err);
}

type Stmt = SqlStatement;

export class Ledger {
  readonly path: string;
  private readonly db: SqlDriver;
  private readonly now: () => Date;
  private readonly stmts = new Map<string, Stmt>();
  private readonly scopes = new Map<string, LedgerScopeImpl>();
  /** Scope id → the lease token this process holds on it: the fence of that scope's writes. */
  private readonly leases = new Map<number, number>();
  /** PostgreSQL: the scope whose fence was last queued (its failure surfaces with the write's round trip). */
  private fencing: number | undefined;
  private closed = false;

  private constructor(
    path: string,
    db: SqlDriver,
    now: () => Date,
    private readonly busyTimeoutMs: number,
  ) {
    this.path = path;
    this.db = db;
    this.now = now;
  }

  /**
   * Opens (creating if needed) the state file, or the PostgreSQL state of a `postgres://` URL (its schema created
   * and migrated). `':memory:'` gives a throw-away ledger for tests.
   */
  static open(path: string, opts: LedgerOptions = {}): Ledger {
    if (isPostgresLocation(path)) return Ledger.openPostgres(path, opts);
    const memory = path === ':memory:' || path === '';
    const fail = (what: string, err: unknown): never => {
      const code = (err as { code?: unknown } | null)?.code;
      if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') throw busyError(path, what, busyTimeoutMs, err);
      throw new CareEtlError(`State file ${path}: ${what} failed: ${errorText(err)}`, { hint: storageFailureHint(err) ?? HINT, cause: err });
    };

    if (!memory) {
      try {
        const dir = dirname(path);
        if (!existsSync(dir)) mkdirSync(dir, { recursive: true, mode: 0o700 });
        // Create owner-only before SQLite opens it (SQLite would use the umask); tighten an existing file.
        closeSync(openSync(path, 'a', 0o600));
        chmodIfOwned(path);
      } catch (err) {
        fail('creating the file', err);
      }
    }

    const busyTimeoutMs = Math.max(0, Math.floor(opts.busyTimeoutMs ?? 5000));
    let db: SqlDriver | undefined;
    try {
      db = SqliteDriver.open(path, {
        memory,
        exclusive: opts.exclusive ?? false,
        busyTimeoutMs,
        synchronous: opts.synchronous ?? 'NORMAL',
        walCheckpoint: opts.walCheckpoint,
      });
      migrate(db);
      if (!memory && simulatedFull(path) && db instanceof SqliteDriver) db.capAtCurrentSize(); // test seam: a full disk
      if (!memory) for (const side of ['-wal', '-shm', '-journal']) chmodIfOwned(path + side);
    } catch (err) {
      try {
        db?.close();
      } catch {
        // ignore
      }
      if (err instanceof CareEtlError) throw err;
      fail('opening', err);
    }
    return new Ledger(path, db!, opts.now ?? (() => new Date()), busyTimeoutMs);
  }

  private static openPostgres(url: string, opts: LedgerOptions): Ledger {
    const location = parsePostgresLocation(url); // registers the password as a secret first
    const busyTimeoutMs = Math.max(0, Math.floor(opts.busyTimeoutMs ?? 5000));
    let db: PgDriver | undefined;
    try {
      db = PgDriver.open(location, { lockTimeoutMs: busyTimeoutMs, synchronousCommit: opts.synchronous === 'FULL' });
      migrate(db);
    } catch (err) {
      db?.close();
      if (err instanceof CareEtlError)
        throw new CareEtlError(`State ${location.display}: ${err.message}`, { hint: err.hint, cause: err, exitCode: err.exitCode });
      throw postgresOpenError(location.display, err);
    }
    return new Ledger(location.display, db, opts.now ?? (() => new Date()), busyTimeoutMs);
  }

  /** Which engine holds the state. */
  get dialect(): SqlDialect {
    return this.db.dialect;
  }

  /** @internal A lock this connection holds until unlock or close (PostgreSQL: advisory); undefined on SQLite. */
  tryLock(name: string): boolean | undefined {
    return this.guard('taking a lock', () => this.db.tryLock(name));
  }

  /** @internal */
  unlock(name: string): void {
    this.db.unlock(name);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.stmts.clear();
    this.scopes.clear();
    this.db.close();
  }

  /** The ledger of one service + tenant. Same key in two scopes = two independent entries. */
  /** Run history of every server/tenant this state file knows, newest first (`care-etl runs`). */
  runs(opts: { limit?: number; id?: number } = {}): RunInfo[] {
    const rows = this.guard('reading runs', () =>
      opts.id !== undefined
        ? this.stmt('SELECT runs.*, scopes.base_url, scopes.tenant_id FROM runs JOIN scopes ON scopes.id = runs.scope_id WHERE runs.id = ?').all(opts.id)
        : this.stmt('SELECT runs.*, scopes.base_url, scopes.tenant_id FROM runs JOIN scopes ON scopes.id = runs.scope_id ORDER BY runs.id DESC LIMIT ?').all(
            opts.limit ?? 50,
          ),
    ) as RunRow[];
    return rows.map(runInfo);
  }

  /**
   * `lookupOnly` (a plan on a shared state): a scope the state does not know yet is not created — an empty scope
   * (id -1: no row matches), only to be read.
   */
  scope(baseUrl: string, tenantId: string, opts: { lookupOnly?: boolean } = {}): LedgerScope {
    const base = normalizeBaseUrl(baseUrl);
    const k = `${base}\u0000${tenantId}`;
    let s = this.scopes.get(k);
    if (!s) {
      const id = this.guard('opening the scope', () => {
        const find = () => (this.stmt('SELECT id FROM scopes WHERE base_url = ? AND tenant_id = ?').get(base, tenantId) as { id: number } | undefined)?.id;
        if (opts.lookupOnly) return find() ?? -1;
        this.stmt('INSERT INTO scopes (base_url, tenant_id) VALUES (?, ?) ON CONFLICT (base_url, tenant_id) DO NOTHING').run(base, tenantId);
        return find()!;
      });
      s = new LedgerScopeImpl(this, id, base, tenantId);
      if (id !== -1) this.scopes.set(k, s);
    }
    return s;
  }

  /** Runs `fn` in one transaction (nestable). Nothing in it is durable before it returns. */
  transaction<T>(fn: () => T): T {
    // Errors thrown by `fn` pass through untouched (our own statements already wrap theirs).
    // IMMEDIATE: the write lock at BEGIN, where busy_timeout applies (a deferred read upgraded to a write after
    // another connection's commit fails at once with SQLITE_BUSY_SNAPSHOT).
    return this.guard('a transaction', () => this.db.transaction(fn));
  }

  /** @internal The id of a scope of this ledger (the lease's key). */
  scopeIdOf(scope: LedgerScope): number {
    return (scope as LedgerScopeImpl).scopeId;
  }

  /** @internal From now on every write of the scope checks that `token` is still its lease's (lease.ts). */
  holdLease(scopeId: number, token: number): void {
    this.leases.set(scopeId, token);
    this.released.delete(scopeId);
  }

  /** @internal */
  heldToken(scopeId: number): number | undefined {
    return this.leases.get(scopeId);
  }

  /** @internal The lease was released (its fence stays armed: a later write fails); see `leaseHeld`. */
  leaseReleased(scopeId: number): void {
    this.released.add(scopeId);
  }

  /** @internal This process holds the scope's lease now: no other process writes the scope. */
  leaseHeld(scopeId: number): boolean {
    return this.leases.has(scopeId) && !this.released.has(scopeId);
  }

  private readonly released = new Set<number>();

  /** @internal Inside a transaction now (what is read may still be rolled back). */
  get inTransaction(): boolean {
    return this.db.inTransaction;
  }

  /** @internal Inside a write transaction: throws if this process holds the scope's lease no longer. */
  checkFence(scopeId: number): void {
    const token = this.leases.get(scopeId);
    if (token === undefined) return;
    if (this.db.dialect === 'postgres') {
      // Sent with the write it guards (one round trip): a division by zero fails the transaction unless the token is current.
      this.stmt('SELECT 1 / (SELECT count(*) FROM leases WHERE scope_id = ? AND token = ? AND released = 0) AS fenced').run(scopeId, token);
      this.fencing = scopeId;
      return;
    }
    const row = this.leaseRow(scopeId);
    if (row && row.token === token && row.released === 0) return;
    throw this.lostLease(row, token);
  }

  private leaseRow(scopeId: number): { token: number; released: number; host: string; pid: number; since: string } | undefined {
    return this.stmt('SELECT token, released, host, pid, since FROM leases WHERE scope_id = ?').get(scopeId) as
      { token: number; released: number; host: string; pid: number; since: string } | undefined;
  }

  private lostLease(row: { token: number; host: string; pid: number; since: string } | undefined, token?: number): CareEtlError {
    const by = row && row.token !== token ? `: host ${row.host} (pid ${row.pid}) took it over at ${row.since}` : '';
    return new CareEtlError(`This run lost its lease on state ${this.path}${by}; it stopped before its next write.`, {
      hint: 'its heartbeat stopped for longer than the stale limit (60 s): a suspended process or a frozen machine; run again once the other run is done',
      exitCode: ExitCode.incomplete,
    });
  }

  /** @internal */
  nowIso(): string {
    return this.now().toISOString();
  }

  /** @internal Prepared once per SQL text, reused for the life of the connection. */
  stmt(sql: string): Stmt {
    let s = this.stmts.get(sql);
    if (!s) {
      if (this.closed) throw new CareEtlError(`State file ${this.path} is closed.`);
      s = this.db.prepare(sql);
      this.stmts.set(sql, s);
    }
    return s;
  }

  /** @internal Turns SQLite failures into one CareEtlError (errors already CareEtlError pass through). */
  guard<T>(what: string, fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      if (err instanceof CareEtlError) throw err;
      if (err instanceof BridgeError && err.code === '22012' && this.fencing !== undefined) {
        // the fence (checkFence) failed: the transaction is rolled back; say who holds the lease now
        throw this.lostLease(this.leaseRow(this.fencing), this.leases.get(this.fencing));
      }
      if (err instanceof BridgeError) throw postgresError(this.path, what, err);
      if (!isSqliteError(err)) throw err;
      if (isBusy(err)) throw busyError(this.path, what, this.busyTimeoutMs, err);
      // issue 25: a full disk or a read-only folder stops the run (exit 3); what was recorded before stays
      const storage = storageFailureHint(err);
      throw new CareEtlError(`State file ${this.path}: ${what} failed: ${errorText(err)}`, {
        hint: storage ?? HINT,
        cause: err,
        ...(storage ? { exitCode: ExitCode.incomplete } : {}),
      });
    }
  }

  /** @internal */
  rawTransaction<T>(fn: () => T): T {
    return this.db.transaction(fn);
  }
}

/** A statement of the PostgreSQL state failed: the run stops (exit 3); the message is redacted (it may echo the URL). */
function postgresError(display: string, what: string, err: BridgeError): CareEtlError {
  return new CareEtlError(`State ${display}: ${what} failed: ${redactKnown(errorText(err))}`, {
    hint: err.code === '55P03' ? 'another process holds a row lock of the state; retry when it is done' : 'check the database server and the connection to it',
    cause: err,
    exitCode: ExitCode.incomplete,
  });
}

/** Connecting or migrating failed. Wrong credentials or database: a configuration error (2); otherwise 3. */
function postgresOpenError(display: string, err: unknown): CareEtlError {
  const code = String((err as { code?: unknown } | null)?.code ?? '');
  const config = /^(28|3D|42)/.test(code);
  return new CareEtlError(`State ${display}: opening failed: ${redactKnown(errorText(err))}`, {
    hint: config
      ? 'check the user, database and password (PGPASSWORD or ~/.pgpass keep it out of the URL), and that the role may create the schema'
      : 'check that the PostgreSQL server runs and is reachable from here',
    cause: err,
    exitCode: config ? ExitCode.config : ExitCode.incomplete,
  });
}

function isSqliteError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  return err.name === 'SqliteError' || (typeof code === 'string' && code.startsWith('SQLITE_'));
}

function chmodIfOwned(p: string): void {
  try {
    chmodSync(p, 0o600);
  } catch {
    // missing side file, or not ours to chmod: nothing to do
  }
}

function migrate(db: SqlDriver): void {
  db.migrate((current, hasOtherTables) => {
    if (current > SCHEMA_VERSION) {
      throw new CareEtlError(`The state was written by a newer care-etl (schema ${current}, this version knows ${SCHEMA_VERSION}).`, {
        hint: `upgrade care-etl, or ${HINT}`,
      });
    }
    if (current === SCHEMA_VERSION) return undefined;
    // A non-empty database without our schema version is not ours.
    if (current === 0 && hasOtherTables) throw new Error('the database holds tables but is not a care-etl state');
    for (let v = current + 1; v <= SCHEMA_VERSION; v++) db.exec(MIGRATIONS[v]!);
    return SCHEMA_VERSION;
  });
}

const INTENT_SQL = `INSERT INTO entries (scope_id, mapping, key, resource_type, status, server_id, version_id, hash, last_run_id, match_value, ended_at, reason, updated_at)
  VALUES (?, ?, ?, ?, 'pending', NULL, NULL, ?, ?, ?, NULL, NULL, ?)
  ON CONFLICT (scope_id, mapping, key) DO UPDATE SET
    resource_type = excluded.resource_type, status = 'pending', server_id = NULL, version_id = NULL,
    hash = excluded.hash, last_run_id = excluded.last_run_id, match_value = excluded.match_value,
    ended_at = NULL, reason = NULL, updated_at = excluded.updated_at`;

const SYNCED_SQL = `INSERT INTO entries (scope_id, mapping, key, resource_type, status, server_id, version_id, hash, last_run_id, match_value, ended_at, reason, updated_at)
  VALUES (?, ?, ?, ?, 'synced', ?, ?, ?, ?, NULL, NULL, NULL, ?)
  ON CONFLICT (scope_id, mapping, key) DO UPDATE SET
    resource_type = excluded.resource_type, status = 'synced', server_id = excluded.server_id,
    version_id = excluded.version_id, hash = excluded.hash, last_run_id = excluded.last_run_id,
    ended_at = NULL, reason = NULL, updated_at = excluded.updated_at`;

/** Most server ids of a type a scope reads up front for `keyOfServerId` (~6 MB); a larger state asks per id. */
const MAX_PRELOADED_SERVER_IDS = 100_000;

/** Most `serverIdOf` answers a scope remembers (then it starts again: memory stays flat on any export). */
const MAX_REMEMBERED_SERVER_IDS = 100_000;

const serverIdKey = (mapping: string, key: string): string => `${mapping}\u0000${key}`;

/** Synced entries of a mapping (`?` 1–2: scope, mapping) not seen by a run (`?` 3) and not ended: gone from its source. */
const NOT_SEEN = `scope_id = ? AND mapping = ? AND status = 'synced' AND ended_at IS NULL AND (last_run_id IS NULL OR last_run_id <> ?)`;

class LedgerScopeImpl implements LedgerScope {
  constructor(
    private readonly ledger: Ledger,
    readonly scopeId: number,
    readonly baseUrl: string,
    readonly tenantId: string,
  ) {}

  /**
   * A write of this scope: in a transaction that first checks the run's lease (the fence), if it holds one. `touched`:
   * the entries it may change (undefined: any) — their remembered server ids are dropped first (see `serverIds`).
   */
  private write(what: string, fn: () => void, touched?: readonly { mapping: string; key: string }[]): void {
    if (touched === undefined) this.serverIds.clear();
    else for (const t of touched) this.serverIds.delete(serverIdKey(t.mapping, t.key));
    this.ledger.guard(what, () =>
      this.ledger.rawTransaction(() => {
        this.ledger.checkFence(this.scopeId);
        fn();
      }),
    );
  }

  beginRun(info: { mappingFile: string; dryRun: boolean }): number {
    return this.ledger.guard('recording the run', () => {
      const r = this.ledger
        .stmt('INSERT INTO runs (scope_id, mapping_file, dry_run, started_at) VALUES (?, ?, ?, ?) RETURNING id')
        .get(this.scopeId, info.mappingFile, info.dryRun ? 1 : 0, this.ledger.nowIso()) as { id: number };
      const runId = Number(r.id);
      // The holder's run number, for the message a second run gets (no-op without a lease).
      const token = this.ledger.heldToken(this.scopeId);
      if (token !== undefined) this.ledger.stmt('UPDATE leases SET run_id = ? WHERE scope_id = ? AND token = ?').run(runId, this.scopeId, token);
      return runId;
    });
  }

  finishRun(runId: number, outcome: RunOutcome, summary?: object): void {
    this.ledger.guard('recording the run outcome', () => {
      this.ledger
        .stmt('UPDATE runs SET finished_at = ?, outcome = ?, summary = ? WHERE id = ? AND scope_id = ?')
        .run(this.ledger.nowIso(), outcome, summary === undefined ? null : JSON.stringify(summary), runId, this.scopeId);
    });
  }

  recentRuns(limit = 10): RunInfo[] {
    const rows = this.ledger.guard('reading runs', () =>
      this.ledger.stmt('SELECT * FROM runs WHERE scope_id = ? ORDER BY id DESC LIMIT ?').all(this.scopeId, limit),
    ) as RunRow[];
    return rows.map(runInfo);
  }

  get(mapping: string, key: string): LedgerEntry | undefined {
    const row = this.ledger.guard('reading an entry', () =>
      this.ledger.stmt(`SELECT ${ENTRY_COLUMNS} FROM entries WHERE scope_id = ? AND mapping = ? AND key = ?`).get(this.scopeId, mapping, key),
    ) as EntryRow | undefined;
    return row ? toEntry(row) : undefined;
  }

  /**
   * Server ids of `resourceType` recorded in this scope: read in one statement when first asked (at most
   * MAX_PRELOADED_SERVER_IDS of them), then those this process records (asked once per type, while this process holds
   * the scope's lease: no other process writes it then) — a superset: an id missing from it is in no entry. The loader
   * asks per create: a statement each was 3 % of a second run's CPU (issue 28). Undefined: not known that way (more
   * ids than that, or no lease).
   */
  private idsRecordedSince(resourceType: string): Set<string> | undefined {
    // Not read inside a transaction: what it wrote may still be rolled back.
    if (!this.ledger.leaseHeld(this.scopeId) || (!this.idsAsked.has(resourceType) && this.ledger.inTransaction)) return undefined;
    if (!this.idsAsked.has(resourceType)) {
      this.idsAsked.add(resourceType);
      const rows = this.ledger.guard('looking up server ids', () =>
        this.ledger
          .stmt('SELECT server_id FROM entries WHERE scope_id = ? AND resource_type = ? AND server_id IS NOT NULL LIMIT ?')
          .all(this.scopeId, resourceType, MAX_PRELOADED_SERVER_IDS + 1),
      ) as { server_id: string }[];
      if (rows.length <= MAX_PRELOADED_SERVER_IDS) this.idsSince.set(resourceType, new Set(rows.map((r) => r.server_id)));
    }
    return this.idsSince.get(resourceType);
  }

  private readonly idsAsked = new Set<string>();
  private readonly idsSince = new Map<string, Set<string>>();

  /** Notes ids about to be recorded (before the statement: a write rolled back leaves a harmless extra id). */
  private noteIds(entries: readonly SyncedInput[]): void {
    if (this.idsSince.size === 0) return;
    for (const e of entries) this.idsSince.get(e.resourceType)?.add(e.serverId);
  }

  recordIntent(e: IntentInput): void {
    this.write(
      `recording the create intent of ${e.mapping}/${e.key}`,
      () => {
        this.ledger.stmt(INTENT_SQL).run(...this.intentParams(e, this.ledger.nowIso()));
      },
      [e],
    );
  }

  recordSynced(e: SyncedInput): void {
    this.noteIds([e]);
    this.write(
      `recording ${e.mapping}/${e.key} as synced`,
      () => {
        this.ledger.stmt(SYNCED_SQL).run(...this.syncedParams(e, this.ledger.nowIso()));
      },
      [e],
    );
  }

  recordBatch(intents: readonly IntentInput[], synced: readonly SyncedInput[]): void {
    if (!intents.length && !synced.length) return;
    const at = this.ledger.nowIso();
    this.noteIds(synced);
    this.write(
      `recording ${intents.length} create intents and ${synced.length} synced entries`,
      () => {
        // Synced first: an intent is the later fact for its key (its POST is sent only once the intent is durable).
        if (synced.length) this.ledger.stmt(SYNCED_SQL).runMany(synced.map((e) => this.syncedParams(e, at)));
        if (intents.length) this.ledger.stmt(INTENT_SQL).runMany(intents.map((e) => this.intentParams(e, at)));
      },
      intents.length ? [...synced, ...intents] : synced,
    );
  }

  private intentParams(e: IntentInput, at: string): unknown[] {
    return [this.scopeId, e.mapping, e.key, e.resourceType, e.hash, e.runId, e.matchValue ?? null, at];
  }

  private syncedParams(e: SyncedInput, at: string): unknown[] {
    return [this.scopeId, e.mapping, e.key, e.resourceType, e.serverId, versionIdOf(e.versionId) ?? null, e.hash, e.runId, at];
  }

  recordRejected(e: RejectedInput): void {
    // It keeps the entry's server id under this type: the type's ids are read again when next asked.
    this.idsSince.delete(e.resourceType);
    this.idsAsked.delete(e.resourceType);
    this.write(`recording ${e.mapping}/${e.key} as rejected`, () => {
      this.ledger
        .stmt(
          `INSERT INTO entries (scope_id, mapping, key, resource_type, status, last_run_id, reason, updated_at)
           VALUES (?, ?, ?, ?, 'rejected', ?, ?, ?)
           ON CONFLICT (scope_id, mapping, key) DO UPDATE SET
             resource_type = excluded.resource_type, status = 'rejected', last_run_id = excluded.last_run_id,
             reason = excluded.reason, updated_at = excluded.updated_at`,
        )
        .run(this.scopeId, e.mapping, e.key, e.resourceType, e.runId, e.reason === undefined ? null : reasonText(redactKnown(e.reason)), this.ledger.nowIso());
    });
  }

  forget(mapping: string, key: string): void {
    this.write(`forgetting ${mapping}/${key}`, () => {
      this.ledger.stmt('DELETE FROM entries WHERE scope_id = ? AND mapping = ? AND key = ?').run(this.scopeId, mapping, key);
    });
  }

  keys(mapping: string, max: number): Set<string> | undefined {
    const rows = this.ledger.guard('listing keys', () =>
      this.ledger.stmt('SELECT key FROM entries WHERE scope_id = ? AND mapping = ? LIMIT ?').all(this.scopeId, mapping, max + 1),
    ) as { key: string }[];
    return rows.length > max ? undefined : new Set(rows.map((r) => r.key));
  }

  *entries(mapping: string): IterableIterator<LedgerEntry> {
    const rows = this.ledger.guard('listing entries', () =>
      this.ledger.stmt(`SELECT ${ENTRY_COLUMNS} FROM entries WHERE scope_id = ? AND mapping = ? ORDER BY key`).all(this.scopeId, mapping),
    ) as EntryRow[];
    for (const r of rows) yield toEntry(r);
  }

  markSeen(mapping: string, keys: readonly string[], runId: number): void {
    if (keys.length === 0) return;
    this.write(
      `marking ${keys.length} keys of ${mapping} as seen`,
      () => {
        const stmt = this.ledger.stmt('UPDATE entries SET last_run_id = ? WHERE scope_id = ? AND mapping = ? AND key = ?');
        stmt.runMany(keys.map((key) => [runId, this.scopeId, mapping, key]));
      },
      [], // no server id changes
    );
  }

  pending(mapping?: string): LedgerEntry[] {
    const rows = this.ledger.guard('listing pending entries', () =>
      mapping === undefined
        ? this.ledger.stmt(`SELECT ${ENTRY_COLUMNS} FROM entries WHERE scope_id = ? AND status = 'pending' ORDER BY mapping, key`).all(this.scopeId)
        : this.ledger
            .stmt(`SELECT ${ENTRY_COLUMNS} FROM entries WHERE scope_id = ? AND mapping = ? AND status = 'pending' ORDER BY key`)
            .all(this.scopeId, mapping),
    ) as EntryRow[];
    return rows.map(toEntry);
  }

  notSeenSince(mapping: string, runId: number, limit?: number): LedgerEntry[] {
    const rows = this.ledger.guard('listing entries missing from the source', () =>
      this.ledger
        .stmt(`SELECT ${ENTRY_COLUMNS} FROM entries WHERE ${NOT_SEEN} ORDER BY key${limit === undefined ? '' : ' LIMIT ?'}`)
        .all(this.scopeId, mapping, runId, ...(limit === undefined ? [] : [Math.max(0, Math.floor(limit))])),
    ) as EntryRow[];
    return rows.map(toEntry);
  }

  notSeenCount(mapping: string, runId: number): number {
    const row = this.ledger.guard('counting entries missing from the source', () =>
      this.ledger.stmt(`SELECT count(*) AS n FROM entries WHERE ${NOT_SEEN}`).get(this.scopeId, mapping, runId),
    ) as { n: number | string };
    return Number(row.n);
  }

  loadedCount(mapping: string): number {
    const row = this.ledger.guard('counting loaded entries', () =>
      this.ledger
        .stmt(`SELECT count(*) AS n FROM entries WHERE scope_id = ? AND mapping = ? AND status = 'synced' AND ended_at IS NULL`)
        .get(this.scopeId, mapping),
    ) as { n: number };
    return row.n;
  }

  markEnded(mapping: string, key: string, endedAt: string, versionId?: string, hash?: string): void {
    this.write(`marking ${mapping}/${key} as ended`, () => {
      this.ledger
        .stmt(
          `UPDATE entries SET ended_at = ?, version_id = coalesce(?, version_id), hash = coalesce(?, hash), updated_at = ?
           WHERE scope_id = ? AND mapping = ? AND key = ?`,
        )
        .run(endedAt, versionIdOf(versionId) ?? null, hash ?? null, this.ledger.nowIso(), this.scopeId, mapping, key);
    });
  }

  keyOfServerId(resourceType: string, serverId: string): { mapping: string; key: string } | undefined {
    // No state holds a NUL (ids are FHIR ids; PostgreSQL cannot store one), and a statement asking for it fails the run
    // (`$sourceKey` takes any text of a row).
    if (serverId.includes('\u0000') || resourceType.includes('\u0000')) return undefined;
    const since = this.idsRecordedSince(resourceType);
    // Not recorded before, nor since: no statement (the loader asks per create). An id with a lone UTF-16 surrogate is
    // read back from the state as replacement characters (U+FFFD): only the statement finds it.
    if (since && !since.has(serverId) && isWellFormed(serverId)) return undefined;
    return this.ledger.guard('looking up a server id', () =>
      this.ledger
        .stmt('SELECT mapping, key FROM entries WHERE scope_id = ? AND resource_type = ? AND server_id = ? ORDER BY mapping, key LIMIT 1')
        .get(this.scopeId, resourceType, serverId),
    ) as { mapping: string; key: string } | undefined;
  }

  serverIdOf(mapping: string, key: string): string | undefined {
    // Remembered only while no other process writes the scope (the lease) and nothing read can be rolled back.
    const remember = this.ledger.leaseHeld(this.scopeId) && !this.ledger.inTransaction;
    const k = serverIdKey(mapping, key);
    const known = remember ? this.serverIds.get(k) : undefined;
    if (known !== undefined) return known ?? undefined;
    const row = this.ledger.guard('looking up a server id', () =>
      this.ledger.stmt('SELECT server_id FROM entries WHERE scope_id = ? AND mapping = ? AND key = ?').get(this.scopeId, mapping, key),
    ) as { server_id: string | null } | undefined;
    const id = row?.server_id ?? undefined;
    if (remember) {
      if (this.serverIds.size >= MAX_REMEMBERED_SERVER_IDS) this.serverIds.clear();
      this.serverIds.set(k, id ?? null);
    }
    return id;
  }

  /**
   * `serverIdOf`'s answers (null: no server id), asked by every `$ref` of every row — a statement each was two thirds
   * of a care team's mapping (issue 28). A write drops the answers of the entries it may change before its statement
   * runs (`write`): committed or rolled back, the next read asks the state again.
   */
  private readonly serverIds = new Map<string, string | null>();

  getWatermark(name: string): string | undefined {
    const row = this.ledger.guard('reading a watermark', () =>
      this.ledger.stmt('SELECT value FROM watermarks WHERE scope_id = ? AND name = ?').get(this.scopeId, name),
    ) as { value: string } | undefined;
    return row?.value;
  }

  setWatermark(name: string, value: string): void {
    this.write('writing a watermark', () => {
      this.ledger
        .stmt(
          `INSERT INTO watermarks (scope_id, name, value, updated_at) VALUES (?, ?, ?, ?)
           ON CONFLICT (scope_id, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
        )
        .run(this.scopeId, name, value, this.ledger.nowIso());
    });
  }

  deliveredVersion(name: string, resourceId: string): string | undefined {
    const row = this.ledger.guard('reading the delivered set', () =>
      this.ledger
        .stmt('SELECT version FROM export_delivered WHERE scope_id = ? AND name = ? AND staged = 0 AND resource_id = ?')
        .get(this.scopeId, name, resourceId),
    ) as { version: string } | undefined;
    return row?.version;
  }

  deliveredCount(name: string): number {
    const row = this.ledger.guard('reading the delivered set', () =>
      this.ledger.stmt('SELECT count(*) AS n FROM export_delivered WHERE scope_id = ? AND name = ? AND staged = 0').get(this.scopeId, name),
    ) as { n: number };
    return row.n;
  }

  stageDelivered(name: string, items: readonly { id: string; version: string }[]): void {
    if (items.length === 0) return;
    this.ledger.guard('recording delivered observations', () => {
      const stmt = this.ledger.stmt(`INSERT INTO export_delivered (scope_id, name, staged, resource_id, version) VALUES (?, ?, 1, ?, ?)
         ON CONFLICT (scope_id, name, staged, resource_id) DO UPDATE SET version = excluded.version`);
      this.ledger.rawTransaction(() => stmt.runMany(items.map((it) => [this.scopeId, name, it.id, it.version])));
    });
  }

  commitDelivered(name: string): void {
    this.ledger.guard('saving the delivered set', () => {
      this.ledger.rawTransaction(() => {
        this.ledger.stmt('DELETE FROM export_delivered WHERE scope_id = ? AND name = ? AND staged = 0').run(this.scopeId, name);
        this.ledger.stmt('UPDATE export_delivered SET staged = 0 WHERE scope_id = ? AND name = ? AND staged = 1').run(this.scopeId, name);
      });
    });
  }

  discardStagedDelivered(name: string): void {
    this.ledger.guard('discarding a staged delivered set', () => {
      this.ledger.stmt('DELETE FROM export_delivered WHERE scope_id = ? AND name = ? AND staged = 1').run(this.scopeId, name);
    });
  }

  counts(mapping?: string): Record<EntryStatus, number> {
    const rows = this.ledger.guard('counting entries', () =>
      mapping === undefined
        ? this.ledger.stmt('SELECT status, count(*) AS n FROM entries WHERE scope_id = ? GROUP BY status').all(this.scopeId)
        : this.ledger.stmt('SELECT status, count(*) AS n FROM entries WHERE scope_id = ? AND mapping = ? GROUP BY status').all(this.scopeId, mapping),
    ) as { status: EntryStatus; n: number }[];
    const out = Object.fromEntries(STATUSES.map((s) => [s, 0])) as Record<EntryStatus, number>;
    for (const r of rows) out[r.status] = r.n;
    return out;
  }

  transaction<T>(fn: () => T): T {
    return this.ledger.transaction(fn);
  }
}
