import { Agent, EnvHttpProxyAgent, Pool, request, type Dispatcher } from 'undici';
import type { ConnectionSettings, ResourceTypeName, WritableType } from './connection.js';
import { ApiError, AuthenticationError, ProtocolError, TransportError, type Operation, type OperationOutcomeIssue, type TransportFailure } from './errors.js';
import type { Bundle, Resource, StoredResource } from './types.js';
import { withRetry, type RetryDecision, type RetryOptions } from '../load/retry.js';
import { CareEtlError, ExitCode } from '../core/issues.js';

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
}

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
 * - 429 and 503: the server says it did not process the request (Retry-After honoured);
 * - 502/504 and lost answers: only for GET/PUT/PATCH (repeating them converges to the same state);
 *   for a create they mean "maybe stored", so the loader reconciles instead of re-sending;
 * - connections that never carried the request (refused, connect time-out): always.
 */
export function classifyRetry(err: unknown): RetryDecision {
  if (err instanceof AuthenticationError) return { retry: false };
  if (err instanceof ApiError) {
    if (err.status === 429 || err.status === 503) return { retry: true, delayMs: err.retryAfterMs, reason: `HTTP ${err.status}` };
    if ((err.status === 502 || err.status === 504) && err.method !== 'POST') return { retry: true, reason: `HTTP ${err.status}` };
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
export function createDispatcher(settings: Pick<ConnectionSettings, 'connections' | 'connectTimeoutMs' | 'requestTimeoutMs'>, env: NodeJS.ProcessEnv = process.env): Dispatcher {
  const options = {
    connections: settings.connections,
    keepAliveTimeout: 10_000,
    connect: { timeout: settings.connectTimeoutMs },
    headersTimeout: settings.requestTimeoutMs,
    bodyTimeout: settings.requestTimeoutMs,
  };
  if (!PROXY_VARIABLES.some((k) => env[k])) return new Agent(options);
  const noProxy = env.no_proxy ?? env.NO_PROXY ?? '';
  const proxyUrl = (lower: 'http_proxy' | 'https_proxy', upper: 'HTTP_PROXY' | 'HTTPS_PROXY'): string => {
    const name = env[lower] !== undefined ? lower : upper;
    let value = (env[name] ?? '').trim();
    if (!value) return '';
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
    factory: (origin, opts) => new Pool(origin, { ...options, ...(opts as Pool.Options) }),
  });
}

/** Typed client of the Care Coordination Integration Service API (one instance per base URL + tenant). */
export class CareClient {
  readonly settings: ConnectionSettings;
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;
  readonly #headers: Record<string, string>;
  readonly #origin: string;
  readonly #retry: RetryOptions | false;
  readonly #onResponse?: ClientOptions['onResponse'];
  #countRejected = false;

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
    this.#origin = new URL(settings.baseUrl).origin;
    this.#retry = opts.retry === undefined ? {} : opts.retry;
    this.#onResponse = opts.onResponse;
  }

  create(type: WritableType, body: Resource, signal?: AbortSignal): Promise<StoredResource> {
    if (body.id !== undefined) throw new TypeError(`create ${type}: the body must not carry an id (the server assigns it)`);
    return this.#single({ operation: 'create', resourceType: type, method: 'POST', url: `${this.settings.baseUrl}/${type}`, body, signal }) as Promise<StoredResource>;
  }

  get<R extends Resource = Resource>(type: ResourceTypeName, id: string, signal?: AbortSignal): Promise<R> {
    return this.#single({ operation: 'get', resourceType: type, resourceId: id, method: 'GET', url: `${this.settings.baseUrl}/${type}/${encodeURIComponent(id)}`, signal }) as Promise<R>;
  }

  /** Sends the whole resource including `id` with the configured update route (default `PUT {type}/{id}`). */
  update(type: WritableType, id: string, body: Resource, signal?: AbortSignal): Promise<StoredResource> {
    const route = this.settings.updateRoutes[type];
    const path = route.path.replace('{type}', type).replace('{id}', encodeURIComponent(id));
    return this.#single({
      operation: 'update',
      resourceType: type,
      resourceId: id,
      method: route.method,
      url: `${this.settings.baseUrl}/${path.replace(/^\/+/, '')}`,
      body: { ...body, id },
      signal,
    }) as Promise<StoredResource>;
  }

  /** Every resource of a type, page after page, following the bundle's `next` link (never building page URLs). */
  async *list<R extends Resource = Resource>(type: ResourceTypeName, opts: ListOptions = {}): AsyncGenerator<R> {
    for await (const page of this.pages<R>(type, opts)) {
      for (const e of page.entry ?? []) yield e.resource;
    }
  }

  /**
   * Pages of a list, following `next` links. `pageSize` is asked for with `_count`, which the specification
   * does not show: a server that answers 400 to it is asked again without it (and not asked again by this
   * client), so listing works on servers that accept no query parameter at all.
   */
  async *pages<R extends Resource = Resource>(type: ResourceTypeName, opts: ListOptions = {}): AsyncGenerator<Bundle<R>> {
    const firstUrl = (withCount: boolean): string => {
      const first = new URL(`${this.settings.baseUrl}/${type}`);
      for (const [k, v] of Object.entries(opts.query ?? {})) first.searchParams.set(k, v);
      if (withCount && opts.pageSize !== undefined) first.searchParams.set('_count', String(opts.pageSize));
      return first.toString();
    };
    let withCount = opts.pageSize !== undefined && !this.#countRejected;
    const seen = new Set<string>();
    let url: string | undefined = firstUrl(withCount);
    while (url) {
      seen.add(url);
      let bundle: Bundle<R>;
      try {
        bundle = (await this.#single({ operation: 'list', resourceType: type, method: 'GET', url, signal: opts.signal, retry: opts.retry })) as Bundle<R>;
      } catch (err) {
        if (!(withCount && seen.size === 1 && err instanceof ApiError && err.status === 400)) throw err;
        this.#countRejected = true;
        withCount = false;
        seen.clear();
        url = firstUrl(false);
        continue;
      }
      if (bundle.resourceType !== 'Bundle' || (bundle.entry !== undefined && !Array.isArray(bundle.entry))) {
        throw new ProtocolError(`list ${type}: expected a Bundle, got ${JSON.stringify(bundle.resourceType)}`);
      }
      yield bundle;
      const next = bundle.link?.find((l) => l.relation === 'next')?.url;
      if (!next) break;
      const nextUrl: URL = new URL(next, url);
      // The key travels with every request: never follow a link off the configured origin.
      if (nextUrl.origin !== this.#origin) throw new ProtocolError(`list ${type}: refusing to follow a next link to another origin (${nextUrl.origin})`);
      if (seen.has(nextUrl.toString())) throw new ProtocolError(`list ${type}: the server's next link repeats an earlier page`);
      url = nextUrl.toString();
    }
  }

  /** False once the server answered 400 to `_count` (lists are then asked for without it). */
  get pageSizeAccepted(): boolean {
    return !this.#countRejected;
  }

  async close(): Promise<void> {
    if (this.#ownsDispatcher) await this.#dispatcher.close();
  }

  #single(call: Call): Promise<unknown> {
    const retry = call.retry ?? this.#retry;
    if (retry === false) return this.#attempt(call);
    return withRetry(() => this.#attempt(call), classifyRetry, { ...retry, signal: call.signal ?? retry.signal });
  }

  async #attempt(call: Call): Promise<unknown> {
    const path = call.url.slice(this.#origin.length);
    const started = performance.now();
    let res: Dispatcher.ResponseData;
    try {
      res = await request(call.url, {
        dispatcher: this.#dispatcher,
        method: call.method,
        headers: call.body === undefined ? this.#headers : { ...this.#headers, 'content-type': 'application/json' },
        body: call.body === undefined ? undefined : JSON.stringify(call.body),
        signal: call.signal,
      });
    } catch (err) {
      this.#onResponse?.({ method: call.method, path, status: 'error', ms: performance.now() - started });
      if ((err as { name?: string }).name === 'AbortError' || (err as { code?: string }).code === 'UND_ERR_ABORTED') throw err;
      const code = errorCode(err);
      const notSent = code ? NOT_SENT_CODES[code] : undefined;
      const sent = code ? SENT_CODES[code] : undefined;
      throw new TransportError({
        failure: notSent ?? sent ?? 'other',
        requestSent: notSent === undefined,
        operation: call.operation,
        resourceType: call.resourceType,
        resourceId: call.resourceId,
        method: call.method,
        path,
        code,
      });
    }
    let text: string;
    try {
      text = await res.body.text();
    } catch (err) {
      throw new TransportError({ failure: 'reset', requestSent: true, operation: call.operation, resourceType: call.resourceType, resourceId: call.resourceId, method: call.method, path, code: errorCode(err) });
    }
    this.#onResponse?.({ method: call.method, path, status: res.statusCode, ms: performance.now() - started });
    let json: unknown;
    try {
      json = text.length ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    if (res.statusCode >= 200 && res.statusCode < 300) {
      if (!json || typeof json !== 'object' || Array.isArray(json)) {
        throw new ProtocolError(`${call.operation} ${call.resourceType}: HTTP ${res.statusCode} without a JSON object body (${call.method} ${path})`);
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
      outcome,
      retryAfterMs: parseRetryAfter(res.headers['retry-after']),
    };
    if (res.statusCode === 401 || res.statusCode === 403) throw new AuthenticationError(init);
    throw new ApiError(init);
  }
}
