import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Issue } from '../core/issues.js';
import {
  getResourceValidator,
  RESOURCE_TYPES,
  type ResourceType,
  type Validator,
} from '../schemas/resource-schemas.js';
import { makeObservation, mulberry32 } from './observations.js';
import { SandboxStore } from './store.js';

export interface FaultOptions {
  /** Added before answering each authenticated request. */
  latencyMs?: number;
  jitterMs?: number;
  /** Per-tenant token bucket (burst = one second's worth) → 429 + Retry-After + OperationOutcome. */
  rateLimitPerSecond?: number;
  /** 0..1 → 503 + Retry-After: 1, request NOT processed. */
  error503Rate?: number;
  /** 0..1 → socket destroyed before processing (nothing stored). */
  dropRate?: number;
  /** 0..1 of POST creates: stored, then the socket is destroyed before the answer. */
  ambiguousCreateRate?: number;
  /** Seed of the PRNG that draws the rates (default 1), so a failing run can be replayed. */
  seed?: number;
}

export interface SandboxOptions {
  /** Default 127.0.0.1; a non-loopback address is refused unless allowRemote. */
  host?: string;
  allowRemote?: boolean;
  /** Default 0 = ephemeral. */
  port?: number;
  /** SQLite file (durable, a restart keeps the data); default in-memory. */
  dataFile?: string;
  apiKey?: string;
  emrId?: string;
  tenants?: string[];
  /** Observation generation seed (default 42). */
  seed?: number;
  /** Observations generated when a patient is created (default 2: one PHQ-9, one GAD-7). */
  observationsPerPatient?: number;
  /** Default page size of lists (default 50); `_count` overrides, max 1000. */
  pageSize?: number;
  /**
   * Like servers whose list answers have a fixed shape, fill what a resource does not carry with `null` in list
   * results (not in single reads): `spec` (default) participant role codings without `system`/`code`/`display`,
   * as the specification says; `all` also absent optional top-level fields (outside the bundle schema: for
   * tests of clients that must ignore such nulls); `none`.
   */
  listNulls?: 'spec' | 'all' | 'none';
  /** Answer 400 to `_count` (a server that takes no query parameter); default false. */
  rejectCount?: boolean;
  /** Default 1 MiB → 413. */
  maxBodyBytes?: number;
  /** Deepest nesting of objects and arrays a request body may have (default 64) → 400 beyond. */
  maxBodyDepth?: number;
  faults?: FaultOptions;
}

export interface SandboxStats {
  requests: number;
  byStatus: Record<string, number>;
  dropped: number;
  ambiguousCreates: number;
  /** tenant → resource type → count. */
  resources: Record<string, Record<string, number>>;
}

export interface Sandbox {
  /** e.g. http://127.0.0.1:41235 (no trailing slash). */
  url: string;
  port: number;
  credentials: { apiKey: string; emrId: string; tenants: string[] };
  setFaults(faults: FaultOptions | undefined): void;
  /** Test/bench hooks (not HTTP): add Observations verbatim (id/meta assigned when missing) or generate N per existing patient. */
  addObservations(tenant: string, observations: object[]): void;
  generateObservations(tenant: string, perPatient: number): number;
  /** Test hook (the API has no DELETE): a resource removed on the server's side, as an operator might. */
  removeResource(tenant: string, type: string, id: string): boolean;
  stats(): SandboxStats;
  close(): Promise<void>;
}

export const DEFAULT_CREDENTIALS = {
  apiKey: 'sandbox-key',
  emrId: 'sandbox-emr',
  tenants: ['demo-clinic', 'other-clinic'],
} as const;
export const MAX_PAGE_SIZE = 1000;

