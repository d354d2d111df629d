import { createRequire } from 'node:module';
import type { Dispatcher } from 'undici';
import { CONNECTION_DEFAULTS, proxyFor, type ConnectionSettings, type ProxyAddress } from './connection.js';
import type { ResourceType, WritableType } from '../schemas/resource-types.js';
import {
  ApiError,
  AuthenticationError,
  isSafeId,
  ProtocolError,
  proxyFailureStatus,
  ProxyError,
  ResponseTooLargeError,
  RetryAfterTooLongError,
  sentTextValues,
  TransportError,
  type Operation,
  type OperationOutcomeIssue,
  type TransportFailure,
} from './errors.js';
import type { Bundle, Resource, StoredResource } from './types.js';
import { withRetry, type RetryDecision, type RetryOptions } from '../core/retry.js';
import { CareEtlError, ExitCode } from '../core/issues.js';
import { registerUrlCredentials } from '../core/secret.js';

export interface ClientOptions {
  /** Injected for tests or shared pools; by default the client owns a keep-alive Agent. */
  dispatcher?: Dispatcher;
  /**
   * Retries of requests that are safe to repeat (see `classifyRetry`). `false` = one attempt, errors surface
   * as they are (tests of each fault do that). Creates whose outcome is unknown are never retried here.
   */
  retry?: RetryOptions | false;
  /** Called once per HTTP attempt (progress, metrics). Never receives headers. */
  onResponse?: (info: { method: string; path: string; status: number | 'error'; ms: number }) => void;
}

export interface ListOptions {
  /** Passed through as query parameters on the first page, for servers that support them (the spec shows none). */
  query?: Record<string, string>;
  /** `_count` on the first page. */
  pageSize?: number;
  signal?: AbortSignal;
  /** Overrides the client's retry policy for the page requests. */
  retry?: RetryOptions | false;
  /** Most pages followed (default: the connection's `maxPages`). */
  maxPages?: number;
  /** Consecutive pages bringing no new resource id before the listing is abandoned (default STALE_PAGE_LIMIT). */
  stalePageLimit?: number;
  /** Start at this page (a URL an earlier listing requested, on the configured origin) instead of the first. */
  from?: string;
  /** Told the URL of each page as it is requested (before it is yielded). */
  onPageUrl?: (url: string) => void;
}

// The direct path takes undici's Agent from its own file, not from undici's index: the index loads ~110 modules
// (fetch, WebSocket, caches, mocks) where the Agent needs 28 — about 60 ms of CPU at every start (issue 28 item 3).
// A proxy loads the index all the same: its CONNECT goes through the request API the index adds to every
// dispatcher. undici has no `exports` map; test/api/undici-dispatchers.test.ts checks the path on each upgrade.
// Required when a dispatcher is made: a dry run imports this module and never makes one.
const requireUndici = createRequire(import.meta.url);

/**
 * A listing whose pages bring nothing new for this many pages in a row (empty pages, or only ids seen on the
 * previous STALE_PAGE_LIMIT pages) while still linking to a `next` one is not progressing: it fails. (A loop
 * longer than that, or endless pages of new ids, is ended by `maxPages`.)
 */
export const STALE_PAGE_LIMIT = 20;

interface Call {
  operation: Operation;
  resourceType: string;
  resourceId?: string;
  method: Dispatcher.HttpMethod;
  /** Absolute URL. */
  url: string;
  body?: unknown;
  signal?: AbortSignal;
  retry?: RetryOptions | false;
}

/** Ends one attempt (its deadline, or the caller's cancel) with `reason`: what `exchange` aborts the request with. */
class AttemptAbort {
  reason: unknown;
  /** The exchange under way, told when the attempt ends. */
  exchange?: { fired(): void };
  fire(reason: unknown): void {
    if (this.reason !== undefined) return;
    this.reason = reason;
    this.exchange?.fired();
  }
}

/** The abort reason of an attempt that ran past its deadline. */
class DeadlineExceeded extends Error {
  constructor() {
    super('request deadline exceeded');
    this.name = 'DeadlineExceeded';
  }
}

