import { CareEtlError, issue, type Issue } from '../core/issues.js';
import { Secret, registerSecret } from '../core/secret.js';
import { UPDATE_METHODS, WRITABLE_TYPES, type UpdateMethod, type WritableType } from '../schemas/resource-types.js';

/**
 * The spec does not show the update operation ("not shown", "contains `{id}`"), and says the method may
 * differ per resource kind. Default: `PUT {base}/{Type}/{id}` with the full resource; configurable per type.
 */
export interface UpdateRoute {
  method: UpdateMethod;
  /** Path template relative to the base URL; `{type}` and `{id}` are substituted. */
  path: string;
}
export const DEFAULT_UPDATE_ROUTE: UpdateRoute = { method: 'PUT', path: '{type}/{id}' };

export interface ConnectionSettings {
  /** Base URL of the service, without trailing slash. */
  baseUrl: string;
  apiKey: Secret;
  emrId: string;
  tenantId: string;
  updateRoutes: Record<WritableType, UpdateRoute>;
  /** Time-out of opening a connection (TCP, TLS, proxy tunnel), ms (default 10 000, `--connect-timeout`). */
  connectTimeoutMs: number;
  /**
   * Overall deadline of one HTTP attempt, ms (default 30 000, `--timeout`): from sending the request to the
   * last byte of the answer — headers and the whole body, however slowly it trickles in. A retried request
   * gets this again per attempt.
   */
  requestTimeoutMs: number;
  /** Largest answer body read, bytes (default 32 MiB, `--max-response-bytes`); a larger one fails, not retried. */
  maxResponseBytes: number;
  /** Most pages one listing follows through `next` links (default 100 000, `--max-pages`). */
  maxPages: number;
  /** Keep-alive sockets to the origin. */
  connections: number;
  /**
   * Longest Retry-After honoured, ms (default 120 000, `--max-retry-after`); a longer one stops the command
   * (RetryAfterTooLongError, exit 3). Optional so that hand-built settings keep the default.
   */
  maxRetryAfterMs?: number;
}

export const CONNECTION_DEFAULTS = {
  connectTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  maxResponseBytes: 32 * 1024 * 1024,
  maxPages: 100_000,
  connections: 32,
  maxRetryAfterMs: 120_000,
} as const;
/**
 * Keep-alive sockets for a load whose window can reach `windowMax` requests in flight: the window plus a quarter (at
 * least 8), and never fewer than the client's default. undici gives a socket back to its pool one loop turn after the
 * answer on it was read, so with one socket per request a request sent in an answer's callback would wait for that turn;
 * a spare socket takes it at once. The server still never sees more than the window (the limiter bounds the requests
 * outstanding, not the sockets). docs/design/adaptive-concurrency.md, "Spare sockets".
 */
export function socketsForWindow(windowMax: number): number {
  return Math.max(CONNECTION_DEFAULTS.connections, windowMax + Math.max(8, Math.ceil(windowMax / 4)));
}
/** Above this a body could not be decoded into one string anyway (V8's string length limit is ~512 MiB). */
export const MAX_RESPONSE_BYTES_LIMIT = 256 * 1024 * 1024;
const MAX_TIMER_MS = 2_147_483_647;

/** What a user can set, from flags, environment or the mapping file's `target:`. */
export interface ConnectionInput {
  baseUrl?: string;
  apiKey?: string | Secret;
  emrId?: string;
  tenantId?: string;
  allowInsecure?: boolean;
  updateRoutes?: Partial<Record<WritableType, Partial<UpdateRoute> | UpdateMethod>>;
  connectTimeoutMs?: number;
  requestTimeoutMs?: number;
  maxResponseBytes?: number;
  maxPages?: number;
  connections?: number;
  maxRetryAfterMs?: number;
  /**
   * `--sandbox` (command line only; `resolveConnection` ignores it): load into the embedded sandbox even when CARE_*
   * variables, `CI` or the mapping's `target:` suggest a real server (src/target/open-target.ts).
   */
  embeddedSandbox?: boolean;
}

export const ENV = {
  baseUrl: 'CARE_BASE_URL',
  apiKey: 'CARE_API_KEY',
  emrId: 'CARE_EMR_ID',
  tenantId: 'CARE_TENANT_ID',
} as const;

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

