/**
 * A synchronous call into an asynchronous `pg` Client: a worker thread owns the one connection; the main thread
 * posts a request, blocks on `Atomics.wait` and takes the answer with `receiveMessageOnPort` (the technique of
 * synckit). The ledger's API is synchronous (better-sqlite3), so its PostgreSQL driver is too. One request may
 * carry several statements (one round trip). Each call is bounded: no answer in time is a clear error and the
 * bridge is closed. The worker is unref'd: an open connection never keeps the process alive.
 */
import { createRequire } from 'node:module';
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';

export interface BridgeQuery {
  text: string;
  values?: unknown[];
  /** A prepared statement's name (prepared once per connection by pg). */
  name?: string;
}

export interface BridgeResult {
  rows: Record<string, unknown>[];
  rowCount: number;
}

/** A statement or the connection failed; `code` is PostgreSQL's SQLSTATE or a Node error code. */
export class BridgeError extends Error {
  override name = 'PostgresError';
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message);
  }
}

// Plain CommonJS run by the worker (`eval`; String.raw: backslashes as written): the same code under vitest and from dist/.
const WORKER_SOURCE = String.raw`
const { workerData } = require('node:worker_threads');
const { port, signal } = workerData;
const flag = new Int32Array(signal);
let pg, loadError;
try {
  pg = require(workerData.pgPath);
  pg.types.setTypeParser(20, (v) => Number(v));
} catch (err) {
  loadError = err;
}
let client;
let lost;
function answer(msg) { port.postMessage(msg); Atomics.store(flag, 0, 1); Atomics.notify(flag, 0); }
async function handle(req) {
  if (loadError) throw loadError;
  if (req.connect) {
    client = new pg.Client(req.connect);
    client.on('error', (err) => { lost = err; });
    await client.connect();
  }
  if (req.close) { if (client) await client.end().catch(() => {}); return []; }
  if (lost) throw lost;
  const results = [];
  for (const q of req.queries) { const r = await client.query(q); results.push({ rows: r.rows, rowCount: r.rowCount || 0 }); }
  if (req.many) await runMany(req.many.text, req.many.lists);
  return results;
}
// One statement for many parameter lists: as literals, 500 statements to a simple query (one round trip each).
function literal(v) {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  return client.escapeLiteral(String(v));
}
async function runMany(text, lists) {
  for (let i = 0; i < lists.length; i += 500) {
    const sql = lists.slice(i, i + 500).map((values) => text.replace(/\$(\d+)/g, (_, n) => literal(values[Number(n) - 1]))).join(';\n');
    await client.query(sql);
  }
}
port.on('message', (req) => {
  handle(req).then(
    (results) => { answer({ ok: true, results }); if (req.close) port.close(); },
    (err) => answer({ ok: false, message: String((err && err.message) || err), code: err && err.code }),
  );
});
`;

export class SyncBridge {
  private readonly worker: Worker;
  private readonly port: MessagePort;
  private readonly flag: Int32Array;
  private closed = false;

  constructor(private readonly timeoutMs: number) {
    const signal = new SharedArrayBuffer(4);
    this.flag = new Int32Array(signal);
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    const pgPath = createRequire(import.meta.url).resolve('pg');
    this.worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { pgPath, port: port2, signal }, transferList: [port2] });
    this.worker.unref();
    this.port.unref();
  }

  /** Connects, then runs `setup` (e.g. SET search_path) in the same round trip; bounded by 20 s (the worker starts too). */
  connect(config: object, setup: BridgeQuery[]): void {
    this.call({ connect: config, queries: setup }, 'connecting', Math.max(this.timeoutMs, 20_000));
  }

  /**
   * Runs the statements in order, then `many` (one statement, once per parameter list, results unread); the
   * first failure ends the call (later ones are not run).
   */
  query(queries: BridgeQuery[], what: string, many?: { text: string; lists: readonly unknown[][] }): BridgeResult[] {
    return this.call(many ? { queries, many } : { queries }, what);
  }

  close(): void {
    if (this.closed) return;
    try {
      this.call({ close: true, queries: [] }, 'closing', 5000);
    } catch {
      // the worker is terminated below either way
    }
    this.closed = true;
    void this.worker.terminate();
  }

  private call(request: object, what: string, timeoutMs = this.timeoutMs): BridgeResult[] {
    if (this.closed) throw new BridgeError('the connection is closed');
    Atomics.store(this.flag, 0, 0);
    this.port.postMessage(request);
    if (Atomics.wait(this.flag, 0, 0, timeoutMs) === 'timed-out') {
      this.closed = true;
      void this.worker.terminate();
      const waited = timeoutMs >= 1000 ? `${Math.round(timeoutMs / 1000)} s` : `${timeoutMs} ms`;
      throw new BridgeError(`no answer from the database in ${waited} while ${what}; the connection is closed`, 'ETIMEDOUT');
    }
    const got = receiveMessageOnPort(this.port)?.message as { ok: boolean; results?: BridgeResult[]; message?: string; code?: string } | undefined;
    if (!got) throw new BridgeError(`the database worker gave no answer while ${what}`);
    if (!got.ok) throw new BridgeError(got.message ?? 'unknown error', got.code);
    return got.results ?? [];
  }
}
