/**
 * A working store on 127.0.0.1 whose listings and error answers a test scripts (issue 25): creates are stored
 * under ids the test chooses (`idOf`, e.g. `pat_1`), ids arrive percent-encoded in paths and are decoded, updates
 * are stored; `listing` turns a type's stored resources (and the request's URL: its page) into the listing's body text (one page, or anything a
 * hostile server sends); `createAnswer` may answer a create with an error instead (nothing stored then).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Stored = Record<string, unknown> & { id: string; resourceType: string };

export interface ListingServerOptions {
  /** The id of the n-th resource created of a type (n from 1). */
  idOf?: (type: string, n: number) => string;
  /** The body of `GET /{type}` (default: one Bundle page of everything stored). */
  listing?: (type: string, stored: Stored[], url: URL) => string;
  /** An error answer to a create (`{ status, body }`), or undefined to store it. */
  createAnswer?: (
    type: string,
    body: Record<string, unknown>,
    headers: Record<string, string | string[] | undefined>,
  ) => { status: number; body: string } | undefined;
}

export interface ListingServer {
  url: string;
  /** POSTs to `/{type}` received. */
  readonly creates: number;
  /** Paths of the PUTs received, as sent (still percent-encoded). */
  readonly updates: string[];
  stored(type: string): Stored[];
  /** Changes what the server does from now on. */
  set(opts: ListingServerOptions): void;
  close(): Promise<void>;
}

export const bundleOf = (stored: Stored[], extra: Record<string, unknown> = {}): string =>
  JSON.stringify({
    resourceType: 'Bundle',
    type: 'searchset',
    link: [],
    ...extra,
    entry: stored.map((r) => ({ fullUrl: `${r.resourceType}/${r.id}`, resource: r })),
  });

export async function startListingServer(initial: ListingServerOptions = {}): Promise<ListingServer> {
  let opts = initial;
  const store = new Map<string, Map<string, Stored>>();
  const counters = new Map<string, number>();
  const state = { creates: 0, updates: [] as string[] };
  const of = (t: string) => {
    let m = store.get(t);
    if (!m) store.set(t, (m = new Map()));
    return m;
  };
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const send = (status: number, text: string) => {
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      };
      const notFound = () => send(404, JSON.stringify({ resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'not-found' }] }));
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      const [type, rawId, ...rest] = url.pathname.split('/').filter(Boolean);
      if (!type || rest.length > 0) return notFound();
      const id = rawId === undefined ? undefined : decodeURIComponent(rawId);
      if (req.method === 'GET' && id === undefined) return send(200, (opts.listing ?? ((_t, s) => bundleOf(s)))(type, [...of(type).values()], url));
      if (req.method === 'GET') {
        const r = of(type).get(id!);
        return r ? send(200, JSON.stringify(r)) : notFound();
      }
      const parsed = JSON.parse(body || '{}') as Record<string, unknown>;
      if (req.method === 'POST' && id === undefined) {
        state.creates++;
        const error = opts.createAnswer?.(type, parsed, req.headers);
        if (error) return send(error.status, error.body);
        const n = (counters.get(type) ?? 0) + 1;
        counters.set(type, n);
        const stored = { ...parsed, resourceType: type, id: (opts.idOf ?? ((t, k) => `${t.toLowerCase()}-${k}`))(type, n), meta: { versionId: '1' } };
        of(type).set(stored.id, stored);
        return send(201, JSON.stringify(stored));
      }
      if (req.method === 'PUT' && id !== undefined) {
        state.updates.push(url.pathname);
        const current = of(type).get(id);
        if (!current) return notFound();
        const version = String(Number((current.meta as { versionId: string }).versionId) + 1);
        const updated = { ...parsed, resourceType: type, id, meta: { versionId: version } };
        of(type).set(id, updated);
        return send(200, JSON.stringify(updated));
      }
      return notFound();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get creates() {
      return state.creates;
    },
    get updates() {
      return state.updates;
    },
    stored: (type) => [...of(type).values()],
    set(next) {
      opts = { ...opts, ...next };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
