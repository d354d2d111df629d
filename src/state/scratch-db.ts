import { closeSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { ensureDir, openPrivateFile } from '../core/secure-fs.js';

/**
 * A throw-away SQLite database (wide-layout spool, on-disk lookup index) in a fresh private folder under `parent`:
 * folder 0700, file 0600 before SQLite opens it, one connection (exclusive lock), no journal or sync on disk —
 * scratch data rebuilt on every run. The caller owns `dir` and removes it; on failure here it is removed already.
 */
export function openScratchDatabase(parent: string, prefix: string, fileName: string): { dir: string; db: Database.Database } {
  ensureDir(parent);
  const dir = mkdtempSync(join(parent, prefix)); // mode 0700
  try {
    const file = join(dir, fileName);
    closeSync(openPrivateFile(file));
    const db = new Database(file);
    db.pragma('locking_mode = EXCLUSIVE');
    // better-sqlite3 runs SQLite in defensive mode, which refuses `journal_mode = OFF`; the in-memory journal
    // holds only the pages one transaction changes.
    db.pragma('journal_mode = MEMORY');
    db.pragma('synchronous = OFF');
    db.pragma('cache_size = -16384'); // 16 MB of page cache, whatever the data size
    return { dir, db };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}