const WRITABLE = new Set<string>(['Patient', 'Practitioner', 'CareTeam']);
const TYPES = new Set<string>(RESOURCE_TYPES);
const JSON_TYPE = 'application/json; charset=utf-8';
// Only a plausible host[:port] is echoed into link URLs (the Host header is client-controlled).
const HOST_RE = /^[A-Za-z0-9.\-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/;
const REF_RE = /^([A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})$/;
const ID_RE = /^[A-Za-z0-9\-.]{1,64}$/;

/** One OperationOutcome issue; `expression` holds a JSON pointer into the request body. */
interface OOIssue {
  severity: 'error';
  code: string;
  diagnostics: string;
  expression?: string[];
}

const oo = (code: string, diagnostics: string, path?: string): OOIssue =>
  path === undefined ? { severity: 'error', code, diagnostics } : { severity: 'error', code, diagnostics, expression: [path] };

/** ajv keyword → FHIR issue-type code. */
const FHIR_CODE: Record<string, string> = {
  required: 'required',
  additionalProperties: 'structure',
  type: 'structure',
  'too-many-issues': 'too-costly',
};
const fromIssue = (i: Issue): OOIssue => oo(FHIR_CODE[i.code] ?? 'value', i.message, i.path);

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Short, non-PHI description of a client-sent value for messages (type names, ids). */
const show = (v: unknown): string =>
  typeof v === 'string' ? JSON.stringify(v.length > 64 ? `${v.slice(0, 64)}…` : v) : v === undefined ? 'nothing' : typeof v;

/** Whether a parsed JSON value nests objects/arrays deeper than `max` (iterative: any depth is safe to test). */
function deeperThan(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (d > max) return true;
    for (const x of Array.isArray(v) ? v : Object.values(v)) if (x !== null && typeof x === 'object') stack.push([x, d + 1]);
  }
  return false;
}

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

/** Fault-injection state; its PRNG is consumed in request order, so a seed replays the same faults. */
class Faults {
  private readonly rand: () => number;
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  constructor(readonly opts: FaultOptions) {
    this.rand = mulberry32(opts.seed ?? 1);
  }
  hit(rate: number | undefined): boolean {
    return rate !== undefined && rate > 0 && this.rand() < rate;
  }
  delayMs(): number {
    const { latencyMs = 0, jitterMs = 0 } = this.opts;
    return latencyMs + (jitterMs > 0 ? this.rand() * jitterMs : 0);
  }
  /** 0 when the request may proceed, else whole seconds until a token is available (≥ 1). */
  throttle(tenant: string): number {
    const rate = this.opts.rateLimitPerSecond;
    if (!rate) return 0;
    const now = performance.now();
    const cap = Math.max(1, rate);
    let b = this.buckets.get(tenant);
    if (!b) this.buckets.set(tenant, (b = { tokens: cap, at: now }));
    b.tokens = Math.min(cap, b.tokens + ((now - b.at) / 1000) * rate);
    b.at = now;
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - b.tokens) / rate));
  }
}

/** Rejects out-of-range fault options with p-queue style messages. */
export function checkFaults(f: FaultOptions | undefined): void {
  if (!f) return;
  for (const k of ['error503Rate', 'dropRate', 'ambiguousCreateRate'] as const) {
    const v = f[k];
    if (v !== undefined && !(typeof v === 'number' && v >= 0 && v <= 1))
      throw new TypeError(`Expected \`${k}\` to be a number between 0 and 1, got \`${String(v)}\``);
  }
  for (const k of ['latencyMs', 'jitterMs', 'rateLimitPerSecond'] as const) {
    const v = f[k];
    if (v !== undefined && !(typeof v === 'number' && Number.isFinite(v) && v >= 0))
      throw new TypeError(`Expected \`${k}\` to be a finite number ≥ 0, got \`${String(v)}\``);
  }
}

const isLoopback = (h: string): boolean =>
  h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) || /^::ffff:127\./i.test(h);

const newId = (): string => randomBytes(8).toString('hex');
const sha256 = (s: string): Buffer => createHash('sha256').update(s).digest();

