/**
 * A lookup table too large to hold in memory, indexed on disk (better-sqlite3): code → JSON value, or with
 * `many` code → values in file order. The database lives in a private folder (0700) under the temp dir, the
 * file is created 0600 before SQLite opens it, and once the table is built both are unlinked: the open handle
 * keeps reading, nothing stays behind even if the process is killed, and the space is freed when the process
 * ends (on Windows, where an open file cannot be unlinked, they are removed at `close()` or at exit).
 */
import Database from 'better-sqlite3';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { openScratchDatabase } from '../state/scratch-db.js';
import { INDEXED_LOOKUP, type IndexedLookup } from './types.js';

/** Rows per transaction while building. */
const BATCH = 5000;

/** Tables not closed yet: closed at exit (one listener for all of them). */
const OPEN = new Set<DiskLookup>();
let exitHooked = false;
function closeAllAtExit(): void {
  for (const t of OPEN) {
    try {
      t.close();
    } catch {
      // exiting anyway: the folder name says what it was (care-etl-lookup-<pid>-…)
    }
  }
}

export class DiskLookup implements IndexedLookup {
  readonly [INDEXED_LOOKUP] = true as const;
  readonly #db: Database.Database;
  readonly #many: boolean;
  #dir: string | undefined;
  #inTx = 0;
  #seq = 0;
  #size = 0;
  #closed = false;
  readonly #insert: Database.Statement;
  /** One value per code: the first value and origin of a code (to tell a duplicate from a repeat). */
  readonly #existing: Database.Statement | undefined;
  #get: Database.Statement | undefined;
  #has: Database.Statement | undefined;
  #sample: Database.Statement | undefined;

  private constructor(dir: string, db: Database.Database, many: boolean) {
    this.#dir = dir;
    this.#db = db;
    this.#many = many;
    if (many) {
      db.exec('CREATE TABLE lookup (code TEXT NOT NULL, seq INTEGER NOT NULL, value TEXT NOT NULL, PRIMARY KEY (code, seq)) WITHOUT ROWID');
      this.#insert = db.prepare('INSERT INTO lookup VALUES (?, ?, ?)');
    } else {
      db.exec('CREATE TABLE lookup (code TEXT PRIMARY KEY, value TEXT NOT NULL, origin TEXT NOT NULL) WITHOUT ROWID');
      this.#insert = db.prepare('INSERT INTO lookup VALUES (?, ?, ?) ON CONFLICT (code) DO NOTHING');
      this.#existing = db.prepare('SELECT value, origin FROM lookup WHERE code = ?');
    }
    OPEN.add(this);
    if (!exitHooked) {
      exitHooked = true;
      process.once('exit', closeAllAtExit);
    }
  }

  /** A new, empty table in a private folder under `parent` (default: the system temp dir). */
  static create(opts: { many: boolean; parent?: string }): DiskLookup {
    const parent = opts.parent ?? tmpdir();
    const { dir, db } = openScratchDatabase(parent, `care-etl-lookup-${process.pid}-`, 'lookup.db');
    try {
      return new DiskLookup(dir, db, opts.many);
    } catch (err) {
      db.close();
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
  }

  /** The folder holding the database while it is being built (undefined once unlinked). */
  get dir(): string | undefined {
    return this.#dir;
  }

  /**
   * Adds one value (`json`: its JSON text) read at `origin` (e.g. `line 12`). With one value per code, a code
   * already present with a different value returns the origin of the first one (nothing is added); the same
   * value again is ignored.
   */
  add(code: string, json: string, origin: string): { duplicateOf?: string } {
    if (this.#inTx === 0) this.#db.exec('BEGIN');
    try {
      if (this.#many) {
        this.#insert.run(code, this.#seq++, json); // distinct codes are counted once, at `finish`
        return {};
      }
      if (this.#insert.run(code, json, origin).changes === 1) {
        this.#size++;
        return {};
      }
      const first = this.#existing!.get(code) as { value: string; origin: string };
      return first.value === json ? {} : { duplicateOf: first.origin };
    } finally {
      if (++this.#inTx >= BATCH) this.#commit();
    }
  }

  /** Ends the build: commits, prepares the readers and unlinks the files (POSIX). */
  finish(): void {
    this.#commit();
    if (this.#many) this.#size = this.#db.prepare('SELECT COUNT(DISTINCT code) FROM lookup').pluck().get() as number;
    this.#get = this.#many
      ? this.#db.prepare('SELECT value FROM lookup WHERE code = ? ORDER BY seq').pluck()
      : this.#db.prepare('SELECT value FROM lookup WHERE code = ?').pluck();
    this.#has = this.#db.prepare('SELECT 1 FROM lookup WHERE code = ? LIMIT 1').pluck();
    this.#sample = this.#db.prepare('SELECT DISTINCT code FROM lookup ORDER BY code LIMIT ?').pluck();
    if (process.platform !== 'win32') this.#removeFiles();
  }

  get size(): number {
    return this.#size;
  }

  has(code: string): boolean {
    return this.#reader(this.#has).get(code) !== undefined;
  }

  get(code: string): unknown {
    const stmt = this.#reader(this.#get);
    if (this.#many) {
      const rows = stmt.all(code) as string[];
      return rows.length === 0 ? undefined : rows.map((v) => JSON.parse(v) as unknown);
    }
    const v = stmt.get(code) as string | undefined;
    return v === undefined ? undefined : (JSON.parse(v) as unknown);
  }

  sampleCodes(n: number): string[] {
    return this.#reader(this.#sample).all(n) as string[];
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    OPEN.delete(this);
    if (this.#db.inTransaction) this.#db.exec('ROLLBACK');
    this.#db.close();
    this.#removeFiles();
  }

  #reader(stmt: Database.Statement | undefined): Database.Statement {
    if (this.#closed) throw new Error('lookup table is closed');
    if (!stmt) throw new Error('lookup table is still being built');
    return stmt;
  }

  #commit(): void {
    if (this.#inTx > 0 && this.#db.inTransaction) this.#db.exec('COMMIT');
    this.#inTx = 0;
  }

  #removeFiles(): void {
    if (this.#dir === undefined) return;
    rmSync(this.#dir, { recursive: true, force: true });
    this.#dir = undefined;
  }
}
