import { CareEtlError, ExitCode, foreignCode, type Issue } from '../core/issues.js';
import { redactKnown } from '../core/secret.js';

export type Operation = 'create' | 'get' | 'list' | 'update';

export interface OperationOutcomeIssue {
  severity?: string;
  code?: string;
  diagnostics?: string;
  details?: { text?: string };
  expression?: string[];
}

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
}

function outcomeToIssues(outcome: OperationOutcomeIssue[] | undefined): Issue[] {
  return (outcome ?? []).map((i) => ({
    severity: i.severity === 'warning' || i.severity === 'information' || i.severity === 'fatal' ? i.severity : 'error',
    code: i.code ? foreignCode(i.code) : 'exception',
    // Some gateways echo the request (headers included) in their diagnostics.
    message: redactKnown(String(i.diagnostics ?? i.details?.text ?? 'no details given by the server')),
    path: i.expression?.[0],
  }));
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
    const issues = outcomeToIssues(init.outcome);
    const detail = issues.length ? `: ${issues.map((i) => (i.path ? `${i.path}: ` : '') + i.message).join('; ')}` : '';
    // A 404 on a collection (no id) means the endpoint itself is missing: the base URL lacks the API's path.
    const noEndpoint = init.status === 404 && !init.resourceId;
    super(`${init.operation} ${target} failed with HTTP ${init.status} (${init.method} ${init.path})${detail}`, {
      issues,
      hint:
        hint ??
        (noEndpoint
          ? 'The server has no such endpoint: check that --base-url / CARE_BASE_URL includes the API\'s path (e.g. https://host/api/v1).'
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

  override toIssues(): Issue[] {
    const head: Issue = { severity: 'error', code: `http-${this.status}`, message: this.message };
    return [head, ...this.issues.map((i) => ({ ...i }))];
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

  constructor(
    init: { failure: TransportFailure; requestSent: boolean; operation: Operation; resourceType: string; resourceId?: string; method: string; path: string; code?: string },
  ) {
    super(`${init.operation} ${init.resourceType}${init.resourceId ? `/${init.resourceId}` : ''}: no answer from the server (${init.failure}${init.code ? `, ${init.code}` : ''}; ${init.method} ${init.path})`, {
      hint:
        init.failure === 'refused' || init.failure === 'dns'
          ? 'Is the base URL right and the service reachable (proxy: HTTPS_PROXY / NO_PROXY)?'
          : 'The service did not answer in time; run again later (re-runs are safe).',
      exitCode: ExitCode.incomplete,
    });
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
    return [{ severity: 'error', code: `transport-${this.failure}`, message: this.message }];
  }

  /** A create that may or may not have been stored: never blindly re-send it; reconcile first. */
  get ambiguous(): boolean {
    return this.requestSent && this.operation === 'create';
  }
}

/** The server answered 2xx with something that is not the expected resource. */
export class ProtocolError extends CareEtlError {
  constructor(message: string) {
    super(redactKnown(message), { exitCode: ExitCode.incomplete });
    this.name = 'ProtocolError';
  }
}
