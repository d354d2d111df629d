/**
 * The sandbox's operations on resources — create, update (PUT / PATCH), read, list — and the storage helpers the
 * test hooks share. Every handler answers through `ctx.replies`; see docs/sandbox.md for the behaviour.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isObj } from '../core/is-object.js';
import type { SandboxContext } from './context.js';
import { fromIssue, oo, show, type Json, type OOIssue } from './http.js';
import { makeObservation } from './observations.js';

export const MAX_PAGE_SIZE = 1000;

// Only a plausible host[:port] is echoed into link URLs (the Host header is client-controlled).
const HOST_RE = /^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/;
const REF_RE = /^([A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})$/;
const ID_RE = /^[A-Za-z0-9\-.]{1,64}$/;

// Ids cut from 4 KiB of random bytes at a time: randomBytes(8) per id cost 3 µs, this 0.1 µs (issue 28: the sandbox
// shares the bench machine with the loader it measures).
let idPool = Buffer.alloc(0);
let idAt = 0;
const newId = (): string => {
  if (idAt + 8 > idPool.length) [idPool, idAt] = [randomBytes(4096), 0];
  return idPool.toString('hex', idAt, (idAt += 8));
};

/** RFC 7386 JSON merge patch (bodies are depth-checked first: the recursion is bounded). */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObj(patch)) return patch;
  const out: Json = isObj(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** Optional top-level fields a list answer carries as `null` when the resource has none (`listNulls: 'all'`). */
const LIST_NULLS: Record<string, readonly string[]> = {
  Patient: ['active', 'telecom', 'address', 'extension', 'managingOrganization'],
  Practitioner: ['active', 'telecom', 'qualification', 'extension'],
  CareTeam: ['name', 'period'],
};

/** A stored body as a list answer shows it: absent fields null, participant role codings of a fixed shape. */
function withNulls(type: string, body: string, fields: readonly string[]): string {
  const r = JSON.parse(body) as Json;
  for (const f of fields) if (!(f in r)) r[f] = null;
  if (type === 'CareTeam' && Array.isArray(r.participant)) {
    for (const p of r.participant) {
      if (!isObj(p) || !Array.isArray(p.role)) continue;
      for (const role of p.role) {
        if (!isObj(role) || !Array.isArray(role.coding)) continue;
        role.coding = role.coding.map((c) => (isObj(c) ? { system: c.system ?? null, code: c.code ?? null, display: c.display ?? null } : c));
      }
    }
  }
  return JSON.stringify(r);
}

// ---------- storage helpers ----------

function serialise(ctx: SandboxContext, type: string, id: string, version: number, now: string, body: Json): string {
  const { resourceType: _t, id: _i, meta: _m, ...rest } = body;
  return JSON.stringify({ resourceType: type, id, meta: { versionId: String(version), lastUpdated: now, source: ctx.source }, ...rest });
}

/** Stores an Observation as given (id and meta assigned when missing). */
export function insertObservation(ctx: SandboxContext, tenant: string, obs: Json, now: string): void {
  const id = typeof obs.id === 'string' ? obs.id : newId();
  const meta = isObj(obs.meta) ? obs.meta : { versionId: '1', lastUpdated: now, source: ctx.source };
  const { resourceType: _t, id: _i, meta: _m, ...rest } = obs;
  const body = JSON.stringify({ resourceType: 'Observation', id, meta, ...rest });
  ctx.store.insert(tenant, 'Observation', id, Number(meta.versionId) || 1, String(meta.lastUpdated ?? now), body);
}

/** `n` generated Observations of one patient; `key` seeds their values. */
export function generateObservations(ctx: SandboxContext, tenant: string, key: string, patientId: string, n: number, now: string): void {
  for (let k = 0; k < n; k++) insertObservation(ctx, tenant, makeObservation(ctx.seed, key, k, patientId, ctx.observationCode), now);
}

/** Schema issues plus, for CareTeam, references that do not resolve inside the tenant. */
function check(ctx: SandboxContext, tenant: string, type: string, body: Json, skip: Set<string>): OOIssue[] {
  const issues = ctx.validators.get(type)!(body)
    .filter((i) => !skip.has(i.path ?? ''))
    .map(fromIssue);
  if (type === 'CareTeam') {
    const ref = (r: unknown, want: string, path: string): void => {
      const m = isObj(r) && typeof r.reference === 'string' ? REF_RE.exec(r.reference) : null;
      if (m && m[1] === want && !ctx.store.exists(tenant, want, m[2]!)) issues.push(oo('not-found', `${want}/${m[2]} does not exist in this tenant`, path));
    };
    ref(body.subject, 'Patient', '/subject/reference');
    if (Array.isArray(body.participant)) body.participant.forEach((p, i) => isObj(p) && ref(p.member, 'Practitioner', `/participant/${i}/member/reference`));
  }
  return issues;
}

const typeMismatch = (type: string, got: unknown): OOIssue =>
  oo('invalid', `resourceType must be "${type}" on the ${type} endpoint, got ${show(got)}`, '/resourceType');

const GATEWAY_TITLES = { 502: '502 Bad Gateway', 503: '503 Service Unavailable', 504: '504 Gateway Time-out' } as const;

/** A gateway's answer after the backend committed: an HTML page (nginx / Azure API Management style), not JSON. */
function gatewayError(ctx: SandboxContext, res: ServerResponse, status: 502 | 503 | 504): void {
  ctx.stats.gatewayErrors++;
  const title = GATEWAY_TITLES[status];
  const html = `<html>\r\n<head><title>${title}</title></head>\r\n<body>\r\n<center><h1>${title}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n`;
  ctx.replies.send(res, status, html, { 'Content-Type': 'text/html', ...(status === 503 ? { 'Retry-After': '1' } : {}) });
}

// ---------- operations ----------

export async function create(ctx: SandboxContext, req: IncomingMessage, res: ServerResponse, tenant: string, type: string): Promise<void> {
  const { replies, store } = ctx;
  const buf = await replies.readBody(req, res);
  if (!buf) return;
  const body = replies.parseObject(res, buf);
  if (!body) return;
  if (body.resourceType !== type) return replies.fail(res, 400, [typeMismatch(type, body.resourceType)]);
  const issues: OOIssue[] = [];
  if (body.id !== undefined) issues.push(oo('invalid', 'id must not be sent on create: the server assigns it', '/id'));
  issues.push(...check(ctx, tenant, type, body, new Set(body.id !== undefined ? ['/id'] : [])));
  if (issues.length) return replies.fail(res, 400, issues);

  const id = newId();
  const now = new Date().toISOString();
  const json = serialise(ctx, type, id, 1, now, body);
  store.transaction(() => {
    const ord = type === 'Patient' ? (ctx.patientOrdinal.get(tenant) ?? store.count(tenant, 'Patient')) : 0;
    store.insert(tenant, type, id, 1, now, json);
    if (type === 'Patient') {
      generateObservations(ctx, tenant, `${tenant}|p${ord}`, id, ctx.obsPerPatient, now);
      ctx.patientOrdinal.set(tenant, ord + 1);
    }
  });
  if (ctx.faults?.hit(ctx.faults.opts.ambiguousCreateRate)) {
    ctx.stats.ambiguousCreates++;
    req.socket.destroy();
    return;
  }
  if (ctx.faults?.hit(ctx.faults.opts.gatewayErrorRate)) return gatewayError(ctx, res, ctx.faults.gatewayStatus());
  replies.send(res, 200, json, { ETag: `W/"1"` });
}

export async function update(ctx: SandboxContext, req: IncomingMessage, res: ServerResponse, tenant: string, type: string, id: string): Promise<void> {
  const { replies, store } = ctx;
  const patch = req.method === 'PATCH';
  if (patch && /json-patch/i.test(String(req.headers['content-type'])))
    return replies.fail(res, 415, [oo('not-supported', 'JSON Patch is not supported: send a JSON merge patch (application/merge-patch+json)')]);
  const buf = await replies.readBody(req, res);
  if (!buf) return;
  const row = ID_RE.test(id) ? store.get(tenant, type, id) : undefined;
  if (!row) return replies.fail(res, 404, [oo('not-found', `${type}/${ID_RE.test(id) ? id : '…'} not found`)]);
  const ifMatch = req.headers['if-match'];
  if (ifMatch !== undefined && ifMatch !== `W/"${row.version}"` && ifMatch !== `"${row.version}"`)
    return replies.fail(res, 412, [oo('conflict', `If-Match ${show(ifMatch)} does not match the current version W/"${row.version}"`)]);
  const sent = replies.parseObject(res, buf);
  if (!sent) return;

  let body: Json;
  if (patch) {
    const { meta: _m, ...p } = sent;
    const current = JSON.parse(row.body) as Json;
    delete current.meta;
    body = mergePatch(current, p) as Json;
  } else body = sent;
  if (body.resourceType !== type) return replies.fail(res, 400, [typeMismatch(type, body.resourceType)]);
  const issues: OOIssue[] = [];
  if (body.id === undefined) issues.push(oo('required', `id is required on update and must equal the path id "${id}"`, '/id'));
  else if (body.id !== id) issues.push(oo('invalid', `id ${show(body.id)} does not match the path id "${id}"`, '/id'));
  issues.push(...check(ctx, tenant, type, body, new Set(issues.length ? ['/id'] : [])));
  if (issues.length) return replies.fail(res, 400, issues);

  const version = row.version + 1;
  const now = new Date().toISOString();
  const json = serialise(ctx, type, id, version, now, body);
  store.update(tenant, type, id, version, now, json);
  replies.send(res, 200, json, { ETag: `W/"${version}"` });
}

export function read(ctx: SandboxContext, res: ServerResponse, tenant: string, type: string, id: string): void {
  const row = ID_RE.test(id) ? ctx.store.get(tenant, type, id) : undefined;
  if (!row) return ctx.replies.fail(res, 404, [oo('not-found', `${type}/${ID_RE.test(id) ? id : '…'} not found`)]);
  ctx.replies.send(res, 200, row.body, { ETag: `W/"${row.version}"` });
}

export function list(ctx: SandboxContext, req: IncomingMessage, res: ServerResponse, tenant: string, type: string, query: string): void {
  const { replies } = ctx;
  // Only _count and _cursor are understood; other parameters are ignored (documented in docs/sandbox.md).
  const params = new URLSearchParams(query);
  let count = ctx.pageSize;
  const c = ctx.countParam === 'ignore' ? null : params.get('_count');
  if (c !== null && ctx.countParam === 'reject') return replies.fail(res, 400, [oo('not-supported', 'query parameter _count is not supported')]);
  if (c !== null) {
    if (!/^\d{1,9}$/.test(c) || Number(c) < 1)
      return replies.fail(res, 400, [oo('value', `_count must be a positive integer (at most ${MAX_PAGE_SIZE}), got ${show(c)}`)]);
    count = Math.min(Number(c), MAX_PAGE_SIZE);
  }
  let after = 0;
  const cur = params.get('_cursor');
  if (cur !== null) {
    const m = /^c1:(\d{1,15})$/.exec(Buffer.from(cur, 'base64url').toString('latin1'));
    if (!m) return replies.fail(res, 400, [oo('value', '_cursor is not a cursor issued by this server: follow the "next" link')]);
    after = Number(m[1]);
  }
  const rows = ctx.store.page(tenant, type, after, count + 1);
  const more = rows.length > count;
  if (more) rows.pop();

  const h = req.headers.host;
  const base = typeof h === 'string' && HOST_RE.test(h) ? `http://${h}` : ctx.url;
  const links = [`{"relation":"self","url":${JSON.stringify(base + (req.url ?? ''))}}`];
  if (more) {
    const next = Buffer.from(`c1:${rows[rows.length - 1]!.seq}`, 'latin1').toString('base64url');
    links.push(`{"relation":"next","url":${JSON.stringify(`${base}/${type}?${ctx.countParam === 'honour' ? `_count=${count}&` : ''}_cursor=${next}`)}}`);
  }
  // Built as text: stored bodies are already JSON, re-parsing them would dominate the cost of a page.
  const nulls = ctx.listNulls === 'all' ? LIST_NULLS[type] : ctx.listNulls === 'spec' && type === 'CareTeam' ? [] : undefined;
  const entries = rows.map((r) => `{"fullUrl":${JSON.stringify(`${base}/${type}/${r.id}`)},"resource":${nulls ? withNulls(type, r.body, nulls) : r.body}}`);
  replies.send(
    res,
    200,
    `{"resourceType":"Bundle","id":"${newId()}","meta":{"lastUpdated":"${new Date().toISOString()}"},"type":"searchset","link":[${links.join(',')}],"entry":[${entries.join(',')}]}`,
  );
}
