/**
 * A deliberately unhelpful API server on 127.0.0.1 for error-path tests: it answers lists with an empty Bundle
 * (or fails them too) and every write — or every request — with an error whose OperationOutcome echoes the
 * whole request, headers (the API key) and body (patient data) included, as some gateways do.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
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
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    get requests() {
      return state.requests;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A port nothing listens on (bound, then released). */
export async function deadPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}
