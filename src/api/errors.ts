import { CareEtlError, ExitCode, issue, type Issue } from '../core/issues.js';
import { redactKnown } from '../core/secret.js';
import type { ProxyAddress } from './connection.js';
import { outcomeSummary, outcomeToIssues, type OperationOutcomeIssue } from './outcome.js';

export type Operation = 'create' | 'get' | 'list' | 'update';

export type { OperationOutcomeIssue } from './outcome.js';

interface ApiErrorInit {
  status: number;
  operation: Operation;
  resourceType: string;
  resourceId?: string;
  method: string;
  /** Path relative to the base URL; never holds credentials. */
  path: string;
  outcome?: OperationOutcomeIssue[];
  retryAfterMs?: number;
  /** Text values of the resource sent (names, dates…): masked where the server's diagnostics echo them. */
  sentValues?: string[];
}

/** The text values of a resource worth masking in an echo (not its type, ids, references or code systems). */
export function sentTextValues(body: unknown): string[] {
  const out = new Set<string>();
  const walk = (v: unknown, key?: string): void => {
    if (typeof v === 'string') {
      if (v.length >= 2 && key !== 'resourceType' && key !== 'system' && key !== 'reference' && key !== 'id') out.add(v);
    } else if (Array.isArray(v)) for (const x of v) walk(x, key);
    else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(x, k);
  };
  walk(body);
  // Longest first: "Annabel" masked whole before "Ann" could leave "…abel".
  return [...out].sort((a, b) => b.length - a.length);
}

/** The server answered with a non-2xx status. */
export class ApiError extends CareEtlError {
  readonly status: number;
  readonly operation: Operation;
  readonly resourceType: string;
  readonly resourceId?: string;
  readonly method: string;
  readonly path: string;
  readonly retryAfterMs?: number;

  constructor(init: ApiErrorInit, hint?: string) {
    const target = init.resourceId ? `${init.resourceType}/${init.resourceId}` : init.resourceType;
    const issues = outcomeToIssues(init.outcome, init.sentValues);
    // The message (the ledger's reason, run history, an ending error's first line) names the server's issues by code
    // and path only; their text is on the issues (`serverText`: the rejects file, the terminal).
    const detail = issues.length ? `: ${outcomeSummary(issues)}` : '';
    // A 404 on a collection (no id) means the endpoint itself is missing: the base URL lacks the API's path.
    const noEndpoint = init.status === 404 && !init.resourceId;
    super(`${init.operation} ${target} failed with HTTP ${init.status} (${init.method} ${init.path})${detail}`, {
      issues,
      hint:
        hint ??
        (noEndpoint
          ? "The server has no such endpoint: check that --base-url / CARE_BASE_URL includes the API's path (e.g. https://host/api/v1)."
          : init.status >= 500 || init.status === 429
            ? 'The service is failing or overloaded; run again later (re-runs are safe).'
            : undefined),
      // Per-row errors (400, 409, 422…) are caught and rejected by the loader; one that ends the command means
      // it could not complete.
      exitCode: ExitCode.incomplete,
    });
    this.name = 'ApiError';
    this.status = init.status;
    this.operation = init.operation;
    this.resourceType = init.resourceType;
    this.resourceId = init.resourceId;
    this.method = init.method;
    this.path = init.path;
    this.retryAfterMs = init.retryAfterMs;
  }

  /**
   * A create answered with any 5xx: maybe stored (a gateway answers 502/503/504 after the backend committed), so
   * never re-sent blindly — reconciled through the server index first, like a lost answer.
   */
  get ambiguous(): boolean {
    return this.operation === 'create' && this.status >= 500;
  }

  override toIssues(): Issue[] {
    const head = issue.error(`http-${this.status}`, this.message);
    return [head, ...this.issues.map((i) => ({ ...i }))];
  }
}

/**
 * A 429/503 whose Retry-After asks for a longer wait than `--max-retry-after` (seconds or an HTTP-date, e.g. in
 * 2099): waiting would hold the run for hours, so the command stops (exit 3); what was loaded stays recorded.
 */
export class RetryAfterTooLongError extends CareEtlError {
  readonly retryAfterMs: number;
  readonly capMs: number;

