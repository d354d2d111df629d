import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import ts from 'typescript';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SqliteDriver, type SqliteDriverOptions } from '../../src/state/sql-driver.js';

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, '..', '..');
const sqliteModule = createRequire(import.meta.url).resolve('better-sqlite3');
const SMALL = { startBytes: 64 * 1024, stepBytes: 256 * 1024, intervalMs: 5 };

let dir: string;
const open: SqliteDriver[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'care-etl-wal-'));
});
afterEach(() => {
  for (const d of open.splice(0)) d.close();
  rmSync(dir, { recursive: true, force: true });
});

function openDriver(path: string, walCheckpoint: SqliteDriverOptions['walCheckpoint']): SqliteDriver {
  const d = SqliteDriver.open(path, { memory: false, exclusive: false, busyTimeoutMs: 5000, synchronous: 'NORMAL', walCheckpoint });
  open.push(d);
  d.exec('CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)');
  return d;
}

/** `count` commits of one ~2 KB row each, from key `from`. */
function commit(d: SqliteDriver, from: number, count: number): void {
  const insert = d.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  for (let k = from; k < from + count; k++) d.transaction(() => insert.run(k, `row ${k} `.repeat(200)));
}

/** Waits (event loop free) until `ready()`; the test's own timeout bounds it. */
async function until(ready: () => boolean): Promise<void> {
  while (!ready()) await new Promise((r) => setTimeout(r, 2));
}

const walSize = (path: string) => (existsSync(`${path}-wal`) ? statSync(`${path}-wal`).size : 0);

describe('WAL checkpoints in a worker thread', () => {
  it('keeps the WAL bounded over many commits: the worker copies it back, the ledger restarts it', async () => {
    const path = join(dir, 'state.db');
    const d = openDriver(path, SMALL);
    let maxWal = 0;
    let k = 0;
    for (let round = 0; round < 16; round++) {
      const before = d.checkpointer!.checkpoints;
      const size = walSize(path); // the worker's mark: it checkpoints once the file grows past it
      commit(d, k, 150); // ~1 MiB of WAL: past stepBytes
      k += 150;
      // a restarted WAL is written again from its start: the file grows only past its size
      for (; walSize(path) <= size; k += 10) commit(d, k, 10);
      maxWal = Math.max(maxWal, walSize(path));
      await until(() => d.checkpointer!.checkpoints > before);
    }
    commit(d, k, 2); // tops up, then restarts the WAL
    expect(d.checkpointer!.state).toBe('running');
    expect(d.prepare('PRAGMA wal_autocheckpoint').get()).toEqual({ wal_autocheckpoint: 0 });
    // 16 rounds wrote ≥ 16 MiB of WAL: without restarts the file would hold all of it
    expect(maxWal).toBeLessThan(3 * 2 ** 20);
    expect(walSize(path)).toBeLessThan(3 * 2 ** 20);
    expect(d.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: k + 2 });
  }, 30_000);

  it('under a writer that never pauses, the ledger tops the worker’s checkpoints up so that the WAL still restarts', async () => {
    const path = join(dir, 'state.db');
    const d = openDriver(path, SMALL);
    await until(() => {
      commit(d, 0, 1);
      d.exec('DELETE FROM t');
      return d.checkpointer!.state === 'running';
    });
    // ~260 MiB of WAL in one synchronous stretch: 64,000 commits, each rewriting one small row (a page a commit, always
    // the same page). The worker's copies never catch up with the writer on their own (the file would hold all of
    // it: 260 MiB); topped up, the WAL restarts and its file grows only to what the writer adds while a checkpoint
    // runs (36 – 42 MiB on the lead's machine)
    d.exec("INSERT INTO t (k, v) VALUES (0, 'x')");
    const update = d.prepare('UPDATE t SET v = ? WHERE k = 0');
    let maxWal = 0;
    for (let n = 0; n < 64_000; n++) {
      d.transaction(() => update.run(`v${n}`));
      if (n % 100 === 0) maxWal = Math.max(maxWal, walSize(path));
    }
    expect(d.checkpointer!.checkpoints).toBeGreaterThan(0);
    expect(maxWal, 'the WAL file holds less than half of what was written').toBeLessThan(128 * 2 ** 20);
    expect(d.prepare('SELECT v FROM t WHERE k = 0').get()).toEqual({ v: 'v63999' });
  }, 30_000);

  it('falls back to SQLite’s automatic checkpoint when the worker cannot start, and the writes go on', async () => {
    const path = join(dir, 'state.db');
    const d = openDriver(path, { ...SMALL, sqliteModule: join(dir, 'no-such-sqlite.node') });
    let k = 0;
    await until(() => {
      commit(d, k, 20);
      k += 20;
      return d.checkpointer!.state === 'off';
    });
    expect(d.prepare('PRAGMA wal_autocheckpoint').get()).toEqual({ wal_autocheckpoint: 16384 });
    commit(d, k, 10);
    expect(d.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: k + 10 });
  }, 30_000);

  it('closes with the worker running: the process ends by itself, the WAL is removed, every row is there', async () => {
    // The real driver, transpiled to plain ESM for a child process.
    const out = join(dir, 'build');
    for (const rel of ['src/state/sql-driver.ts', 'src/state/wal-checkpointer.ts']) {
      const js = ts
        .transpileModule(readFileSync(join(repo, rel), 'utf8'), {
          compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
        })
        .outputText.replace(/from 'better-sqlite3'/g, `from '${pathToFileURL(sqliteModule).href}'`);
      mkdirSync(dirname(join(out, rel)), { recursive: true });
      writeFileSync(join(out, rel.replace(/\.ts$/, '.js')), js);
    }
    const path = join(dir, 'state.db');
    const moduleUrl = pathToFileURL(join(out, 'src/state/sql-driver.js')).href;
    const child = spawn(process.execPath, [join(here, 'fixtures', 'wal-writes-then-close.mjs'), moduleUrl, path, sqliteModule, '1000'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    // running while the rows were written; its connection closed and the thread ended within the ledger's close
    expect(JSON.parse(stdout)).toEqual({ state: 'running', workerClosed: true });
    // the ledger's close, the last one, checkpointed and removed the WAL
    expect(existsSync(`${path}-wal`)).toBe(false);
    const fresh = new Database(path, { readonly: true });
    try {
      expect(fresh.prepare('SELECT count(*) AS n, sum(k) AS s FROM t').get()).toEqual({ n: 1000, s: (999 * 1000) / 2 });
    } finally {
      fresh.close();
    }
  }, 30_000);
});