/** A value from an answer, for a message: JSON-quoted and shortened (a hostile server chooses it). */
function show(v: unknown): string {
  const text = JSON.stringify(v) ?? String(v);
  return text.length > 80 ? `${text.slice(0, 77)}…` : text;
}

/** UTF-8, a leading BOM dropped (decode without `stream` keeps no state between calls). */
const UTF8 = new TextDecoder();

const isAbort = (err: unknown): boolean => (err as { name?: string })?.name === 'AbortError' || (err as { code?: string })?.code === 'UND_ERR_ABORTED';

/** An answer: status, headers, and its body (undefined: over the byte cap, not read further). */
interface Answer {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  raw: Buffer | undefined;
}

/** A failure of an exchange; `inBody`: after the answer's head arrived (the request was sent and answered). */
class ExchangeFailure {
  constructor(
    readonly error: unknown,
    readonly inBody: boolean,
  ) {}
}

/**
 * One HTTP exchange through the dispatcher's handler API: the answer's bytes collected into one Buffer (no stream
 * per answer: the loader's CPU per request, issue 28), given up — the connection closed — as soon as they exceed
 * `cap` (declared or counted), instead of buffering whatever the server sends. `abort` ends it at any point (a
 * request not yet on a socket is never written). Rejects with an ExchangeFailure.
 */
function exchange(dispatcher: Dispatcher, opts: Dispatcher.DispatchOptions, cap: number, abort: AttemptAbort): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const handler = new ExchangeHandler(cap, abort, resolve, reject);
    try {
      dispatcher.dispatch(opts, handler);
    } catch (err) {
      if (handler.settle()) reject(new ExchangeFailure(err, false));
    }
  });
}

/** `exchange`'s handler: one object per request, its methods on the prototype (no closures per request: issue 28 item 3). */
class ExchangeHandler implements Dispatcher.DispatchHandler {
  #controller: Dispatcher.DispatchController | undefined;
  #answer: Answer | undefined;
  readonly #chunks: Buffer[] = [];
  #size = 0;
  #settled = false;

  constructor(
    readonly cap: number,
    readonly abort: AttemptAbort,
    readonly resolve: (answer: Answer) => void,
    readonly reject: (failure: ExchangeFailure) => void,
  ) {
    abort.exchange = this;
  }