export async function startSandbox(opts: SandboxOptions = {}): Promise<Sandbox> {
  const host = opts.host ?? '127.0.0.1';
  if (!opts.allowRemote && !isLoopback(host))
    throw new Error(`Refusing to listen on non-loopback address ${host}: the sandbox is for local use (set allowRemote to override)`);
  checkFaults(opts.faults);
  const credentials = {
    apiKey: opts.apiKey ?? DEFAULT_CREDENTIALS.apiKey,
    emrId: opts.emrId ?? DEFAULT_CREDENTIALS.emrId,
    tenants: [...(opts.tenants ?? DEFAULT_CREDENTIALS.tenants)],
  };
  const tenants = new Set(credentials.tenants);
  const keyDigest = sha256(credentials.apiKey);
  const seed = opts.seed ?? 42;
  const obsPerPatient = opts.observationsPerPatient ?? 2;
  const pageSize = Math.min(Math.max(1, opts.pageSize ?? 50), MAX_PAGE_SIZE);
  const maxBody = opts.maxBodyBytes ?? 1024 * 1024;
  const maxDepth = opts.maxBodyDepth ?? 64;
  const listNulls = opts.listNulls ?? 'spec';
  const source = `urn:care-etl:sandbox#${credentials.emrId}`;
  const validators = new Map<string, Validator>(RESOURCE_TYPES.map((t) => [t, getResourceValidator(t)]));

  const store = new SandboxStore(opts.dataFile);
  let faults = opts.faults ? new Faults(opts.faults) : undefined;
  let closed = false;
  const stats = { requests: 0, byStatus: {} as Record<string, number>, dropped: 0, ambiguousCreates: 0 };
  // Patients created so far per tenant: the generation key, so values depend on creation order, not random ids.
  const patientOrdinal = new Map<string, number>();
  const genRounds = new Map<string, number>();

  // ---------- storage helpers ----------

  function serialise(type: string, id: string, version: number, now: string, body: Json): string {
    const { resourceType: _t, id: _i, meta: _m, ...rest } = body;
    return JSON.stringify({ resourceType: type, id, meta: { versionId: String(version), lastUpdated: now, source }, ...rest });
  }

  function insertObservation(tenant: string, obs: Json, now: string): void {
    const id = typeof obs.id === 'string' ? obs.id : newId();
    const meta = isObj(obs.meta) ? obs.meta : { versionId: '1', lastUpdated: now, source };
    const { resourceType: _t, id: _i, meta: _m, ...rest } = obs;
    const body = JSON.stringify({ resourceType: 'Observation', id, meta, ...rest });
    store.insert(tenant, 'Observation', id, Number(meta.versionId) || 1, String(meta.lastUpdated ?? now), body);
  }

  function generate(tenant: string, key: string, patientId: string, n: number, now: string): void {
    for (let k = 0; k < n; k++) insertObservation(tenant, makeObservation(seed, key, k, patientId), now);
  }

  const requireTenant = (tenant: string): void => {
    if (!tenants.has(tenant)) throw new Error(`unknown tenant ${tenant}`);
  };

  // ---------- HTTP plumbing ----------

  function send(res: ServerResponse, status: number, body: string, headers?: Record<string, string>): void {
    stats.byStatus[status] = (stats.byStatus[status] ?? 0) + 1;
    res.writeHead(status, { 'Content-Type': JSON_TYPE, 'Content-Length': String(Buffer.byteLength(body)), ...headers });
    res.end(body);
  }

  function fail(res: ServerResponse, status: number, issues: OOIssue[], headers?: Record<string, string>): void {
    send(res, status, JSON.stringify({ resourceType: 'OperationOutcome', issue: issues }), headers);
  }

  function tooLarge(req: IncomingMessage, res: ServerResponse): void {
    fail(res, 413, [oo('too-long', `request body exceeds the limit of ${maxBody} bytes`)], { Connection: 'close' });
    // Discard (never buffer) the rest so the client can finish sending and read the 413; cut off a body
    // that keeps coming far past the limit.
    let drained = 0;
    req.on('data', (c: Buffer) => {
      drained += c.length;
      if (drained > 16 * maxBody) req.socket.destroy();
    });
    req.resume();
  }

  /** The body, or undefined when it was already answered (413) or the client went away. */
  function readBody(req: IncomingMessage, res: ServerResponse): Promise<Buffer | undefined> {
    if (Number(req.headers['content-length']) > maxBody) {
      tooLarge(req, res);
      return Promise.resolve(undefined);
    }
    return new Promise((resolve) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const onData = (c: Buffer): void => {
        size += c.length;
        if (size > maxBody) {
          req.off('data', onData);
          chunks.length = 0;
          tooLarge(req, res);
          resolve(undefined);
          return;
        }
        chunks.push(c);
      };
      req.on('data', onData);
      req.on('end', () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size)));
      req.on('close', () => resolve(undefined));
      req.on('error', () => resolve(undefined));
    });
  }

  /** Parses a JSON object body or answers 400. */
  function parseObject(res: ServerResponse, buf: Buffer): Json | undefined {
    let body: unknown;
    try {
      body = JSON.parse(buf.toString('utf8'));
    } catch (e) {
      // V8 messages may quote the body: keep only the position, the body can hold patient data.
      const pos = /position (\d+)/.exec(String((e as Error).message))?.[1];
      fail(res, 400, [oo('structure', `request body is not valid JSON${pos ? ` (error at position ${pos})` : ''}`)]);
      return undefined;
    }
    if (!isObj(body)) {
      fail(res, 400, [oo('structure', `request body must be a JSON object, got ${Array.isArray(body) ? 'an array' : show(body)}`)]);
      return undefined;
    }
    // Client input never reaches the recursive code (merge patch, validation, serialisation) unbounded: a 400, not a 500.
    if (deeperThan(body, maxDepth)) {
      fail(res, 400, [oo('too-costly', `request body is nested deeper than ${maxDepth} levels`)]);
      return undefined;
    }
    return body;
  }

  /** Schema issues plus, for CareTeam, references that do not resolve inside the tenant. */
  function check(tenant: string, type: string, body: Json, skip: Set<string>): OOIssue[] {
    const issues = validators.get(type)!(body).filter((i) => !skip.has(i.path ?? '')).map(fromIssue);
    if (type === 'CareTeam') {
      const ref = (r: unknown, want: string, path: string): void => {
        const m = isObj(r) && typeof r.reference === 'string' ? REF_RE.exec(r.reference) : null;
        if (m && m[1] === want && !store.exists(tenant, want, m[2]!))
          issues.push(oo('not-found', `${want}/${m[2]} does not exist in this tenant`, path));
      };
      ref(body.subject, 'Patient', '/subject/reference');
      if (Array.isArray(body.participant))
        body.participant.forEach((p, i) => isObj(p) && ref(p.member, 'Practitioner', `/participant/${i}/member/reference`));
    }
    return issues;
  }

  const typeMismatch = (type: string, got: unknown): OOIssue =>
    oo('invalid', `resourceType must be "${type}" on the ${type} endpoint, got ${show(got)}`, '/resourceType');

  // ---------- operations ----------

  async function create(req: IncomingMessage, res: ServerResponse, tenant: string, type: string): Promise<void> {
    const buf = await readBody(req, res);
    if (!buf) return;
    const body = parseObject(res, buf);
    if (!body) return;
    if (body.resourceType !== type) return fail(res, 400, [typeMismatch(type, body.resourceType)]);
    const issues: OOIssue[] = [];
    if (body.id !== undefined) issues.push(oo('invalid', 'id must not be sent on create: the server assigns it', '/id'));
    issues.push(...check(tenant, type, body, new Set(body.id !== undefined ? ['/id'] : [])));
    if (issues.length) return fail(res, 400, issues);

    const id = newId();
    const now = new Date().toISOString();
    const json = serialise(type, id, 1, now, body);
    store.transaction(() => {
      const ord = type === 'Patient' ? (patientOrdinal.get(tenant) ?? store.count(tenant, 'Patient')) : 0;
      store.insert(tenant, type, id, 1, now, json);
      if (type === 'Patient') {
        generate(tenant, `${tenant}|p${ord}`, id, obsPerPatient, now);
        patientOrdinal.set(tenant, ord + 1);
      }
    });
    if (faults?.hit(faults.opts.ambiguousCreateRate)) {
      stats.ambiguousCreates++;
      req.socket.destroy();
      return;
    }
    send(res, 200, json, { ETag: `W/"1"` });
  }

  async function update(req: IncomingMessage, res: ServerResponse, tenant: string, type: string, id: string): Promise<void> {
    const patch = req.method === 'PATCH';
    if (patch && /json-patch/i.test(String(req.headers['content-type'])))
      return fail(res, 415, [oo('not-supported', 'JSON Patch is not supported: send a JSON merge patch (application/merge-patch+json)')]);
    const buf = await readBody(req, res);
    if (!buf) return;
    const row = ID_RE.test(id) ? store.get(tenant, type, id) : undefined;
    if (!row) return fail(res, 404, [oo('not-found', `${type}/${ID_RE.test(id) ? id : '…'} not found`)]);
    const ifMatch = req.headers['if-match'];
    if (ifMatch !== undefined && ifMatch !== `W/"${row.version}"` && ifMatch !== `"${row.version}"`)
      return fail(res, 412, [oo('conflict', `If-Match ${show(ifMatch)} does not match the current version W/"${row.version}"`)]);
    const sent = parseObject(res, buf);
    if (!sent) return;

    let body: Json;
    if (patch) {
      const { meta: _m, ...p } = sent;
      const current = JSON.parse(row.body) as Json;
      delete current.meta;
      body = mergePatch(current, p) as Json;
    } else body = sent;
    if (body.resourceType !== type) return fail(res, 400, [typeMismatch(type, body.resourceType)]);
    const issues: OOIssue[] = [];
    if (body.id === undefined) issues.push(oo('required', `id is required on update and must equal the path id "${id}"`, '/id'));
    else if (body.id !== id) issues.push(oo('invalid', `id ${show(body.id)} does not match the path id "${id}"`, '/id'));
    issues.push(...check(tenant, type, body, new Set(issues.length ? ['/id'] : [])));
    if (issues.length) return fail(res, 400, issues);

    const version = row.version + 1;
    const now = new Date().toISOString();
    const json = serialise(type, id, version, now, body);
    store.update(tenant, type, id, version, now, json);
    send(res, 200, json, { ETag: `W/"${version}"` });
  }

  function read(res: ServerResponse, tenant: string, type: string, id: string): void {
    const row = ID_RE.test(id) ? store.get(tenant, type, id) : undefined;
    if (!row) return fail(res, 404, [oo('not-found', `${type}/${ID_RE.test(id) ? id : '…'} not found`)]);
    send(res, 200, row.body, { ETag: `W/"${row.version}"` });
  }

  function list(req: IncomingMessage, res: ServerResponse, tenant: string, type: string, query: string): void {
    // Only _count and _cursor are understood; other parameters are ignored (documented in docs/sandbox.md).
    const params = new URLSearchParams(query);
    let count = pageSize;
    const c = params.get('_count');
    if (c !== null && opts.rejectCount) return fail(res, 400, [oo('not-supported', 'query parameter _count is not supported')]);
    if (c !== null) {
      if (!/^\d{1,9}$/.test(c) || Number(c) < 1)
        return fail(res, 400, [oo('value', `_count must be a positive integer (at most ${MAX_PAGE_SIZE}), got ${show(c)}`)]);
      count = Math.min(Number(c), MAX_PAGE_SIZE);
    }
    let after = 0;
    const cur = params.get('_cursor');
    if (cur !== null) {
      const m = /^c1:(\d{1,15})$/.exec(Buffer.from(cur, 'base64url').toString('latin1'));
      if (!m) return fail(res, 400, [oo('value', '_cursor is not a cursor issued by this server: follow the "next" link')]);
      after = Number(m[1]);
    }
    const rows = store.page(tenant, type, after, count + 1);
    const more = rows.length > count;
    if (more) rows.pop();

    const h = req.headers.host;
    const base = typeof h === 'string' && HOST_RE.test(h) ? `http://${h}` : url;
    const links = [`{"relation":"self","url":${JSON.stringify(base + (req.url ?? ''))}}`];
    if (more) {
      const next = Buffer.from(`c1:${rows[rows.length - 1]!.seq}`, 'latin1').toString('base64url');
      links.push(`{"relation":"next","url":${JSON.stringify(`${base}/${type}?${opts.rejectCount ? '' : `_count=${count}&`}_cursor=${next}`)}}`);
    }
    // Built as text: stored bodies are already JSON, re-parsing them would dominate the cost of a page.
    const nulls = listNulls === 'all' ? LIST_NULLS[type] : listNulls === 'spec' && type === 'CareTeam' ? [] : undefined;
    const entries = rows.map((r) => `{"fullUrl":${JSON.stringify(`${base}/${type}/${r.id}`)},"resource":${nulls ? withNulls(type, r.body, nulls) : r.body}}`);
    send(
      res,
      200,
      `{"resourceType":"Bundle","id":"${newId()}","meta":{"lastUpdated":"${new Date().toISOString()}"},"type":"searchset","link":[${links.join(',')}],"entry":[${entries.join(',')}]}`,
    );
  }

  // ---------- request pipeline: auth → faults → route ----------

  /** The tenant, or undefined after answering 401/403. The key is compared in constant time and never echoed. */
  function authenticate(req: IncomingMessage, res: ServerResponse): string | undefined {
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
      fail(res, 401, missing.map((n) => oo('login', `missing required header ${n}`)));
      return undefined;
    }
    if (!timingSafeEqual(sha256(key as string), keyDigest) || emr !== credentials.emrId) {
      fail(res, 401, [oo('security', 'invalid credentials: Service-SubscriptionKey or Service-EmrId is not valid')]);
      return undefined;
    }
    if (!tenants.has(tenant as string)) {
      fail(res, 403, [oo('forbidden', `tenant ${show(tenant)} is not accessible with these credentials`)]);
      return undefined;
    }
    return tenant as string;
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    stats.requests++;
    const tenant = authenticate(req, res);
    if (tenant === undefined) return;
    const f = faults;
    if (f) {
      const d = f.delayMs();
      if (d > 0) {
        await sleep(d);
        if (closed) return void req.socket.destroy();
      }
      const wait = f.throttle(tenant);
      if (wait)
        return fail(res, 429, [oo('throttled', `rate limit of ${f.opts.rateLimitPerSecond} requests/s for this tenant exceeded`)], {
          'Retry-After': String(wait),
        });
      if (f.hit(f.opts.error503Rate))
        return fail(res, 503, [oo('transient', 'service temporarily unavailable (injected fault)')], { 'Retry-After': '1' });
      if (f.hit(f.opts.dropRate)) {
        stats.dropped++;
        return void req.socket.destroy();
      }
    }

    const raw = req.url ?? '/';
    const qi = raw.indexOf('?');
    let path = qi < 0 ? raw : raw.slice(0, qi);
    if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
    const parts = path.split('/');
    const type = parts[1] ?? '';
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    if (!TYPES.has(type) || parts.length > 3)
      return fail(res, 404, [oo('not-found', `unknown path: resources are ${RESOURCE_TYPES.join(', ')}`)]);
    const writable = WRITABLE.has(type);
    if (parts.length === 2) {
      if (method === 'GET') return list(req, res, tenant, type, qi < 0 ? '' : raw.slice(qi + 1));
      if (method === 'POST' && writable) return create(req, res, tenant, type);
      return notAllowed(res, type, writable ? 'GET, POST' : 'GET');
    }
    const id = parts[2]!;
    if (method === 'GET') return read(res, tenant, type, id);
    if ((method === 'PUT' || method === 'PATCH') && writable) return update(req, res, tenant, type, id);
    return notAllowed(res, type, writable ? 'GET, PUT, PATCH' : 'GET');
  }

  function notAllowed(res: ServerResponse, type: string, allow: string): void {
    const why = WRITABLE.has(type) ? '' : `: ${type} is read-only`;
    fail(res, 405, [oo('not-supported', `method not allowed${why} (allowed: ${allow})`)], { Allow: allow });
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (res.headersSent || res.destroyed) return;
      fail(res, 500, [oo('exception', `internal sandbox error: ${(err as Error)?.message ?? String(err)}`)]);
    });
  });
  // Longer than undici's default keep-alive so clients, not the server, decide when to drop idle sockets.
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;

  return {
    url,
    port,
    credentials,
    setFaults(f) {
      checkFaults(f);
      faults = f ? new Faults(f) : undefined;
    },
    addObservations(tenant, observations) {
      requireTenant(tenant);
      const now = new Date().toISOString();
      store.transaction(() => {
        for (const o of observations) insertObservation(tenant, o as Json, now);
      });
    },
    generateObservations(tenant, perPatient) {
      requireTenant(tenant);
      const round = (genRounds.get(tenant) ?? 0) + 1;
      genRounds.set(tenant, round);
      const ids = store.ids(tenant, 'Patient');
      const now = new Date().toISOString();
      store.transaction(() => ids.forEach((pid, i) => generate(tenant, `${tenant}|r${round}|p${i}`, pid, perPatient, now)));
      return ids.length * perPatient;
    },
    removeResource(tenant, type, id) {
      requireTenant(tenant);
      return store.remove(tenant, type, id);
    },
    stats() {
      return { ...stats, byStatus: { ...stats.byStatus }, resources: closed ? {} : store.counts() };
    },
    async close() {
      if (closed) return;
      closed = true;
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      store.close();
    },
  };
}
