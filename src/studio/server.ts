/**
 * The studio's local HTTP server (node:http): the page's static files and the JSON API of docs/studio.md. Bound to
 * loopback unless asked otherwise; every `/api/*` request carries the per-process token (`Authorization: Bearer`),
 * every request a Host naming this server (a DNS-rebinding page cannot use it); answers are never cached and the
 * page runs under a strict Content-Security-Policy. One API request is handled at a time (an edit's evaluation,
 * a save, an added case never interleave). Nothing here opens a connection anywhere.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createStudioSession, type StudioOptions, type StudioSession } from './session.js';
import { saveIfUnchanged } from './save-file.js';
import { DEFAULT_STATIC_DIR, staticFile } from './static-files.js';
import { addTestCase, testFileFor } from './test-case.js';
import type { EvaluateRequest } from './types.js';

export const MAX_BODY_BYTES = 5 * 1024 * 1024;

const CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join('; ');

export interface StartStudioOptions extends StudioOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0: any free port. */
  port?: number;
  /** Where index.html and assets/ are (default: dist/studio of this package). */
  staticDir?: string;
}

export interface StudioServer {
  /** `http://<host>:<port>/?token=<token>`: the page's address. */
  url: string;
  /** `http://<host>:<port>` */
  origin: string;
  port: number;
  token: string;
  session: StudioSession;
  close(): Promise<void>;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

const hostPart = (host: string) => (host.includes(':') ? `[${host}]` : host);

/** What the request handlers share: the session, the page's folder, the token, the hosts accepted, the API queue. */
interface ServerContext {
  session: StudioSession;
  staticDir: string;
  expected: Buffer;
  allowedHosts: Set<string>;
  serialized<T>(work: () => Promise<T>): Promise<T>;
}

export async function startStudio(opts: StartStudioOptions): Promise<StudioServer> {
  const host = opts.host ?? '127.0.0.1';
  const session = createStudioSession(opts);
  const token = randomBytes(32).toString('base64url');
  let queue: Promise<unknown> = Promise.resolve();
  const cx: ServerContext = {
    session,
    staticDir: opts.staticDir ?? DEFAULT_STATIC_DIR,
    expected: Buffer.from(`Bearer ${token}`),
    allowedHosts: new Set(),
    serialized(work) {
      const run = queue.then(work, work);
      queue = run.catch(() => undefined);
      return run;
    },
  };
  const server = createServer((req, res) => {
    handle(cx, req, res).catch((err: unknown) => {
      const e = err instanceof HttpError ? err : new HttpError(500, err instanceof Error ? err.message : String(err));
      if (!res.headersSent) sendJson(res, e.status, { error: e.message, ...e.extra });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  for (const h of [`127.0.0.1:${port}`, `localhost:${port}`, `${hostPart(host).toLowerCase()}:${port}`]) cx.allowedHosts.add(h);
  const origin = `http://${hostPart(host)}:${port}`;
  return {
    url: `${origin}/?token=${token}`,
    origin,
    port,
    token,
    session,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      session.close();
    },
  };
}

async function handle(cx: ServerContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('Content-Security-Policy', CSP);
  if (!cx.allowedHosts.has((req.headers.host ?? '').toLowerCase()))
    throw new HttpError(403, 'this server answers only requests addressed to it by its own host and port');
  // The path as sent: a URL parser would resolve `/assets/../x` (or `%2e%2e`) before the check could see it.
  const pathname = (req.url ?? '/').split('?')[0]!;
  if (pathname.startsWith('/api/')) {
    const auth = Buffer.from(req.headers.authorization ?? '');
    if (auth.length !== cx.expected.length || !timingSafeEqual(auth, cx.expected))
      throw new HttpError(401, 'missing or wrong token: open the URL the studio printed');
    const body = req.method === 'POST' ? await readJson(req) : undefined;
    const answer = await cx.serialized(() => api(cx.session, req.method ?? 'GET', pathname, body));
    sendJson(res, 200, answer);
    return;
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') throw new HttpError(405, 'only GET');
  const file = await staticFile(cx.staticDir, pathname);
  if (file.status !== 200) throw new HttpError(file.status, file.message);
  res.writeHead(200, { 'Content-Type': file.type, 'Content-Length': file.body.length });
  res.end(req.method === 'HEAD' ? undefined : file.body);
}

async function api(session: StudioSession, method: string, pathname: string, body: Record<string, unknown> | undefined): Promise<unknown> {
  switch (`${method} ${pathname}`) {
    case 'GET /api/mapping':
      return session.readMapping();
    case 'POST /api/evaluate':
      return session.evaluate({ ...(body as object), text: textOf(body) } as EvaluateRequest);
    case 'POST /api/save': {
      if (typeof body?.baseHash !== 'string') throw new HttpError(400, '`baseHash` (the sha256 of the text last read) is required');
      const out = await saveIfUnchanged(session.file, textOf(body), body.baseHash);
      if ('conflict' in out)
        throw new HttpError(409, 'the file changed on disk since it was read: reload it (or copy your text) before saving', { hash: out.hash });
      return out;
    }
    case 'POST /api/test-case':
      return addCase(session, body);
    default:
      if (['/api/mapping', '/api/evaluate', '/api/save', '/api/test-case'].includes(pathname))
        throw new HttpError(405, `${method} is not allowed on ${pathname}`);
      throw new HttpError(404, `no such API: ${pathname}`);
  }
}

async function addCase(session: StudioSession, body: Record<string, unknown> | undefined): Promise<{ file: string; name: string }> {
  const text = textOf(body);
  if (typeof body?.resource !== 'string' || typeof body.index !== 'number')
    throw new HttpError(400, '`resource` (a mapping name) and `index` (a row index) are required');
  const at = await session.rowOf(text, body.resource, body.index);
  if ('problem' in at) throw new HttpError(422, at.problem);
  const file = await testFileFor(session.file);
  const out = await addTestCase(file, session.file, at, text, session.now);
  if ('problem' in out) throw new HttpError(422, out.problem);
  return { file: session.shown(file), name: out.name };
}

function textOf(body: Record<string, unknown> | undefined): string {
  if (typeof body?.text !== 'string') throw new HttpError(400, '`text` (the mapping text) is required');
  return body.text;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const data = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': data.length });
  res.end(data);
}

/** A JSON object body of at most MAX_BODY_BYTES. */
async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > MAX_BODY_BYTES) throw new HttpError(413, `the body is larger than ${MAX_BODY_BYTES} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new HttpError(413, `the body is larger than ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new HttpError(400, 'the body is not JSON');
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new HttpError(400, 'the body must be a JSON object');
  return body as Record<string, unknown>;
}
