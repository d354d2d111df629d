/**
 * The sandbox's request pipeline: authentication → capacity slot → injected faults → route to a handler.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { RESOURCE_TYPES, WRITABLE_TYPES } from '../schemas/resource-types.js';
import type { SandboxContext } from './context.js';
import type { Faults } from './faults.js';
import { create, list, read, update } from './handlers.js';
import { oo, show } from './http.js';

const WRITABLE = new Set<string>(WRITABLE_TYPES);
const TYPES = new Set<string>(RESOURCE_TYPES);

export const sha256 = (s: string): Buffer => createHash('sha256').update(s).digest();

/** The tenant, or undefined after answering 401/403. The key is compared in constant time and never echoed. */
function authenticate(ctx: SandboxContext, req: IncomingMessage, res: ServerResponse): string | undefined {
  const key = req.headers['service-subscriptionkey'];
  const emr = req.headers['service-emrid'];
  const tenant = req.headers['service-tenantid'];
  const missing = (
    [
      ['Service-SubscriptionKey', key],
      ['Service-EmrId', emr],
      ['Service-TenantId', tenant],
    ] as const
  )
    .filter(([, v]) => typeof v !== 'string' || v === '')
    .map(([n]) => n);
  if (missing.length) {
    ctx.replies.fail(
      res,
      401,
      missing.map((n) => oo('login', `missing required header ${n}`)),
    );
    return undefined;
  }
  if (!timingSafeEqual(sha256(key as string), ctx.keyDigest) || emr !== ctx.emrId) {
    ctx.replies.fail(res, 401, [oo('security', 'invalid credentials: Service-SubscriptionKey or Service-EmrId is not valid')]);
    return undefined;
  }
  if (!ctx.tenants.has(tenant as string)) {
    ctx.replies.fail(res, 403, [oo('forbidden', `tenant ${show(tenant)} is not accessible with these credentials`)]);
    return undefined;
  }
  return tenant as string;
}

/**
 * One request, start to end. An authenticated request holds a capacity slot (waiting for one first, unless its client
 * goes away meanwhile) until answered.
 */
export async function handle(ctx: SandboxContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  ctx.stats.requests++;
  const tenant = authenticate(ctx, req, res);
  if (tenant === undefined) return;
  const turn = ctx.capacity.acquire();
  if (turn) {
    // A client that goes away while waiting gives its place up: it is never served, and holds no slot.
    res.once('close', turn.leave);
    const admitted = await turn.admitted;
    res.off('close', turn.leave);
    if (!admitted) return;
  }
  try {
    if (ctx.closed) return void req.socket.destroy();
    if (ctx.faults && (await injectFaults(ctx, ctx.faults, req, res, tenant))) return;
    await route(ctx, req, res, tenant);
  } finally {
    ctx.capacity.release();
  }
}

/** Latency, rate limit, 503, dropped connection — in this order. True when the request was answered (or cut). */
async function injectFaults(ctx: SandboxContext, f: Faults, req: IncomingMessage, res: ServerResponse, tenant: string): Promise<boolean> {
  const d = f.delayMs();
  if (d > 0) {
    await sleep(d);
    if (ctx.closed) {
      req.socket.destroy();
      return true;
    }
  }
  const wait = f.throttle(tenant);
  if (wait) {
    ctx.replies.fail(res, 429, [oo('throttled', `rate limit of ${f.opts.rateLimitPerSecond} requests/s for this tenant exceeded`)], {
      'Retry-After': String(wait),
    });
    return true;
  }
  if (f.hit(f.opts.error503Rate)) {
    ctx.replies.fail(res, 503, [oo('transient', 'service temporarily unavailable (injected fault)')], { 'Retry-After': '1' });
    return true;
  }
  if (f.hit(f.opts.dropRate)) {
    ctx.stats.dropped++;
    req.socket.destroy();
    return true;
  }
  return false;
}

function route(ctx: SandboxContext, req: IncomingMessage, res: ServerResponse, tenant: string): Promise<void> | void {
  const raw = req.url ?? '/';
  const qi = raw.indexOf('?');
  let path = qi < 0 ? raw : raw.slice(0, qi);
  if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
  const parts = path.split('/');
  const type = parts[1] ?? '';
  const method = req.method === 'HEAD' ? 'GET' : req.method;
  if (!TYPES.has(type) || parts.length > 3) return ctx.replies.fail(res, 404, [oo('not-found', `unknown path: resources are ${RESOURCE_TYPES.join(', ')}`)]);
  const writable = WRITABLE.has(type);
  if (parts.length === 2) {
    if (method === 'GET') return list(ctx, req, res, tenant, type, qi < 0 ? '' : raw.slice(qi + 1));
    if (method === 'POST' && writable) return create(ctx, req, res, tenant, type);
    return notAllowed(ctx, res, type, writable ? 'GET, POST' : 'GET');
  }
  const id = parts[2]!;
  if (method === 'GET') return read(ctx, res, tenant, type, id);
  if ((method === 'PUT' || method === 'PATCH') && writable) return update(ctx, req, res, tenant, type, id);
  return notAllowed(ctx, res, type, writable ? 'GET, PUT, PATCH' : 'GET');
}

function notAllowed(ctx: SandboxContext, res: ServerResponse, type: string, allow: string): void {
  const why = WRITABLE.has(type) ? '' : `: ${type} is read-only`;
  ctx.replies.fail(res, 405, [oo('not-supported', `method not allowed${why} (allowed: ${allow})`)], { Allow: allow });
}