  /** The attempt ended (its deadline, the caller's cancel): the request is aborted wherever it is. */
  fired(): void {
    this.#controller?.abort(this.abort.reason as Error);
    if (this.settle()) this.reject(new ExchangeFailure(this.abort.reason, this.#answer !== undefined));
  }

  /** True the first time only: the exchange settles now (it stops listening to its attempt's end). */
  settle(): boolean {
    if (this.#settled) return false;
    this.#settled = true;
    this.abort.exchange = undefined;
    return true;
  }

  #tooLarge(c: Dispatcher.DispatchController): void {
    if (this.settle()) this.resolve(this.#answer!);
    c.abort(new Error('answer over the byte cap'));
  }

  onRequestStart(c: Dispatcher.DispatchController): void {
    this.#controller = c;
    if (this.abort.reason !== undefined) c.abort(this.abort.reason as Error);
  }

  onResponseStart(c: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    if (statusCode < 200) return; // 1xx: the answer is still to come
    this.#answer = { statusCode, headers, raw: undefined };
    const length = headers['content-length'];
    if (Number(Array.isArray(length) ? length[0] : length) > this.cap) this.#tooLarge(c);
  }

  onResponseData(c: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#settled) return;
    this.#size += chunk.length;
    if (this.#size > this.cap) this.#tooLarge(c);
    else this.#chunks.push(chunk);
  }

  onResponseEnd(): void {
    const answer = this.#answer;
    if (answer) answer.raw = Buffer.concat(this.#chunks, this.#size);
    if (!this.settle()) return;
    if (answer) this.resolve(answer);
    else this.reject(new ExchangeFailure(new Error('no answer'), false));
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    if (this.settle()) this.reject(new ExchangeFailure(err, this.#answer !== undefined));
  }
}

const SENT_CODES: Record<string, TransportFailure> = {
  UND_ERR_HEADERS_TIMEOUT: 'timeout',
  UND_ERR_BODY_TIMEOUT: 'timeout',
  UND_ERR_SOCKET: 'reset',
  ECONNRESET: 'reset',
  EPIPE: 'reset',
  UND_ERR_CLOSED: 'reset',
};
const NOT_SENT_CODES: Record<string, TransportFailure> = {
  UND_ERR_CONNECT_TIMEOUT: 'timeout',
  ECONNREFUSED: 'refused',
  ENOTFOUND: 'dns',
  EAI_AGAIN: 'dns',
  EHOSTUNREACH: 'refused',
  ENETUNREACH: 'refused',
};

function errorCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && (code in SENT_CODES || code in NOT_SENT_CODES)) return code;
  }
  return (err as { code?: string })?.code;
}

function parseRetryAfter(value: string | string[] | undefined): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return undefined;
  const seconds = Number(v);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(v);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/**
 * Which failures may be repeated without risk of a duplicate:
 * - 429: the server refused the request before processing it (Retry-After honoured, up to `--max-retry-after`);
 * - 502/503/504 and lost answers: only for GET/PUT/PATCH (repeating them converges to the same state). For a
 *   create, ANY 5xx — a 503 with Retry-After included: a gateway answers it after the backend stored the create —
 *   means "maybe stored", so the loader reconciles instead of re-sending (docs/design/retry.md);
 * - connections that never carried the request (refused, connect time-out): always.
 */
export function classifyRetry(err: unknown): RetryDecision {
  if (err instanceof AuthenticationError) return { retry: false };
  // issue 25: a proxy that refused the tunnel or could not be reached never passed the request on
  if (err instanceof ProxyError) return err.status === 407 ? { retry: false } : { retry: true, reason: 'proxy' };
  if (err instanceof ApiError) {
    if (err.status === 429) return { retry: true, delayMs: err.retryAfterMs, reason: `HTTP ${err.status}` };
    if (err.method === 'POST') return { retry: false };
    if (err.status === 503) return { retry: true, delayMs: err.retryAfterMs, reason: `HTTP ${err.status}` };
    if (err.status === 502 || err.status === 504) return { retry: true, reason: `HTTP ${err.status}` };
    return { retry: false };
  }
  if (err instanceof TransportError) {
    if (!err.requestSent) return { retry: true, reason: err.failure };
    if (err.method !== 'POST') return { retry: true, reason: err.failure };
  }
  return { retry: false };
}

const PROXY_VARIABLES = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'NO_PROXY', 'no_proxy'] as const;
/** Never proxied, whatever NO_PROXY says: a proxy cannot reach this machine's loopback (the embedded sandbox). */
export const LOOPBACK_NO_PROXY = ['localhost', '127.0.0.1', '[::1]'] as const;

/**
 * The client's own dispatcher: a keep-alive Agent with the connection's limits and time-outs; when a proxy
 * variable is set (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`, or their lower-case forms, which win), undici's
 * `EnvHttpProxyAgent` with the same limits: https targets go through `HTTPS_PROXY` (else `HTTP_PROXY`) in a
 * CONNECT tunnel, plain-http targets through `HTTP_PROXY` as absolute-URI requests, and hosts matching
 * `NO_PROXY` (names, `.domain` suffixes, `host:port`, `*`) plus `localhost`, `127.0.0.1` and `[::1]` directly.
 */
export function createDispatcher(
  settings: Pick<ConnectionSettings, 'connections' | 'connectTimeoutMs' | 'requestTimeoutMs'>,
  env: NodeJS.ProcessEnv = process.env,
): Dispatcher {
  const options = {
    connections: settings.connections,
    keepAliveTimeout: 10_000,
    connect: { timeout: settings.connectTimeoutMs },
    headersTimeout: settings.requestTimeoutMs,
    bodyTimeout: settings.requestTimeoutMs,
  };
  if (!PROXY_VARIABLES.some((k) => env[k])) {
    const Agent = requireUndici('undici/lib/dispatcher/agent.js') as typeof import('undici').Agent;
    return new Agent(options);
  }
  const noProxy = env.no_proxy ?? env.NO_PROXY ?? '';
  const proxyUrl = (lower: 'http_proxy' | 'https_proxy', upper: 'HTTP_PROXY' | 'HTTPS_PROXY'): string => {
    const name = env[lower] !== undefined ? lower : upper;
    let value = (env[name] ?? '').trim();
    if (!value) return '';
    registerUrlCredentials(value); // issue 25: `user:password` in a proxy URL is a secret in every form
    if (!value.includes('://')) value = `http://${value}`; // `proxy.example.org:3128`, as curl reads it
    const protocol = URL.canParse(value) ? new URL(value).protocol : undefined;
    if (protocol !== 'http:' && protocol !== 'https:') {
      // Named, never shown: the URL may carry the proxy's credentials.
      throw new CareEtlError(`${name} is not a proxy URL`, {
        hint: `Set ${name} to the proxy's URL, e.g. http://proxy.example.org:3128 (http or https), or unset it.`,
        exitCode: ExitCode.config,
      });
    }
    return value;
  };
  const { EnvHttpProxyAgent, Pool } = requireUndici('undici') as typeof import('undici');
  return new EnvHttpProxyAgent({
    ...options,
    httpProxy: proxyUrl('http_proxy', 'HTTP_PROXY'),
    httpsProxy: proxyUrl('https_proxy', 'HTTPS_PROXY'),
    noProxy: noProxy.trim() === '*' ? '*' : [noProxy, ...LOOPBACK_NO_PROXY].filter(Boolean).join(','),
    // Plain http through an http proxy as absolute-URI requests (what proxies expect for http), not CONNECT.
    proxyTunnel: false,
    proxyTls: { timeout: settings.connectTimeoutMs },
    requestTls: { timeout: settings.connectTimeoutMs },
    // undici builds the pool to the proxy (plain-http targets) from `connect` only: keep the limits and time-outs.
    factory: (origin, opts) => new Pool(origin, { ...options, ...(opts as import('undici').Pool.Options) }),
  });
}

/** Typed client of the Care Coordination Integration Service API (one instance per base URL + tenant). */
export class CareClient {
  readonly settings: ConnectionSettings;
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;
  readonly #headers: Record<string, string>;
  /** The same with `content-type: application/json` (requests with a body). */
  readonly #jsonHeaders: Record<string, string>;
  readonly #origin: string;
  readonly #retry: RetryOptions | false;
  readonly #onResponse?: ClientOptions['onResponse'];
  #countRejected = false;
  /** `Type/id` of every resource this client created: a server giving one id to two creates is not believed. */
  readonly #createdIds = new Set<string>();
  /** The proxy requests to this origin would go through (named when a failure only a proxy gives occurs). */
  readonly #proxy?: ProxyAddress;

  constructor(settings: ConnectionSettings, opts: ClientOptions = {}) {
    this.settings = settings;
    this.#ownsDispatcher = !opts.dispatcher;
    this.#dispatcher = opts.dispatcher ?? createDispatcher(settings);
    this.#headers = {
      'service-subscriptionkey': settings.apiKey.reveal(),
      'service-emrid': settings.emrId,
      'service-tenantid': settings.tenantId,
      accept: 'application/json',
    };
    this.#jsonHeaders = { ...this.#headers, 'content-type': 'application/json' };
    this.#origin = new URL(settings.baseUrl).origin;
    this.#proxy = proxyFor(settings.baseUrl);
    this.#retry = opts.retry === undefined ? {} : opts.retry;
    this.#onResponse = opts.onResponse;
  }

  /**
   * Creates a resource. The answer is checked before it is believed: it must be a `type` resource whose `id` is
   * a safe path segment (`isSafeId`) not already given to another create of this client. Otherwise a
   * ProtocolError with `ambiguous` is thrown — the server answered 2xx, so the resource was probably stored,
   * but under which id is unknown: the caller must reconcile (look it up), exactly as for a lost answer.
   */
  async create(type: WritableType, body: Resource, signal?: AbortSignal): Promise<StoredResource> {
    if (body.id !== undefined) throw new TypeError(`create ${type}: the body must not carry an id (the server assigns it)`);
    const answer = (await this.#single({
      operation: 'create',
      resourceType: type,
      method: 'POST',
      url: this.#createUrl(type),
      body,
      signal,
    })) as Resource;
    let problem: string | undefined;
    if (answer.resourceType !== type) problem = `it is a ${show(answer.resourceType)} resource, not a ${type}`;
    else if (answer.id === undefined) problem = 'it carries no id';
    else if (!isSafeId(answer.id)) problem = `its id ${show(answer.id)} is not a valid FHIR id (1 to 64 of A-Z a-z 0-9 - .)`;
    else if (this.#createdIds.has(`${type}/${answer.id}`)) problem = `its id ${show(answer.id)} was already returned for another ${type} created in this run`;
    if (problem) {
      throw new ProtocolError(`create ${type}: the server's answer cannot be believed: ${problem}; the create's outcome is unknown`, {
        operation: 'create',
        ambiguous: true,
        hint: 'The resource is looked up on the server (by its match rule) before anything is sent again; if it stays unknown, its intent stays pending for the next run. Report the answer to the service operator.',
      });
    }
    // Only once the id is known to be a safe string: a template of any other value can throw (`{ toString: 1 }`).
    this.#createdIds.add(`${type}/${answer.id as string}`);
    return answer as StoredResource;
  }

  async get<R extends Resource = Resource>(type: ResourceType, id: string, signal?: AbortSignal): Promise<R> {
    const answer = (await this.#single({
      operation: 'get',
      resourceType: type,
      resourceId: id,
      method: 'GET',
      url: `${this.settings.baseUrl}/${type}/${encodeURIComponent(id)}`,
      signal,
    })) as Resource;
    this.#checkSame('get', type, id, answer);
    return answer as R;
  }

  /** Sends the whole resource including `id` with the configured update route (default `PUT {type}/{id}`). */
  async update(type: WritableType, id: string, body: Resource, signal?: AbortSignal): Promise<StoredResource> {
    const route = this.settings.updateRoutes[type];
    const path = route.path.replace('{type}', type).replace('{id}', encodeURIComponent(id));
    const answer = (await this.#single({
      operation: 'update',
      resourceType: type,
      resourceId: id,
      method: route.method,
      url: `${this.settings.baseUrl}/${path.replace(/^\/+/, '')}`,
      body: { ...body, id },
      signal,
    })) as Resource;
    this.#checkSame('update', type, id, answer);
    return answer as StoredResource;
  }

  /** A read or update answer must be the resource asked for: its type, and its id when it carries one. */
  #checkSame(operation: 'get' | 'update', type: string, id: string, answer: Resource): void {
    let problem: string | undefined;
    if (answer.resourceType !== type) problem = `it is a ${show(answer.resourceType)} resource, not a ${type}`;
    else if (answer.id !== undefined && answer.id !== id) problem = `it carries the id ${show(answer.id)}`;
    if (problem) throw new ProtocolError(`${operation} ${type}/${id}: the server's answer is not that resource: ${problem}`, { operation });
  }

  /** Every resource of a type, page after page, following the bundle's `next` link (never building page URLs). */
  async *list<R extends Resource = Resource>(type: ResourceType, opts: ListOptions = {}): AsyncGenerator<R> {
    for await (const page of this.pages<R>(type, opts)) {
      for (const e of page.entry ?? []) yield e.resource;
    }
  }

  /**
   * Pages of a list, following `next` links. `pageSize` is asked for with `_count`, which the specification
   * does not show: a server that answers 400 to it is asked again without it (and not asked again by this
   * client), so listing works on servers that accept no query parameter at all.
   */
  async *pages<R extends Resource = Resource>(type: ResourceType, opts: ListOptions = {}): AsyncGenerator<Bundle<R>> {
    const firstUrl = (withCount: boolean): string => {
      const first = new URL(`${this.settings.baseUrl}/${type}`);
      for (const [k, v] of Object.entries(opts.query ?? {})) first.searchParams.set(k, v);
      if (withCount && opts.pageSize !== undefined) first.searchParams.set('_count', String(opts.pageSize));
      return first.toString();
    };
    let withCount = opts.pageSize !== undefined && !this.#countRejected;
    const maxPages = opts.maxPages ?? this.settings.maxPages;
    const staleLimit = Math.max(1, opts.stalePageLimit ?? STALE_PAGE_LIMIT);
    const seen = new Set<string>();
    /** Ids of the last `staleLimit` pages; `stale`: pages in a row that brought none outside it. */
    const recent: Set<string>[] = [];
    let stale = 0;
    let read = 0;
    if (opts.from !== undefined && new URL(opts.from).origin !== this.#origin)
      throw new ProtocolError(`list ${type}: refusing to read a page on another origin (${new URL(opts.from).origin})`, { operation: 'list' });
    let url: string | undefined = opts.from ?? firstUrl(withCount);
    while (url) {
      seen.add(url);
      opts.onPageUrl?.(url);
      let bundle: Bundle<R>;
      try {
        bundle = (await this.#single({ operation: 'list', resourceType: type, method: 'GET', url, signal: opts.signal, retry: opts.retry })) as Bundle<R>;
      } catch (err) {
        if (!(withCount && opts.from === undefined && seen.size === 1 && err instanceof ApiError && err.status === 400)) throw err;
        this.#countRejected = true;
        withCount = false;
        seen.clear();
        url = firstUrl(false);
        continue;
      }
      if (bundle.resourceType !== 'Bundle') throw new ProtocolError(`list ${type}: expected a Bundle, got ${show(bundle.resourceType)}`, { operation: 'list' });
      for (const field of ['entry', 'link'] as const) {
        const v: unknown = bundle[field];
        const kind = typeof v;
        if (v != null && !Array.isArray(v))
          throw new ProtocolError(`list ${type}: the Bundle's ${field} is ${/^[aeiou]/.test(kind) ? 'an' : 'a'} ${kind}, not an array (page ${read + 1})`, {
            operation: 'list',
          });
      }
      read++;
      const ids = new Set<string>();
      for (const e of bundle.entry ?? []) {
        const id = (e as { resource?: { id?: unknown } } | null)?.resource?.id;
        if (typeof id === 'string') ids.add(id);
      }
      let fresh = false;
      for (const id of ids) {
        if (!recent.some((r) => r.has(id))) {
          fresh = true;
          break;
        }
      }
      stale = fresh ? 0 : stale + 1;
      recent.push(ids);
      if (recent.length > staleLimit) recent.shift();
      yield bundle;
      const next = bundle.link?.find((l) => l?.relation === 'next')?.url;
      if (!next) break;
      this.#servedPageSize = bundle.entry?.length ?? 0;
      const nextUrl: URL = new URL(next, url);
      // The key travels with every request: never follow a link off the configured origin.
      if (nextUrl.origin !== this.#origin)
        throw new ProtocolError(`list ${type}: refusing to follow a next link to another origin (${nextUrl.origin})`, { operation: 'list' });
      if (seen.has(nextUrl.toString())) throw new ProtocolError(`list ${type}: the server's next link repeats an earlier page`, { operation: 'list' });
      if (stale >= staleLimit) {
        throw new ProtocolError(
          `list ${type}: the server's next links do not progress: the last ${stale} pages brought no resource that was not on the pages before them (${read} pages read)`,
          {
            operation: 'list',
            hint: "The server's paging is broken: report it to the service operator. Nothing is lost: run again once it is fixed.",
          },
        );
      }
      if (read >= maxPages) {
        throw new ProtocolError(`list ${type}: the server's next links go on past ${maxPages} pages (--max-pages)`, {
          operation: 'list',
          hint: 'If the server really holds that many pages, raise --max-pages (or ask for larger pages); otherwise its paging is broken: report it to the service operator.',
        });
      }
      url = nextUrl.toString();
    }
  }

  /**
   * Resources on the last page this client read that linked to a next one: the page size the server serves, which
   * may be smaller than the `_count` asked for (a server that ignores it, or caps it). Undefined until such a page.
   */
  get servedPageSize(): number | undefined {
    return this.#servedPageSize;
  }

  #servedPageSize: number | undefined;

  /** False once the server answered 400 to `_count` (lists are then asked for without it). */
  get pageSizeAccepted(): boolean {
    return !this.#countRejected;
  }

  async close(): Promise<void> {
    if (this.#ownsDispatcher) await this.#dispatcher.close();
  }

  /** Retry options honouring Retry-After up to `--max-retry-after` (a longer one stops the command: see `answerOf`). */
  retryOptions(retry: RetryOptions = {}): RetryOptions {
    return { retryAfterCapMs: this.settings.maxRetryAfterMs ?? CONNECTION_DEFAULTS.maxRetryAfterMs, ...retry };
  }

  #single(call: Call): Promise<unknown> {
    const retry = call.retry ?? this.#retry;
    if (retry === false) return this.#attempt(call);
    return withRetry(() => this.#attempt(call), classifyRetry, { ...this.retryOptions(retry), signal: call.signal ?? retry.signal });
  }

  /** A type's create URL, built once (the same string each time: `#target` finds it at once). */
  #createUrl(type: WritableType): string {
    let url = this.#createUrls.get(type);
    if (url === undefined) this.#createUrls.set(type, (url = `${this.settings.baseUrl}/${type}`));
    return url;
  }

  readonly #createUrls = new Map<WritableType, string>();

  /** Where a URL's request goes, parsed once per URL for the few this client sends most (each type's create). */
  #target(url: string): { origin: string; path: string } {
    let t = this.#targets.get(url);
    if (!t) {
      const u = new URL(url);
      t = { origin: u.origin, path: u.pathname + u.search };
      if (this.#targets.size < 64) this.#targets.set(url, t);
    }
    return t;
  }

  readonly #targets = new Map<string, { origin: string; path: string }>();

  /**
   * Ends `attempt` when `signal` aborts — one listener per signal for all its attempts, not one added and removed
   * per request (issue 28 item 3). Returns the attempt's release.
   */
  #watch(signal: AbortSignal, attempt: AttemptAbort): () => void {
    let attempts = this.#attemptsOf.get(signal);
    if (!attempts) {
      const watched = new Set<AttemptAbort>();
      signal.addEventListener(
        'abort',
        () => {
          for (const a of watched) a.fire(signal.reason);
        },
        { once: true },
      );
      this.#attemptsOf.set(signal, watched);
      attempts = watched;
    }
    attempts.add(attempt);
    const set = attempts;
    return () => set.delete(attempt);
  }

  readonly #attemptsOf = new WeakMap<AbortSignal, Set<AttemptAbort>>();

  /** What a failure without an HTTP answer becomes (the caller's own abort stays what it is). */
  #noAnswer(call: Call, path: string, err: unknown, inBody: boolean, timedOut: boolean): unknown {
    const where = { operation: call.operation, resourceType: call.resourceType, resourceId: call.resourceId, method: call.method, path };
    const { requestTimeoutMs } = this.settings;
    if (timedOut) {
      return new TransportError({
        ...where,
        failure: 'timeout',
        requestSent: true,
        detail: `no complete answer within ${requestTimeoutMs} ms`,
        hint: 'The service did not answer in time (the --timeout deadline covers the whole answer); run again later (re-runs are safe), or raise --timeout.',
      });
    }
    if (call.signal?.aborted) return err;
    const proxyStatus = this.#proxy && !inBody ? proxyFailureStatus(err, this.#proxy) : undefined;
    if (proxyStatus !== undefined) return new ProxyError({ ...where, proxy: this.#proxy!, status: proxyStatus || undefined, code: errorCode(err) });
    if (isAbort(err)) return err;
    const code = errorCode(err);
    if (inBody) return new TransportError({ ...where, failure: code === 'UND_ERR_BODY_TIMEOUT' ? 'timeout' : 'reset', requestSent: true, code });
    const notSent = code ? NOT_SENT_CODES[code] : undefined;
    const sent = code ? SENT_CODES[code] : undefined;
    return new TransportError({ ...where, failure: notSent ?? sent ?? 'other', requestSent: notSent === undefined, code });
  }

  /**
   * One HTTP exchange, bounded twice: `requestTimeoutMs` from the request to the answer's last byte (a server
   * trickling its body byte by byte is cut off like a silent one — undici's own time-outs only bound the gaps),
   * and `maxResponseBytes` on the body, read incrementally.
   */
  async #attempt(call: Call): Promise<unknown> {
    const path = call.url.slice(this.#origin.length);
    const started = performance.now();
    const { requestTimeoutMs, maxResponseBytes } = this.settings;
    call.signal?.throwIfAborted();
    const attempt = new AttemptAbort();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      attempt.fire(new DeadlineExceeded());
    }, requestTimeoutMs);
    const unwatch = call.signal ? this.#watch(call.signal, attempt) : undefined;
    let status: number | 'error' = 'error';
    try {
      let res: Answer;
      try {
        const target = this.#target(call.url);
        res = await exchange(
          this.#dispatcher,
          {
            origin: target.origin,
            path: target.path,
            method: call.method,
            headers: call.body === undefined ? this.#headers : this.#jsonHeaders,
            body: call.body === undefined ? undefined : JSON.stringify(call.body),
          },
          maxResponseBytes,
          attempt,
        );
      } catch (err) {
        if (!(err instanceof ExchangeFailure)) throw err;
        throw this.#noAnswer(call, path, err.error, err.inBody, timedOut);
      }
      status = res.statusCode;
      return answerOf(call, path, res, res.raw, maxResponseBytes, this.settings.maxRetryAfterMs ?? CONNECTION_DEFAULTS.maxRetryAfterMs);
    } finally {
      clearTimeout(timer);
      unwatch?.();
      this.#onResponse?.({ method: call.method, path, status, ms: performance.now() - started });
    }
  }
}

