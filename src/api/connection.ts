import { CareEtlError, type Issue } from '../core/issues.js';
import { Secret, registerSecret } from '../core/secret.js';

export const WRITABLE_TYPES = ['Patient', 'Practitioner', 'CareTeam'] as const;
export type WritableType = (typeof WRITABLE_TYPES)[number];
export type ResourceTypeName = WritableType | 'Observation';

export type UpdateMethod = 'PUT' | 'PATCH' | 'POST';

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
  /** Time-outs in ms (undici defaults are 300 s, far too long for a batch loader). */
  connectTimeoutMs: number;
  requestTimeoutMs: number;
  /** Keep-alive sockets to the origin. */
  connections: number;
}

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
  connections?: number;
}

export const ENV = {
  baseUrl: 'CARE_BASE_URL',
  apiKey: 'CARE_API_KEY',
  emrId: 'CARE_EMR_ID',
  tenantId: 'CARE_TENANT_ID',
} as const;

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

export function isLoopbackHost(hostname: string): boolean {
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
  const missing = (field: string, flag: string, env: string) =>
    issues.push({ severity: 'error', code: 'required', path: field, message: `Expected ${flag} or ${env} to be set` });

  const rawBase = pick('baseUrl');
  const apiKey = pick('apiKey');
  const emrId = pick('emrId');
  const tenantId = pick('tenantId');
  if (!rawBase) missing('baseUrl', '`--base-url`', ENV.baseUrl);
  if (!apiKey) missing('apiKey', '`--api-key`', ENV.apiKey);
  if (!emrId) missing('emrId', '`--emr-id`', ENV.emrId);
  if (!tenantId) missing('tenantId', '`--tenant-id`', ENV.tenantId);

  let baseUrl = '';
  if (rawBase) {
    let url: URL | undefined;
    try {
      url = new URL(rawBase);
    } catch {
      issues.push({ severity: 'error', code: 'invalid', path: 'baseUrl', message: `Expected \`--base-url\` to be an absolute http(s) URL, got \`${rawBase}\`` });
    }
    if (url) {
      if (url.protocol !== 'https:' && url.protocol !== 'http:') {
        issues.push({ severity: 'error', code: 'invalid', path: 'baseUrl', message: `Expected \`--base-url\` to use https, got \`${url.protocol}\`` });
      } else if (url.protocol === 'http:' && !isLoopbackHost(url.hostname) && !pick('allowInsecure')) {
        issues.push({
          severity: 'error',
          code: 'insecure',
          path: 'baseUrl',
          message: `Refusing plain http:// to ${url.hostname}: the API key and patient data would travel unencrypted. Use https, or pass --allow-insecure`,
        });
      }
      if (url.username || url.password || url.search || url.hash) {
        issues.push({ severity: 'error', code: 'invalid', path: 'baseUrl', message: 'Expected `--base-url` without credentials, query or fragment' });
      }
      baseUrl = `${url.origin}${url.pathname}`.replace(/\/+$/, '');
    }
  }

  const updateRoutes = {} as Record<WritableType, UpdateRoute>;
  const configured = pick('updateRoutes') ?? {};
  for (const type of WRITABLE_TYPES) {
    const c = configured[type];
    const route: UpdateRoute = typeof c === 'string' ? { ...DEFAULT_UPDATE_ROUTE, method: c } : { ...DEFAULT_UPDATE_ROUTE, ...(c ?? {}) };
    if (!['PUT', 'PATCH', 'POST'].includes(route.method)) {
      issues.push({ severity: 'error', code: 'invalid', path: `updateMethod.${type}`, message: `Expected the update method of ${type} to be PUT, PATCH or POST, got \`${route.method}\`` });
    }
    if (!route.path.includes('{id}')) {
      issues.push({ severity: 'error', code: 'invalid', path: `updateMethod.${type}.path`, message: `Expected the update path of ${type} to contain \`{id}\`, got \`${route.path}\`` });
    }
    updateRoutes[type] = route;
  }

  const positiveInt = (k: 'connectTimeoutMs' | 'requestTimeoutMs' | 'connections', dflt: number, label: string): number => {
    const v = pick(k);
    if (v === undefined) return dflt;
    if (!Number.isInteger(v) || v < 1) issues.push({ severity: 'error', code: 'invalid', path: k, message: `Expected \`${label}\` to be an integer ≥ 1, got \`${v}\`` });
    return v;
  };
  const connectTimeoutMs = positiveInt('connectTimeoutMs', 10_000, '--connect-timeout');
  const requestTimeoutMs = positiveInt('requestTimeoutMs', 30_000, '--timeout');
  const connections = positiveInt('connections', 32, '--connections');

  if (issues.length) {
    throw new CareEtlError('The connection settings are incomplete or invalid', {
      issues,
      hint: 'Set them with flags, CARE_* environment variables, or the mapping file\'s `target:` section.',
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
    connections,
  };
}
