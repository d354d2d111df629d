/**
 * A pass-through proxy on 127.0.0.1 that lets a test watch the requests a run sends, in the order they reach the
 * server, and act before one is forwarded (another writer's create, a fault armed in a test server): `onRequest`
 * is awaited first, then `delayMs` (a server farther away: a round trip worth measuring). Bodies are forwarded
 * unchanged; answers are piped back as they come — or, for a request `answer` gives one for, that answer instead
 * (a gateway's refusal of one request).
 */
import { Agent, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface WatchedRequest {
  method: string;
  /** Path and query, as sent. */
  path: string;
  body: string;
}

export interface WatchProxy {
  url: string;
  /** Every request received, in order. */
  readonly seen: WatchedRequest[];
  close(): Promise<void>;
}

export interface WatchProxyOptions {
  onRequest?: (r: WatchedRequest) => void | Promise<void>;
  delayMs?: number;
  answer?: (r: WatchedRequest) => { status: number; body: string } | undefined;
}

export async function startWatchProxy(target: string, opts: WatchProxyOptions = {}): Promise<WatchProxy> {
  const { onRequest, delayMs = 0 } = opts;
  const t = new URL(target);
  const agent = new Agent({ keepAlive: true });
  const seen: WatchedRequest[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const watched = { method: req.method ?? 'GET', path: req.url ?? '/', body: body.toString('utf8') };
      seen.push(watched);
      const acted = Promise.resolve(onRequest?.(watched));
      void (delayMs ? acted.then(() => new Promise((r) => setTimeout(r, delayMs))) : acted).then(() => {
        const own = opts.answer?.(watched);
        if (own) {
          res.writeHead(own.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(own.body) });
          return res.end(own.body);
        }
        const up = request({ host: t.hostname, port: t.port, method: req.method, path: req.url, headers: req.headers, agent }, (ur) => {
          res.writeHead(ur.statusCode!, ur.headers);
          ur.pipe(res);
        });
        up.on('error', () => res.destroy());
        up.end(body);
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
        agent.destroy();
      }),
  };
}