/**
 * What a fully read answer means: the JSON object of a 2xx, else the error its status says (401/403: an
 * `AuthenticationError`). `raw` undefined = the body was over `maxResponseBytes`.
 */
function answerOf(call: Call, path: string, res: Answer, raw: Buffer | undefined, maxResponseBytes: number, maxRetryAfterMs: number): unknown {
  const ok = res.statusCode >= 200 && res.statusCode < 300;
  if (raw === undefined && ok) {
    throw new ResponseTooLargeError(
      `${call.operation} ${call.resourceType}: the server's answer is larger than ${maxResponseBytes} bytes (--max-response-bytes); not retried — it would be as large again (${call.method} ${path})`,
      { operation: call.operation, limit: maxResponseBytes },
    );
  }
  // An error status with an oversize body: the status says enough, the body is not read.
  let json: unknown;
  try {
    json = raw?.length ? JSON.parse(UTF8.decode(raw)) : undefined;
  } catch {
    json = undefined;
  }
  if (ok) {
    if (!json || typeof json !== 'object' || Array.isArray(json)) {
      throw new ProtocolError(`${call.operation} ${call.resourceType}: HTTP ${res.statusCode} without a JSON object body (${call.method} ${path})`, {
        operation: call.operation,
        ambiguous: call.operation === 'create',
      });
    }
    return json;
  }
  const outcome =
    json && typeof json === 'object' && (json as { resourceType?: unknown }).resourceType === 'OperationOutcome'
      ? ((json as { issue?: OperationOutcomeIssue[] }).issue ?? [])
      : undefined;
  const init = {
    status: res.statusCode,
    operation: call.operation,
    resourceType: call.resourceType,
    resourceId: call.resourceId,
    method: call.method,
    path,
    outcome: Array.isArray(outcome) ? outcome : undefined,
    retryAfterMs: parseRetryAfter(res.headers['retry-after']),
    sentValues: call.body === undefined ? undefined : sentTextValues(call.body),
  };
  if (res.statusCode === 401 || res.statusCode === 403) throw new AuthenticationError(init);
  // A wait the retry would honour (see classifyRetry), longer than the cap: stop rather than hold the run for hours.
  const honoured = res.statusCode === 429 || (res.statusCode === 503 && call.method !== 'POST');
  if (honoured && init.retryAfterMs !== undefined && init.retryAfterMs > maxRetryAfterMs) {
    throw new RetryAfterTooLongError({ ...init, retryAfterMs: init.retryAfterMs, capMs: maxRetryAfterMs });
  }
  throw new ApiError(init);
}
