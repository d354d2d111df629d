/**
 * The ledger's SQL driver on PostgreSQL: one connection (owned by the bridge's worker), tables in a schema of
 * their own (default care_etl), statements translated once (dialect.ts) and prepared by name. Round trips: a
 * transaction's BEGIN / SAVEPOINT and its `run` statements (no result) are queued and travel with the next statement
 * that needs an answer, or with the COMMIT — a write without a read is one round trip. Advisory locks (session level) are held by this connection: they go when it closes, a killed process
 * included.
 */
import { createHash } from 'node:crypto';
import type { SqlDriver, SqlStatement } from '../sql-driver.js';
import type { PostgresLocation } from '../state-location.js';
import { ddlToPostgres, placeholdersToPostgres } from './dialect.js';
import { SyncBridge, type BridgeQuery, type BridgeResult } from './sync-bridge.js';

export interface PgDriverOptions {
  /** Each round trip's bound (default 30 s). */
  callTimeoutMs?: number;
  /** How long a statement waits for a row lock (PostgreSQL lock_timeout; default 5 s). */
  lockTimeoutMs: number;
  /**
   * false (the ledger's default, `synchronous: 'NORMAL'`): `synchronous_commit = off` — a commit survives any crash of
   * care-etl (the server has it), but a crash of the database server may lose its last ~0.6 s, as NORMAL on the
   * SQLite file may lose the last commits on an OS crash. true (`'FULL'`): every commit flushed before it returns.
   */
  synchronousCommit: boolean;
}

const quoteIdent = (name: string): string => `"${name.replace(/"/g, '""')}"`;

export class PgDriver implements SqlDriver {
  readonly dialect = 'postgres';
  private readonly names = new Map<string, string>();
  /** Statements sent with the next one (BEGIN, SAVEPOINT): fewer round trips. */
  private queued: BridgeQuery[] = [];
  private depth = 0;

  private constructor(
    private readonly bridge: SyncBridge,
    private readonly schema: string,
  ) {}

  static open(location: PostgresLocation, opts: PgDriverOptions): PgDriver {
    const bridge = new SyncBridge(opts.callTimeoutMs ?? 30_000);
    try {
      bridge.connect({ connectionString: location.connectionString, application_name: 'care-etl', connectionTimeoutMillis: 15_000 }, [
        { text: `SET search_path TO ${quoteIdent(location.schema)}` },
        { text: `SET lock_timeout = ${Math.max(1, Math.floor(opts.lockTimeoutMs))}` },
        { text: `SET synchronous_commit = ${opts.synchronousCommit ? 'on' : 'off'}` },
      ]);
    } catch (err) {
      bridge.close();
      throw err;
    }
    return new PgDriver(bridge, location.schema);
  }

  prepare(sql: string): SqlStatement {
    const text = placeholdersToPostgres(sql);
    let name = this.names.get(text);
    if (!name) this.names.set(text, (name = `care_etl_${this.names.size + 1}`));
    const q = (values: unknown[]): BridgeQuery => ({ name, text, values: values.map(toParam) });
    return {
      run: (...p) => {
        if (this.depth > 0) this.queued.push(q(p));
        else this.send([q(p)]);
      },
      get: (...p) => this.send([q(p)]).rows[0],
      all: (...p) => this.send([q(p)]).rows,
      runMany: (lists) => {
        if (lists.length > 0)
          this.sendMany(
            text,
            lists.map((l) => l.map(toParam)),
          );
      },
    };
  }

  exec(sql: string): void {
    this.send([{ text: ddlToPostgres(sql) }]);
  }

  get inTransaction(): boolean {
    return this.depth > 0;
  }

  transaction<T>(fn: () => T): T {
    const level = this.depth;
    // Queued, not sent: it travels with the transaction's first statement (or is dropped if none comes).
    const start: BridgeQuery = { text: level === 0 ? 'BEGIN' : `SAVEPOINT care_etl_${level}` };
    this.queued.push(start);
    this.depth++;
    let result: T;
    try {
      result = fn();
    } catch (err) {
      this.depth--;
      this.end(level, start, 'ROLLBACK');
      throw err;
    }
    this.depth--;
    this.end(level, start, 'COMMIT');
    return result;
  }

