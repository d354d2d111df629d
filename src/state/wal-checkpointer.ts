/**
 * The SQLite state's WAL checkpoints off the event loop (issue 28). SQLite's automatic checkpoint runs inside the
 * commit that crosses its threshold, on the main thread: ~55 ms with the run's requests waiting. Here a worker thread
 * with its own connection copies the WAL back (`wal_checkpoint(PASSIVE)`: never waits for, nor blocks, the writer)
 * once the WAL file reaches `stepBytes` and each time it grows again; the ledger's connection then tops it up (the few frames committed
 * meanwhile: a few ms) so that its next write starts the WAL again from its beginning — without that the WAL of a busy
 * run never restarts and grows without bound. What is durable when does not change: commits still go to the WAL
 * only, and the worker's checkpoints sync as the ledger's (`synchronous`). Started once the WAL passes `startBytes`
 * (a short command never pays for a thread); any failure of the worker gives SQLite's automatic checkpoint back.
 * Design notes: docs/design/ledger.md (Durability).
 */
import { statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';

export interface WalCheckpointOptions {
  /** The worker starts once the WAL file holds this many bytes (default 4 MiB). */
  startBytes?: number;
  /** A checkpoint once the WAL file holds this many bytes, then each time it grows again (default 16 MiB). */
  stepBytes?: number;
  /** How often the worker looks at the WAL file's size (default 50 ms). */
  intervalMs?: number;
  /** @internal The module the worker loads SQLite from (tests: one that cannot load). */
  sqliteModule?: string;
}

// The control block shared with the worker: slots, and the worker's states.
const STOP = 0;
const STATE = 1;
const TOP_UP = 2;
const CHECKPOINTS = 3;
const STARTING = 0;
const RUNNING = 1;
const FAILED = 2;
const CLOSED = 3;
const STOP_WAIT_MS = 1000;
const START_CHECK_EVERY = 128; // writes between two looks at the WAL's size before the worker runs

// Plain CommonJS run by the worker (`eval`: the same code under vitest and from dist/). It blocks on Atomics.wait
// between looks (its own thread). When to copy back is read from the WAL file's size (a stat: it opens nothing —
// closing any descriptor of a file drops every POSIX lock this process holds on it, SQLite's included, so the -shm
// file is never opened here). After a restart SQLite writes the WAL again from its start and the file keeps its size:
// it grows again only once as many bytes were written since — the next checkpoint's turn.
const WORKER_SOURCE = String.raw`
const { workerData } = require('node:worker_threads');
const fs = require('node:fs');
const ctl = new Int32Array(workerData.control);
const setState = (s) => { Atomics.store(ctl, ${STATE}, s); Atomics.notify(ctl, ${STATE}); };
const walSize = () => { try { return fs.statSync(workerData.path + '-wal').size; } catch { return 0; } };
let db;
try {
  const Database = require(workerData.sqliteModule);
  db = new Database(workerData.path, { fileMustExist: true });
  db.pragma('busy_timeout = 0');
  db.pragma('synchronous = ' + workerData.synchronous);
  db.pragma('wal_autocheckpoint = 0');
  let last = 0; // the WAL's size after the last checkpoint
  setState(${RUNNING});
  while (Atomics.load(ctl, ${STOP}) === 0) {
    Atomics.wait(ctl, ${STOP}, 0, workerData.intervalMs);
    if (Atomics.load(ctl, ${STOP}) !== 0) break;
    // the ledger has not topped the last checkpoint up yet: another one now would hold the checkpoint lock its top-up needs
    if (Atomics.load(ctl, ${TOP_UP}) !== 0) continue;
    const size = walSize();
    if (size < last) last = 0; // truncated or removed: counted from its start again
    if (size < workerData.stepBytes || size <= last) continue;
    db.pragma('wal_checkpoint(PASSIVE)');
    db.pragma('wal_checkpoint(PASSIVE)'); // the frames committed meanwhile: fewer left to the ledger's top-up
    last = walSize();
    Atomics.add(ctl, ${CHECKPOINTS}, 1);
    Atomics.store(ctl, ${TOP_UP}, 1);
  }
  db.close();
  setState(${CLOSED});
} catch {
  try { if (db) db.close(); } catch {}
  setState(${FAILED});
}
`;

export class WalCheckpointer {
  private readonly control = new Int32Array(new SharedArrayBuffer(16));
  private readonly opts: Required<Omit<WalCheckpointOptions, 'sqliteModule'>> & { sqliteModule?: string };
  private worker: Worker | undefined;
  private writes = 0;
  /** off: fallen back to SQLite's automatic checkpoint, or closed. */
  private phase: 'waiting' | 'started' | 'running' | 'off' = 'waiting';

  constructor(
    private readonly db: Database.Database,
    private readonly path: string,
    private readonly synchronous: 'NORMAL' | 'FULL',
    /** The automatic checkpoint the connection keeps until the worker runs, and gets back if it fails. */
    private readonly autoCheckpointPages: number,
    opts: WalCheckpointOptions = {},
  ) {
    this.opts = {
      startBytes: opts.startBytes ?? 4 * 2 ** 20,
      stepBytes: opts.stepBytes ?? 16 * 2 ** 20,
      intervalMs: opts.intervalMs ?? 50,
      sqliteModule: opts.sqliteModule,
    };
  }

  /** Called after each write outside a transaction (a commit): starts the worker, follows its state, tops up. */
  afterCommit(): void {
    if (this.phase === 'waiting') {
      if (++this.writes % START_CHECK_EVERY === 0 && walBytes(this.path) >= this.opts.startBytes) this.start();
      return;
    }
    if (this.phase === 'off') return;
    const state = Atomics.load(this.control, STATE);
    if (state === FAILED) return this.fallBack();
    if (state !== RUNNING) return;
    if (this.phase === 'started') {
      this.db.pragma('wal_autocheckpoint = 0');
      this.phase = 'running';
    }
    if (Atomics.load(this.control, TOP_UP) === 1) {
      this.topUp();
      Atomics.store(this.control, TOP_UP, 0); // after it: the worker's next checkpoint would hold the lock it needs
    }
  }

  /** Checkpoints the worker has made (tests, benches). */
  get checkpoints(): number {
    return Atomics.load(this.control, CHECKPOINTS);
  }

  /** waiting: for the WAL to reach startBytes; started: the worker is starting; running: it checkpoints; off: closed or fallen back. */
  get state(): 'waiting' | 'started' | 'running' | 'off' {
    return this.phase;
  }

  /** The worker has closed its connection and ended (after close). */
  get workerClosed(): boolean {
    return Atomics.load(this.control, STATE) === CLOSED;
  }

  /** Stops the worker and waits (≤ 1 s) until its connection is closed: the ledger's close then removes the WAL. */
  close(): void {
    const worker = this.worker;
    this.phase = 'off';
    if (!worker) return;
    this.worker = undefined;
    Atomics.store(this.control, STOP, 1);
    Atomics.notify(this.control, STOP);
    const deadline = Date.now() + STOP_WAIT_MS;
    for (let s = Atomics.load(this.control, STATE); s === STARTING || s === RUNNING; s = Atomics.load(this.control, STATE)) {
      const left = deadline - Date.now();
      if (left <= 0 || Atomics.wait(this.control, STATE, s, left) === 'timed-out') break;
    }
    void worker.terminate();
  }

  private start(): void {
    try {
      const worker = new Worker(WORKER_SOURCE, {
        eval: true,
        workerData: {
          control: this.control.buffer,
          path: this.path,
          synchronous: this.synchronous,
          stepBytes: this.opts.stepBytes,
          intervalMs: this.opts.intervalMs,
          sqliteModule: this.opts.sqliteModule ?? createRequire(import.meta.url).resolve('better-sqlite3'),
        },
      });
      // A worker that dies (out of memory, terminated) counts as failed: the connection checkpoints again itself.
      const failed = () => {
        Atomics.compareExchange(this.control, STATE, STARTING, FAILED);
        Atomics.compareExchange(this.control, STATE, RUNNING, FAILED);
      };
      worker.on('error', failed).on('exit', failed).unref();
      this.worker = worker;
      this.phase = 'started';
    } catch {
      this.fallBack();
    }
  }

  private fallBack(): void {
    this.close();
    this.db.pragma(`wal_autocheckpoint = ${this.autoCheckpointPages}`);
  }

  /** The frames committed while the worker copied: the WAL is then all copied back, and the next write restarts it. */
  private topUp(): void {
    try {
      this.db.pragma('wal_checkpoint(PASSIVE)');
    } catch {
      // housekeeping only: what failed here (a full disk) fails the next write, with its own error
    }
  }
}

function walBytes(path: string): number {
  try {
    return statSync(`${path}-wal`).size;
  } catch {
    return 0;
  }
}
