/**
 * Deliberately unhelpful API servers on 127.0.0.1 for error-path tests.
 *
 * - `startEchoServer`: answers lists with an empty Bundle (or fails them too) and every write — or every
 *   request — with an error whose OperationOutcome echoes the whole request, headers (the API key) and body
 *   (patient data) included, as some gateways do.
 * - `startHostileServer`: one misbehaviour each (`HostileMode`): a body trickling a byte at a time, a body
 *   that never ends, `next` links that never end, create answers that cannot be believed.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface HostileServer {
  url: string;
  port: number;
  requests: number;
  close(): Promise<void>;
}

export async function startEchoServer(opts: {
  status: number;
  /** Fail reads too (every request fails). */
  failReads?: boolean;
  /** Answer this many GETs, then fail every request: a server that dies mid-run. */
  readsBeforeFailing?: number;
}): Promise<HostileServer> {
  let reads = 0;
  const state = { requests: 0 };
  const read = (req: IncomingMessage) =>
    new Promise<string>((resolve) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => resolve(body));
    });
  const server: Server = createServer(async (req, res) => {
    state.requests++;
    const body = await read(req);
    const failing = opts.failReads || (opts.readsBeforeFailing !== undefined && reads >= opts.readsBeforeFailing);
    if (req.method === 'GET' && !failing) {
      reads++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ resourceType: 'Bundle', type: 'searchset', entry: [] }));
      return;
    }
    res.writeHead(opts.status, { 'content-type': 'application/json', 'retry-after': '0' });
    const echo = `request was ${req.method} ${req.url} headers=${JSON.stringify(req.headers)} body=${body}`;
    res.end(JSON.stringify({ resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'invalid', diagnostics: echo }] }));
  });
  const { url, port, close } = await listenLoopback(server);
  return {
    url,
    port,
    get requests() {
      return state.requests;
    },
    close,
  };
}

