/**
 * The SQL execution under the ledger: one small synchronous interface, two implementations — SQLite
 * (better-sqlite3, below) and PostgreSQL (postgres/pg-driver.ts, through a synchronous bridge). The ledger's SQL
 * is written once in a portable subset (`?` placeholders, `INSERT … ON CONFLICT`, `RETURNING`); each driver
 * translates what its engine needs (postgres/dialect.ts).
 */
import Database from 'better-sqlite3';
import { WalCheckpointer, type WalCheckpointOptions } from './wal-checkpointer.js';

export interface SqlStatement {
  /** No result: inside a transaction PostgreSQL sends it with the next statement or the COMMIT (its error surfaces there). */
  run(...params: unknown[]): void;
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  /** The statement once per parameter list, results unread (PostgreSQL: one round trip). */
  runMany(paramLists: readonly unknown[][]): void;
}

export type SqlDialect = 'sqlite' | 'postgres';

export interface SqlDriver {
  readonly dialect: SqlDialect;
  prepare(sql: string): SqlStatement;
  /** One or more statements without parameters (migrations). */
  exec(sql: string): void;
  /** Runs `fn` in one write transaction (SQLite: IMMEDIATE); nested calls become savepoints. */
  transaction<T>(fn: () => T): T;
  /** Inside `transaction` now: what is read may still be rolled back. */
  readonly inTransaction: boolean;
  /** The schema version this state holds (0: empty), and `fn` migrating it, under a lock no other process shares. */
  migrate(fn: (current: number, hasOtherTables: boolean) => number | undefined): void;
  /** A lock held by this connection until unlock or close (PostgreSQL advisory lock); undefined: no such lock here. */
  tryLock(name: string): boolean | undefined;
  unlock(name: string): void;
  close(): void;
}

export interface SqliteDriverOptions {
  memory: boolean;
  exclusive: boolean;
  busyTimeoutMs: number;
  synchronous: 'NORMAL' | 'FULL';
  /** The WAL's checkpoints in a worker thread (wal-checkpointer.ts); false: SQLite's automatic checkpoint only. */
  walCheckpoint?: WalCheckpointOptions | false;
}

// A checkpoint every 16,384 pages (64 MiB of WAL) instead of 1,000: a run rewrites the same index pages commit after
// commit, and each checkpoint copied them back and synced the file (~7 % of the loader's CPU per request,
// bench/load-throughput.mjs). Kept until the checkpoint worker runs, and whenever it cannot.
const AUTO_CHECKPOINT_PAGES = 16384;

export class SqliteDriver implements SqlDriver {
  readonly dialect = 'sqlite';
  private constructor(
    private readonly db: Database.Database,
    /** @internal Tests read its state. */
    readonly checkpointer: WalCheckpointer | undefined,
  ) {}

  static open(path: string, opts: SqliteDriverOptions): SqliteDriver {
    const db = new Database(path);
    try {
      if (opts.exclusive) db.pragma('locking_mode = EXCLUSIVE'); // before WAL: no -shm file
      db.pragma(`busy_timeout = ${opts.busyTimeoutMs}`);
      if (!opts.memory) {
        const mode = db.pragma('journal_mode = WAL', { simple: true });
        if (String(mode).toLowerCase() !== 'wal') throw new Error(`cannot switch to WAL journal mode (got ${String(mode)})`);
      }
      db.pragma(`synchronous = ${opts.synchronous}`);
      // SQLite still checkpoints and removes the WAL when the ledger closes.
      db.pragma(`wal_autocheckpoint = ${AUTO_CHECKPOINT_PAGES}`);
      // A write lock once now: a file nobody can write fails at open, not at the first write.
      db.exec('BEGIN IMMEDIATE; COMMIT;');
    } catch (err) {
      db.close();
      throw err;
    }
    // No second connection to a memory database or to a file held in exclusive mode: SQLite checkpoints as before.
    const sqliteOnly = opts.memory || opts.exclusive || opts.walCheckpoint === false;
    return new SqliteDriver(db, sqliteOnly ? undefined : new WalCheckpointer(db, path, opts.synchronous, AUTO_CHECKPOINT_PAGES, opts.walCheckpoint || {}));
  }

  prepare(sql: string): SqlStatement {
    const s = this.db.prepare(sql);
    return {
      run: (...p) => {
        s.run(...p);
        this.written();
      },
      get: (...p) => s.get(...p),
      all: (...p) => s.all(...p),
      runMany: (lists) => {
        for (const p of lists) s.run(...p);
        this.written();
      },
    };
  }

  exec(sql: string): void {
    this.db.exec(sql);
    this.written();
  }

  transaction<T>(fn: () => T): T {
    const result = this.db.transaction(fn).immediate();
    this.written();
    return result;
  }

  get inTransaction(): boolean {
    return this.db.inTransaction;
  }

  migrate(fn: (current: number, hasOtherTables: boolean) => number | undefined): void {
    this.db
      .transaction(() => {
        const current = Number(this.db.pragma('user_version', { simple: true }));
        const tables = current === 0 ? (this.db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get() as { n: number }).n : 0;
        const next = fn(current, tables > 0);
        if (next !== undefined) this.db.pragma(`user_version = ${next}`);
      })
      .immediate();
  }

  /** Test seam (CARE_ETL_TEST_ENOSPC): the file may grow no more, as on a full disk — SQLite's own SQLITE_FULL. */
  capAtCurrentSize(): void {
    this.db.pragma(`max_page_count = ${Number(this.db.pragma('page_count', { simple: true }))}`);
  }

  tryLock(): undefined {
    return undefined;
  }

  unlock(): void {}

  close(): void {
    this.checkpointer?.close(); // its connection first: this last one then checkpoints and removes the WAL
    this.db.close();
  }

  /** After a write: once committed (outside any transaction), the checkpointer's turn. */
  private written(): void {
    if (this.checkpointer && !this.db.inTransaction) this.checkpointer.afterCommit();
  }
}