  constructor(init: { status: number; operation: Operation; resourceType: string; method: string; path: string; retryAfterMs: number; capMs: number }) {
    const asked = Math.ceil(init.retryAfterMs / 1000);
    const cap = Math.round(init.capMs / 1000);
    super(
      `${init.operation} ${init.resourceType}: HTTP ${init.status}: the server asked to wait ${asked} s (Retry-After), more than --max-retry-after ${cap} s: stopped (${init.method} ${init.path})`,
      { hint: 'Run again later (re-runs are safe: what was loaded stays recorded), or raise --max-retry-after.', exitCode: ExitCode.incomplete },
    );
    this.name = 'RetryAfterTooLongError';
    this.retryAfterMs = init.retryAfterMs;
    this.capMs = init.capMs;
  }

  override toIssues(): Issue[] {
    return [issue.error('retry-after-too-long', this.message)];
  }
}

/** 401/403: the credentials (key, EMR id) or the tenant are wrong; nothing will work until fixed. */
export class AuthenticationError extends ApiError {
  constructor(init: ApiErrorInit) {
    super(
      init,
      init.status === 403
        ? 'The tenant is not known to this key: check --tenant-id / CARE_TENANT_ID.'
        : 'Check the API key (--api-key / CARE_API_KEY) and EMR id (--emr-id / CARE_EMR_ID) issued by the service operator.',
    );
    this.name = 'AuthenticationError';
    (this as { exitCode: number }).exitCode = ExitCode.config;
  }
}

export type TransportFailure = 'timeout' | 'reset' | 'refused' | 'dns' | 'other';

/**
 * No HTTP answer. `requestSent` says whether the server may have received (and acted on) the request:
 * false for refused connections and connect time-outs, true once the request went out.
 */
export class TransportError extends CareEtlError {
  readonly failure: TransportFailure;
  readonly requestSent: boolean;
  readonly operation: Operation;
  readonly resourceType: string;
  readonly resourceId?: string;
  readonly method: string;
  readonly path: string;

  constructor(init: {
    failure: TransportFailure;
    requestSent: boolean;
    operation: Operation;
    resourceType: string;
    resourceId?: string;
    method: string;
    path: string;
    code?: string;
    /** Replaces the failure/code detail in the message, e.g. `no complete answer within 30000 ms`. */
    detail?: string;
    hint?: string;
  }) {
    const detail = init.detail ?? `${init.failure}${init.code ? `, ${init.code}` : ''}`;
    super(
      `${init.operation} ${init.resourceType}${init.resourceId ? `/${init.resourceId}` : ''}: no answer from the server (${detail}; ${init.method} ${init.path})`,
      {
        hint:
          init.hint ??
          (init.failure === 'refused' || init.failure === 'dns'
            ? 'Is the base URL right and the service reachable (proxy: HTTPS_PROXY / NO_PROXY)?'
            : 'The service did not answer in time; run again later (re-runs are safe).'),
        exitCode: ExitCode.incomplete,
      },
    );
    this.name = 'TransportError';
    this.failure = init.failure;
    this.requestSent = init.requestSent;
    this.operation = init.operation;
    this.resourceType = init.resourceType;
    this.resourceId = init.resourceId;
    this.method = init.method;
    this.path = init.path;
  }

  override toIssues(): Issue[] {
    return [issue.error(`transport-${this.failure}`, this.message)];
  }

  /** A create that may or may not have been stored: never blindly re-send it; reconcile first. */
  get ambiguous(): boolean {
    return this.requestSent && this.operation === 'create';
  }
}

/**
 * The server answered 2xx with something that is not the expected resource, or a listing that does not end.
 * Never retried (the same request would get the same answer); a command it ends exits 3.
 */
export class ProtocolError extends CareEtlError {
  readonly operation?: Operation;
  /**
   * A create answered 2xx — so probably stored — whose answer cannot be believed (no id, an id that is not a
   * safe path segment, another resource type, an id already given to another create, not JSON, too large):
   * its outcome is unknown, exactly like a lost answer. The loader reconciles it (looks it up by its match rule
   * before sending anything again) and never records it as synced from this answer.
   */
  readonly ambiguous: boolean;

  constructor(message: string, opts: { operation?: Operation; ambiguous?: boolean; hint?: string } = {}) {
    super(redactKnown(message), { exitCode: ExitCode.incomplete, hint: opts.hint });
    this.name = 'ProtocolError';
    this.operation = opts.operation;
    this.ambiguous = opts.ambiguous ?? false;
  }
}

/** A 2xx answer bigger than `maxResponseBytes`: not retried (it would be as big again). */
export class ResponseTooLargeError extends ProtocolError {
  readonly limit: number;