/** Listens on 127.0.0.1 (ephemeral port); `close` drops open connections first (`onClose` runs before). */
async function listenLoopback(server: Server, onClose?: () => void): Promise<{ url: string; port: number; close: () => Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const close = () =>
    new Promise<void>((resolve) => {
      onClose?.();
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return { url: `http://127.0.0.1:${port}`, port, close };
}

/** A port nothing listens on (bound, then released). */
export async function deadPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/**
 * - `slow-body`: every answer is a 200 with headers at once, then one byte every `byteEveryMs` ms of a valid
 *   (empty) Bundle preceded by `padding` spaces — never idle long enough for an idle time-out.
 * - `endless-body`: every answer is a 200 whose body never ends (JSON whitespace, 64 KiB at a time), no
 *   content-length.
 * - `endless-next`: lists answer pages forever, each with a distinct `next` link (`?page=n+1`); `entries`:
 *   `empty` pages, the `same` resource on every page, or a `fresh` resource (new id) on every page.
 * - `create-answer`: a working store (creates stored under a safe id `h-<n>`, updates stored, lists of
 *   everything in one page), but every create is answered wrongly: `no-id`, `unsafe-id`
 *   (`../../x/1?a=b#c`), `object-id` (`{ "toString": 1 }`: no string can be made of it), `wrong-type` (an
 *   OperationOutcome carrying the id), or `same-id` (always `same-1`).
 *   `listed`: lists show the stored resources under their true ids (`stored`, default), nothing (`none`), or
 *   under unsafe ids (`unsafe`).
 */
export type HostileMode =
  | { kind: 'slow-body'; byteEveryMs: number; padding?: number }
  | { kind: 'endless-body' }
  | { kind: 'endless-next'; entries: 'empty' | 'same' | 'fresh' }
  | { kind: 'create-answer'; answer: 'no-id' | 'unsafe-id' | 'object-id' | 'wrong-type' | 'same-id'; listed?: 'stored' | 'none' | 'unsafe' };

export interface HostileModeServer extends HostileServer {
  /** POSTs received. */
  readonly creates: number;
  /** Pages of lists served (endless-next). */
  readonly pages: number;
  /** What a `create-answer` server stored, by type (true ids). */
  stored(type: string): Record<string, unknown>[];
}

export const UNSAFE_ID = '../../x/1?a=b#c';

export async function startHostileServer(mode: HostileMode): Promise<HostileModeServer> {
  const state = { requests: 0, creates: 0, pages: 0 };
  const store = new Map<string, Map<string, Record<string, unknown>>>();
  let seq = 0;
  const timers = new Set<NodeJS.Timeout>();
  const readBody = (req: IncomingMessage) =>
    new Promise<string>((resolve) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => resolve(body));
    });
  const json = (res: ServerResponse, status: number, value: unknown) => {
    const text = JSON.stringify(value);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };
  const server: Server = createServer(async (req, res) => {
    state.requests++;
    const body = await readBody(req);
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const [type, id] = url.pathname.split('/').filter(Boolean);
    if (req.method === 'POST') state.creates++;

    if (mode.kind === 'slow-body') {
      const text = `${' '.repeat(mode.padding ?? 10_000)}${JSON.stringify({ resourceType: 'Bundle', type: 'searchset', entry: [] })}`;
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      let i = 0;
      const t = setInterval(() => {
        if (res.destroyed || i >= text.length) {
          clearInterval(t);
          timers.delete(t);
          if (!res.destroyed) res.end();
          return;
        }
        res.write(text[i++]);
      }, mode.byteEveryMs);
      timers.add(t);
      res.on('close', () => {
        clearInterval(t);
        timers.delete(t);
      });
      return;
    }

    if (mode.kind === 'endless-body') {
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(64 * 1024, ' ');
      const pump = () => {
        while (!res.destroyed && res.write(chunk)) {
          /* until the socket pushes back */
        }
      };
      res.on('drain', pump);
      pump();
      return;
    }

    if (mode.kind === 'endless-next') {
      if (req.method !== 'GET' || id !== undefined)
        return json(res, 404, { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'not-found' }] });
      state.pages++;
      const page = Number(url.searchParams.get('page') ?? '1');
      const resource = (rid: string) => ({
        resourceType: type,
        id: rid,
        meta: { versionId: '1', lastUpdated: '2024-01-01T00:00:00Z' },
        identifier: [{ system: 'urn:hostile', value: rid }],
      });
      const entry = mode.entries === 'empty' ? [] : [{ fullUrl: `${type}/x`, resource: resource(mode.entries === 'same' ? 'same-1' : `r-${page}`) }];
      return json(res, 200, {
        resourceType: 'Bundle',
        type: 'searchset',
        meta: { lastUpdated: new Date().toISOString() },
        link: [{ relation: 'next', url: `http://${req.headers.host}/${type}?page=${page + 1}` }],
        entry,
      });
    }

    // create-answer: a working store whose create answers cannot be believed.
    const listed = mode.listed ?? 'stored';
    const of = (t: string) => {
      let m = store.get(t);
      if (!m) store.set(t, (m = new Map()));
      return m;
    };
    if (req.method === 'GET' && id === undefined) {
      const entry = listed === 'none' ? [] : [...of(type!).values()].map((r) => ({ resource: listed === 'unsafe' ? { ...r, id: `../${String(r.id)}` } : r }));
      return json(res, 200, { resourceType: 'Bundle', type: 'searchset', meta: { lastUpdated: new Date().toISOString() }, link: [], entry });
    }
    if (req.method === 'GET') {
      const r = of(type!).get(id!);
      return r ? json(res, 200, r) : json(res, 404, { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'not-found' }] });
    }
    const parsed = JSON.parse(body || '{}') as Record<string, unknown>;
    if (req.method === 'POST' && id === undefined) {
      const stored = { ...parsed, id: `h-${++seq}`, meta: { versionId: '1', lastUpdated: new Date().toISOString() } };
      of(type!).set(stored.id, stored);
      const answer: Record<string, unknown> = { ...stored };
      if (mode.answer === 'no-id') delete answer.id;
      else if (mode.answer === 'unsafe-id') answer.id = UNSAFE_ID;
      else if (mode.answer === 'object-id') answer.id = { toString: 1 };
      else if (mode.answer === 'wrong-type') answer.resourceType = 'OperationOutcome';
      else answer.id = 'same-1';
      return json(res, 200, answer);
    }
    // An update (PUT/PATCH/POST to Type/id), answered properly.
    const current = of(type!).get(id!);
    if (!current) return json(res, 404, { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'not-found' }] });
    const version = String(Number((current.meta as { versionId?: string } | undefined)?.versionId ?? '1') + 1);
    const updated = { ...parsed, id, resourceType: type, meta: { versionId: version, lastUpdated: new Date().toISOString() } };
    of(type!).set(id!, updated);
    return json(res, 200, updated);
  });
  const { url, port, close } = await listenLoopback(server, () => {
    for (const t of timers) clearInterval(t);
  });
  return {
    url,
    port,
    get requests() {
      return state.requests;
    },
    get creates() {
      return state.creates;
    },
    get pages() {
      return state.pages;
    },
    stored: (type) => [...(store.get(type)?.values() ?? [])],
    close,
  };
}
