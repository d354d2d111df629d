import { chmodSync, closeSync, existsSync, openSync } from 'node:fs';
import Database from 'better-sqlite3';
import type { Database as Db, Statement } from 'better-sqlite3';

export interface Row {
  seq: number;
  id: string;
  version: number;
  body: string;
}

/**
 * Resources as JSON text keyed by (tenant, type, id). `seq` is the insertion sequence: lists page on it,
 * so concurrent inserts land after every open cursor and paging never skips or repeats a resource.
 * Bodies are stored exactly as returned, so a GET answers the stored text without re-serialising.
 */
export class SandboxStore {
  private readonly db: Db;
  private readonly sInsert: Statement<[string, string, string, number, string, string]>;
  private readonly sGet: Statement<[string, string, string], Row>;
  private readonly sExists: Statement<[string, string, string], { x: number }>;
  private readonly sUpdate: Statement<[number, string, string, string, string, string]>;
  private readonly sPage: Statement<[string, string, number, number], Row>;
  private readonly sIds: Statement<[string, string], { id: string }>;
  private readonly sCount: Statement<[string, string], { n: number }>;
  private readonly sCounts: Statement<[], { tenant: string; type: string; n: number }>;
  private readonly tx: (fn: () => unknown) => unknown;

  constructor(file?: string) {
    // The sandbox holds (synthetic or real) patient data: owner-only file, whatever the umask.
    if (file && file !== ':memory:') closeSync(openSync(file, 'a', 0o600));
    this.db = new Database(file ?? ':memory:');
    this.db.pragma('journal_mode = WAL');
    // NORMAL + WAL: commits survive a process crash (not a power loss) without an fsync per write.
    this.db.pragma('synchronous = NORMAL');
    if (file && file !== ':memory:') for (const side of ['', '-wal', '-shm']) if (existsSync(file + side)) chmodSync(file + side, 0o600);
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS resources (
        seq INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL,
        type TEXT NOT NULL,
        id TEXT NOT NULL,
        version INTEGER NOT NULL,
        last_updated TEXT NOT NULL,
        body TEXT NOT NULL,
        UNIQUE (tenant, type, id)
      );
      CREATE INDEX IF NOT EXISTS resources_by_seq ON resources (tenant, type, seq);
    `);
    const db = this.db;
    this.sInsert = db.prepare('INSERT INTO resources (tenant, type, id, version, last_updated, body) VALUES (?, ?, ?, ?, ?, ?)');
    this.sGet = db.prepare('SELECT seq, id, version, body FROM resources WHERE tenant = ? AND type = ? AND id = ?');
    this.sExists = db.prepare('SELECT 1 AS x FROM resources WHERE tenant = ? AND type = ? AND id = ?');
    this.sUpdate = db.prepare('UPDATE resources SET version = ?, last_updated = ?, body = ? WHERE tenant = ? AND type = ? AND id = ?');
    this.sPage = db.prepare('SELECT seq, id, version, body FROM resources WHERE tenant = ? AND type = ? AND seq > ? ORDER BY seq LIMIT ?');
    this.sIds = db.prepare('SELECT id FROM resources WHERE tenant = ? AND type = ? ORDER BY seq');
    this.sCount = db.prepare('SELECT count(*) AS n FROM resources WHERE tenant = ? AND type = ?');
    this.sCounts = db.prepare('SELECT tenant, type, count(*) AS n FROM resources GROUP BY tenant, type');
    this.tx = db.transaction((fn: () => unknown) => fn());
  }

  insert(tenant: string, type: string, id: string, version: number, lastUpdated: string, body: string): void {
    this.sInsert.run(tenant, type, id, version, lastUpdated, body);
  }

  get(tenant: string, type: string, id: string): Row | undefined {
    return this.sGet.get(tenant, type, id);
  }

  exists(tenant: string, type: string, id: string): boolean {
    return this.sExists.get(tenant, type, id) !== undefined;
  }

  update(tenant: string, type: string, id: string, version: number, lastUpdated: string, body: string): void {
    this.sUpdate.run(version, lastUpdated, body, tenant, type, id);
  }

  remove(tenant: string, type: string, id: string): boolean {
    return this.db.prepare('DELETE FROM resources WHERE tenant = ? AND type = ? AND id = ?').run(tenant, type, id).changes > 0;
  }

  /** Up to `limit` rows with seq > afterSeq, in insertion order. */
  page(tenant: string, type: string, afterSeq: number, limit: number): Row[] {
    return this.sPage.all(tenant, type, afterSeq, limit);
  }

  ids(tenant: string, type: string): string[] {
    return this.sIds.all(tenant, type).map((r) => r.id);
  }

  count(tenant: string, type: string): number {
    return this.sCount.get(tenant, type)?.n ?? 0;
  }

  counts(): Record<string, Record<string, number>> {
    const out: Record<string, Record<string, number>> = {};
    for (const r of this.sCounts.all()) (out[r.tenant] ??= {})[r.type] = r.n;
    return out;
  }

  /** Runs fn in one SQLite transaction (one commit for a patient and its generated observations). */
  transaction<T>(fn: () => T): T {
    return this.tx(fn) as T;
  }

  close(): void {
    this.db.close();
  }
}
