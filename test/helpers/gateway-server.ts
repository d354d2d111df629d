/**
 * A working store on 127.0.0.1 behind a misbehaving API gateway (issue 24, item 4), for e2e tests of what care-etl
 * believes of an answer:
 * - `commitThen`: every `every`-th create is STORED, then answered `status` (500/502/503/504) with an HTML body (and
 *   `Retry-After: 1`), as a gateway does when the backend is slow — or 200 with no usable body (`body`: an HTML
 *   page, or nothing at all);
 * - `throttle`: once `afterCreates` creates succeeded, every request is answered 429 with this `Retry-After`;
 * - `seed` + `answerIdOnce`: resources stored before the run; the first create of `answerIdOnce.type` is stored
 *   under its own id but answered with `answerIdOnce.id` (another resource's id); `answerIdOnce(…)` arms it again
 *   between runs.
 * - `versionId`: every resource carries this `meta.versionId` (whatever it is).
 * Lists return everything stored in one page; updates (PUT Type/id) work.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface GatewayOptions {
  commitThen?: { status: 200 | 500 | 502 | 503 | 504; every: number; body?: 'html' | 'empty' };
  throttle?: { retryAfter: string; afterCreates: number };
  seed?: Record<string, unknown>[];
  answerIdOnce?: { type: string; id: string };
  /** Every resource stored (and answered, and listed) carries this `meta.versionId` — a number, an object, a NUL … */
  versionId?: unknown;
}

export interface GatewayServer {
  url: string;
  /** POSTs received (answered or not). */
  readonly creates: number;
  /** What the backend stored, by type. */
  stored(type: string): Record<string, unknown>[];
  /** The next create of `type` is answered with `id` (the option `answerIdOnce`, armed now). */
  answerIdOnce(type: string, id: string): void;
  close(): Promise<void>;
}

export async function startGatewayServer(opts: GatewayOptions): Promise<GatewayServer> {
  const store = new Map<string, Map<string, Record<string, unknown>>>();
  const of = (t: string) => {
    let m = store.get(t);
    if (!m) store.set(t, (m = new Map()));
    return m;
  };
  for (const r of opts.seed ?? []) of(String(r.resourceType)).set(String(r.id), r);
  let seq = 0;
  let creates = 0;
  let stored = 0;
  let answeredOtherId = false;
  const json = (res: ServerResponse, status: number, value: unknown) => {
    const text = JSON.stringify(value);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const [type, id] = new URL(req.url ?? '/', 'http://127.0.0.1').pathname.split('/').filter(Boolean);
      if (opts.throttle && stored >= opts.throttle.afterCreates) {
        res.writeHead(429, { 'content-type': 'text/plain', 'retry-after': opts.throttle.retryAfter });
        return res.end('Rate limit is exceeded.');
      }
      if (req.method === 'GET' && id === undefined) {
        const entry = [...of(type!).values()].map((resource) => ({ resource }));
        return json(res, 200, { resourceType: 'Bundle', type: 'searchset', link: [], entry });
      }
      if (req.method === 'GET') {
        const r = of(type!).get(id!);
        return r ? json(res, 200, r) : json(res, 404, { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'not-found' }] });
      }
      const parsed = JSON.parse(body || '{}') as Record<string, unknown>;
      if (req.method === 'POST' && id === undefined) {
        creates++;
        const r = { ...parsed, id: `g-${++seq}`, meta: { versionId: 'versionId' in opts ? opts.versionId : '1', lastUpdated: new Date().toISOString() } };
        of(type!).set(r.id, r);
        stored++;
        if (opts.commitThen && creates % opts.commitThen.every === 0) {
          const empty = opts.commitThen.body === 'empty';
          res.writeHead(opts.commitThen.status, { 'content-type': empty ? 'application/json' : 'text/html', 'retry-after': '1' });
          return res.end(empty ? '' : '<html><body><h1>Service Unavailable</h1><p>The backend did not answer in time.</p></body></html>');
        }
        if (opts.answerIdOnce?.type === type && !answeredOtherId) {
          answeredOtherId = true;
          return json(res, 201, { ...r, id: opts.answerIdOnce.id });
        }
        return json(res, 201, r);
      }
      const current = of(type!).get(id!);
      if (!current) return json(res, 404, { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'not-found' }] });
      const next = 'versionId' in opts ? opts.versionId : String(Number((current.meta as { versionId: string }).versionId) + 1);
      const updated = { ...parsed, id, resourceType: type, meta: { versionId: next } };
      of(type!).set(id!, updated);
      return json(res, 200, updated);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get creates() {
      return creates;
    },
    stored: (type) => [...(store.get(type)?.values() ?? [])],
    answerIdOnce(type, id) {
      opts.answerIdOnce = { type, id };
      answeredOtherId = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