  constructor(message: string, opts: { operation: Operation; limit: number }) {
    super(message, {
      operation: opts.operation,
      ambiguous: opts.operation === 'create',
      hint: "Raise --max-response-bytes if the server's pages are legitimately this large, or ask for smaller pages (--page-size for export, --index-page-size for run).",
    });
    this.name = 'ResponseTooLargeError';
    this.limit = opts.limit;
  }
}

/** What `isSafeId` accepts, for messages. */
export const SAFE_ID_RULE = 'a FHIR id: 1 to 64 of A-Z a-z 0-9 - ., not only dots';

/**
 * FHIR's id syntax (`[A-Za-z0-9\-.]{1,64}`, hl7.org/fhir/R4/datatypes.html#id), minus `.` and `..` (path
 * traversal once used as a path segment): what care-etl accepts as a server id before it records it, puts it
 * in a reference (the resource schemas require FHIR ids there) or in a URL. Issue 25: a listing holding any
 * other id is refused (src/load/server-index.ts) — leaving the resource out could create it a second time.
 */
export function isSafeId(id: unknown): id is string {
  return typeof id === 'string' && /^[A-Za-z0-9\-.]{1,64}$/.test(id) && !/^\.+$/.test(id);
}

// ---------------------------------------------------------------- issue 25 (settings): the proxy failed, not the server
/**
 * The proxy (HTTPS_PROXY / HTTP_PROXY), not the server, failed the request, which therefore never reached the
 * server: a 407 (its credentials: exit 2, nothing will work until fixed), a CONNECT answered with another status, or
 * the proxy itself unreachable (exit 3). Named by `host:port` and variable, never by its URL (credentials).
 */
export class ProxyError extends CareEtlError {
  /** The proxy's status (407, 502 …); undefined when it could not be reached at all. */
  readonly status?: number;
  readonly operation: Operation;
  readonly method: string;
  readonly path: string;

  constructor(init: { proxy: ProxyAddress; status?: number; code?: string; operation: Operation; resourceType: string; method: string; path: string }) {
    const { proxy, status } = init;
    const at = `the proxy ${proxy.host.includes(':') ? `[${proxy.host}]` : proxy.host}:${proxy.port} (${proxy.variable})`;
    const what =
      status === 407
        ? `${at} refused the credentials (407 Proxy Authentication Required)`
        : status !== undefined
          ? `${at} answered ${status} to the tunnel request (CONNECT): it could not reach the server`
          : `${at} cannot be reached (${init.code ?? 'connection failed'})`;
    super(`${what}; ${init.operation} ${init.resourceType} was not sent to the server (${init.method} ${init.path})`, {
      hint:
        status === 407
          ? `Check the user and password in ${proxy.variable} (http://user:password@host:port, with @ : / % in them percent-encoded), or ask the proxy's operator.`
          : `Check ${proxy.variable} and that the proxy is running and lets this host through (NO_PROXY lists hosts reached directly). Re-runs are safe.`,
      exitCode: status === 407 ? ExitCode.config : ExitCode.incomplete,
    });
    this.name = 'ProxyError';
    this.status = status;
    this.operation = init.operation;
    this.method = init.method;
    this.path = init.path;
  }

  override toIssues(): Issue[] {
    return [issue.error(this.status === 407 ? 'proxy-auth' : 'proxy-failed', this.message)];
  }
}

const TUNNEL_REFUSED = /^Proxy response \((\d{3})\) !== 200 when HTTP Tunneling/;
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * The proxy's status when undici's error is one only a proxy gives (a 407; a CONNECT answered with another status),
 * or 0 when the connection that failed was the one to the proxy; undefined otherwise.
 */
export function proxyFailureStatus(err: unknown, proxy: ProxyAddress): number | undefined {
  for (let e: unknown = err, depth = 0; e && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const { message, code, address, port, hostname } = e as { message?: unknown; code?: unknown; address?: unknown; port?: unknown; hostname?: unknown };
    if (typeof message === 'string') {
      if (message.startsWith('Proxy Authentication Required (407)')) return 407;
      const tunnel = TUNNEL_REFUSED.exec(message);
      if (tunnel) return Number(tunnel[1]);
    }
    if (typeof code === 'string' && UNREACHABLE.has(code)) {
      const host = typeof hostname === 'string' ? hostname : address;
      if (host === proxy.host && (port === undefined || port === proxy.port)) return 0;
    }
  }
  return undefined;
}