  migrate(fn: (current: number, hasOtherTables: boolean) => number | undefined): void {
    this.transaction(() => {
      // One migrating process at a time (two runs starting at once); the schema is ours to create.
      this.send([
        { text: 'SELECT pg_advisory_xact_lock($1::bigint)', values: [lockKey(`migrate\u0000${this.schema}`)] },
        { text: `CREATE SCHEMA IF NOT EXISTS ${quoteIdent(this.schema)}` },
      ]);
      const [tables, version] = this.send(
        [
          { text: 'SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = $1', values: [this.schema] },
          { text: 'SELECT to_regclass($1) IS NOT NULL AS has', values: [`${quoteIdent(this.schema)}.schema_version`] },
        ],
        true,
      );
      const hasVersion = version!.rows[0]!.has === true;
      const current = hasVersion ? Number(this.send([{ text: 'SELECT max(version) AS v FROM schema_version' }]).rows[0]!.v ?? 0) : 0;
      const next = fn(current, !hasVersion && Number(tables!.rows[0]!.n) > 0);
      if (next === undefined) return;
      this.send([
        { text: 'CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)' },
        { text: 'DELETE FROM schema_version' },
        { text: 'INSERT INTO schema_version (version) VALUES ($1)', values: [next] },
      ]);
    });
  }

  /** A session advisory lock on `name` (within this schema): true if this connection now holds it. */
  tryLock(name: string): boolean {
    return this.send([{ text: 'SELECT pg_try_advisory_lock($1::bigint) AS ok', values: [lockKey(`${this.schema}\u0000${name}`)] }]).rows[0]!.ok === true;
  }

  unlock(name: string): void {
    this.send([{ text: 'SELECT pg_advisory_unlock($1::bigint)', values: [lockKey(`${this.schema}\u0000${name}`)] }]);
  }

  close(): void {
    this.bridge.close();
  }

  private end(level: number, start: BridgeQuery, how: 'COMMIT' | 'ROLLBACK'): void {
    const at = this.queued.indexOf(start);
    if (at >= 0 && (how === 'ROLLBACK' || at === this.queued.length - 1)) {
      // Nothing of it reached the server (BEGIN / SAVEPOINT and its statements still queued): drop them.
      this.queued.length = at;
      return;
    }
    const sp = `care_etl_${level}`;
    if (how === 'COMMIT') {
      if (level > 0) this.queued.push({ text: `RELEASE SAVEPOINT ${sp}` });
      else {
        try {
          this.send([{ text: 'COMMIT' }]); // with the statements queued since the last answer
        } catch (err) {
          this.sendQuietly([{ text: 'ROLLBACK' }]);
          throw err;
        }
      }
      return;
    }
    this.queued = []; // inner RELEASEs: the rollback undoes them
    this.sendQuietly(level > 0 ? [{ text: `ROLLBACK TO SAVEPOINT ${sp}` }, { text: `RELEASE SAVEPOINT ${sp}` }] : [{ text: 'ROLLBACK' }]);
  }

  /** A rollback after a failure: its own failure (a lost connection) must not hide the first error. */
  private sendQuietly(queries: BridgeQuery[]): void {
    try {
      this.send(queries);
    } catch {
      this.queued = [];
    }
  }

  /** What is queued, then one statement per parameter list, in one bridge message. */
  private sendMany(text: string, lists: unknown[][]): void {
    const queued = this.queued;
    this.queued = [];
    this.bridge.query(queued, 'running a statement', { text, lists });
  }

  /** Sends what is queued plus `queries` in one round trip; the answer of the last (or of all `queries`). */
  private send(queries: BridgeQuery[]): BridgeResult;
  private send(queries: BridgeQuery[], all: true): BridgeResult[];
  private send(queries: BridgeQuery[], all?: true): BridgeResult | BridgeResult[] {
    const batch = this.queued.length ? [...this.queued, ...queries] : queries;
    const prefix = this.queued.length;
    this.queued = [];
    const results = this.bridge.query(batch, 'running a statement');
    return all ? results.slice(prefix) : results[results.length - 1]!;
  }
}

function toParam(v: unknown): unknown {
  return typeof v === 'boolean' ? (v ? 1 : 0) : v;
}

/** A 64-bit advisory lock key from a name (the first 8 bytes of its SHA-256, signed). */
function lockKey(name: string): string {
  return createHash('sha256').update(name).digest().readBigInt64BE(0).toString();
}