function isLoopbackHost(hostname: string): boolean {
  return LOOPBACK.has(hostname) || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

/** Connection settings from the environment (CARE_*). */
export function connectionFromEnv(env: NodeJS.ProcessEnv = process.env): ConnectionInput {
  return {
    baseUrl: env[ENV.baseUrl] || undefined,
    apiKey: env[ENV.apiKey] || undefined,
    emrId: env[ENV.emrId] || undefined,
    tenantId: env[ENV.tenantId] || undefined,
  };
}

/** True when no layer names a server: `run` then uses the embedded sandbox. */
export function hasTarget(...layers: (ConnectionInput | undefined)[]): boolean {
  return layers.some((l) => l?.baseUrl);
}

/**
 * Merges layers, the first one that sets a field wins (flags, then environment, then the mapping file),
 * and checks the result. Every problem is reported at once.
 */
export function resolveConnection(...layers: (ConnectionInput | undefined)[]): ConnectionSettings {
  const pick = <K extends keyof ConnectionInput>(k: K): ConnectionInput[K] => {
    for (const l of layers) if (l && l[k] !== undefined && l[k] !== '') return l[k];
    return undefined;
  };
  const issues: Issue[] = [];
  const missing = (field: string, flag: string, env: string) => issues.push(issue.error('required', `Expected ${flag} or ${env} to be set`, { path: field }));

  const rawBase = pick('baseUrl');
  const apiKey = pick('apiKey');
  const emrId = pick('emrId');
  const tenantId = pick('tenantId');
  if (!rawBase) missing('baseUrl', '`--base-url`', ENV.baseUrl);
  if (!apiKey) missing('apiKey', '`--api-key`', ENV.apiKey);
  if (!emrId) missing('emrId', '`--emr-id`', ENV.emrId);
  if (!tenantId) missing('tenantId', '`--tenant-id`', ENV.tenantId);

  const baseUrl = rawBase ? checkBaseUrl(rawBase, Boolean(pick('allowInsecure')), issues) : '';
  const updateRoutes = checkUpdateRoutes(pick('updateRoutes') ?? {}, issues);

  const positiveInt = (
    k: 'connectTimeoutMs' | 'requestTimeoutMs' | 'maxResponseBytes' | 'maxPages' | 'connections',
    label: string,
    max = Number.MAX_SAFE_INTEGER,
  ): number => {
    const v = pick(k);
    if (v === undefined) return CONNECTION_DEFAULTS[k];
    if (!Number.isInteger(v) || v < 1 || v > max) {
      const range = max === Number.MAX_SAFE_INTEGER ? '≥ 1' : `from 1 to ${max}`;
      issues.push(issue.invalid(`Expected \`${label}\` to be an integer ${range}, got \`${v}\``, { path: k }));
    }
    return v;
  };
  // Longer delays overflow Node's timers (they would fire at once).
  const connectTimeoutMs = positiveInt('connectTimeoutMs', '--connect-timeout', MAX_TIMER_MS);
  const requestTimeoutMs = positiveInt('requestTimeoutMs', '--timeout', MAX_TIMER_MS);
  const maxResponseBytes = positiveInt('maxResponseBytes', '--max-response-bytes', MAX_RESPONSE_BYTES_LIMIT);
  const maxPages = positiveInt('maxPages', '--max-pages');
  const connections = positiveInt('connections', '--connections');
  const maxRetryAfterMs = pick('maxRetryAfterMs') ?? CONNECTION_DEFAULTS.maxRetryAfterMs;
  if (!Number.isFinite(maxRetryAfterMs) || maxRetryAfterMs < 0 || maxRetryAfterMs > MAX_TIMER_MS) {
    issues.push(
      issue.invalid(`Expected \`--max-retry-after\` to be a duration from 0 to ${MAX_TIMER_MS} ms, got \`${maxRetryAfterMs}\``, { path: 'maxRetryAfterMs' }),
    );
  }

  if (issues.length) {
    throw new CareEtlError('The connection settings are incomplete or invalid', {
      issues,
      hint: "Set them with flags, CARE_* environment variables, or the mapping file's `target:` section.",
      exitCode: 2,
    });
  }
  registerSecret(apiKey);
  return {
    baseUrl,
    apiKey: apiKey instanceof Secret ? apiKey : new Secret(apiKey as string),
    emrId: emrId as string,
    tenantId: tenantId as string,
    updateRoutes,
    connectTimeoutMs,
    requestTimeoutMs,
    maxResponseBytes,
    maxPages,
    connections,
    maxRetryAfterMs,
  };
}

/** The base URL without trailing slashes; problems (not http(s), plain http to another host, credentials) into `issues`. */
function checkBaseUrl(rawBase: string, allowInsecure: boolean, issues: Issue[]): string {
  let url: URL;
  try {
    url = new URL(rawBase);
  } catch {
    issues.push(issue.invalid(`Expected \`--base-url\` to be an absolute http(s) URL, got \`${rawBase}\``, { path: 'baseUrl' }));
    return '';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    issues.push(issue.invalid(`Expected \`--base-url\` to use https, got \`${url.protocol}\``, { path: 'baseUrl' }));
  } else if (url.protocol === 'http:' && !isLoopbackHost(url.hostname) && !allowInsecure) {
    const message = `Refusing plain http:// to ${url.hostname}: the API key and patient data would travel unencrypted. Use https, or pass --allow-insecure`;
    issues.push(issue.error('insecure', message, { path: 'baseUrl' }));
  }
  if (url.username || url.password || url.search || url.hash) {
    issues.push(issue.invalid('Expected `--base-url` without credentials, query or fragment', { path: 'baseUrl' }));
  }
  return `${url.origin}${url.pathname}`.replace(/\/+$/, '');
}

/** Each writable type's update route (configured or the default); problems into `issues`. */
function checkUpdateRoutes(configured: NonNullable<ConnectionInput['updateRoutes']>, issues: Issue[]): Record<WritableType, UpdateRoute> {
  const updateRoutes = {} as Record<WritableType, UpdateRoute>;
  for (const type of WRITABLE_TYPES) {
    const c = configured[type];
    const route: UpdateRoute = typeof c === 'string' ? { ...DEFAULT_UPDATE_ROUTE, method: c } : { ...DEFAULT_UPDATE_ROUTE, ...(c ?? {}) };
    if (!(UPDATE_METHODS as readonly string[]).includes(route.method)) {
      const methods = `${UPDATE_METHODS.slice(0, -1).join(', ')} or ${UPDATE_METHODS.at(-1)}`;
      issues.push(issue.invalid(`Expected the update method of ${type} to be ${methods}, got \`${route.method}\``, { path: `updateMethod.${type}` }));
    }
    if (!route.path.includes('{id}')) {
      issues.push(issue.invalid(`Expected the update path of ${type} to contain \`{id}\`, got \`${route.path}\``, { path: `updateMethod.${type}.path` }));
    }
    updateRoutes[type] = route;
  }
  return updateRoutes;
}

// ---------------------------------------------------------------- issue 25 (settings): which proxy a request goes through
/** A proxy named in messages: the variable it came from and its `host:port` (never its credentials). */
export interface ProxyAddress {
  variable: string;
  host: string;
  port: number;
}

/**
 * The proxy a request to `baseUrl` would go through when one goes through a proxy at all (NO_PROXY aside: a failure
 * only a proxy gives — a 407, a refused CONNECT — says one was used): https targets `https_proxy` / `HTTPS_PROXY`,
 * else `http_proxy` / `HTTP_PROXY`; plain http targets the latter. Lower case wins when set, as in `createDispatcher`.
 */
export function proxyFor(baseUrl: string, env: NodeJS.ProcessEnv = process.env): ProxyAddress | undefined {
  const set = (lower: string, upper: string): string | undefined => {
    const name = env[lower] !== undefined ? lower : upper;
    return env[name]?.trim() ? name : undefined;
  };
  const variable = (baseUrl.startsWith('https:') ? set('https_proxy', 'HTTPS_PROXY') : undefined) ?? set('http_proxy', 'HTTP_PROXY');
  if (!variable) return undefined;
  let value = env[variable]!.trim();
  if (!value.includes('://')) value = `http://${value}`;
  if (!URL.canParse(value)) return undefined;
  const url = new URL(value);
  return { variable, host: url.hostname, port: Number(url.port) || (url.protocol === 'https:' ? 443 : 80) };
}
