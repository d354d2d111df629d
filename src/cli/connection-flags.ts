import { Flags } from '@oclif/core';
import type { ConnectionInput } from '../api/connection.js';

/**
 * Connection flags shared by `run`, `export` and `state`. CARE_* variables are read by `resolveConnection`, not by
 * oclif, so that the precedence flags > environment > mapping file `target:` is applied in one place. The bounds
 * (defaults in `CONNECTION_DEFAULTS`, README "Connection settings") end every network wait.
 */
export const connectionFlags = {
  'base-url': Flags.string({ description: 'base URL of the service (or CARE_BASE_URL)', helpGroup: 'CONNECTION' }),
  'api-key': Flags.string({
    summary: 'API key (prefer CARE_API_KEY)',
    description: 'API key (prefer CARE_API_KEY: flags show in process lists)',
    helpGroup: 'CONNECTION',
  }),
  'emr-id': Flags.string({ description: 'EMR id issued by the operator (or CARE_EMR_ID)', helpGroup: 'CONNECTION' }),
  'tenant-id': Flags.string({ description: 'tenant id (or CARE_TENANT_ID)', helpGroup: 'CONNECTION' }),
  'allow-insecure': Flags.boolean({
    summary: 'allow a plain http:// URL not on loopback',
    description: 'allow a plain http:// base URL that is not loopback',
    helpGroup: 'CONNECTION',
  }),
  timeout: Flags.integer({
    summary: 'deadline of an HTTP attempt, ms (default 30000)',
    description: 'deadline of each HTTP attempt in ms, from the request to the last byte of the answer (default 30000)',
    min: 1,
    max: 2_147_483_647,
    helpGroup: 'CONNECTION',
  }),
  'connect-timeout': Flags.integer({
    summary: 'time-out of a connect, ms (default 10000)',
    description: 'time-out of opening a connection in ms (default 10000)',
    min: 1,
    max: 2_147_483_647,
    helpGroup: 'CONNECTION',
  }),
  'max-response-bytes': Flags.integer({
    summary: 'largest answer read (default 32 MiB)',
    description: 'largest answer read, in bytes (default 33554432 = 32 MiB, at most 268435456); a larger one fails the command (exit 3)',
    min: 1,
    max: 268_435_456,
    helpGroup: 'CONNECTION',
  }),
  'max-pages': Flags.integer({
    summary: 'most pages of one listing (default 100000)',
    description: 'most pages one listing follows through next links (default 100000); more fails the command (exit 3)',
    min: 1,
    helpGroup: 'CONNECTION',
  }),
  // Without it, CARE_* variables, CI or a `target:` with no base URL are refused (exit 2) rather than silently
  // loading into the sandbox; with a base URL known it is a usage error (exit 2): one target, said once.
  sandbox: Flags.boolean({
    summary: 'use the embedded sandbox even if a target is set',
    description:
      "use the embedded sandbox (.care-etl/sandbox.db beside the mapping) even when CARE_* variables, CI or the mapping's target: are set; an error when a base URL is set",
    exclusive: ['base-url'],
    helpGroup: 'CONNECTION',
  }),
};

export function connectionFromFlags(flags: {
  'base-url'?: string;
  'api-key'?: string;
  'emr-id'?: string;
  'tenant-id'?: string;
  'allow-insecure'?: boolean;
  timeout?: number;
  'connect-timeout'?: number;
  'max-response-bytes'?: number;
  'max-pages'?: number;
  sandbox?: boolean;
}): ConnectionInput {
  return {
    baseUrl: flags['base-url'],
    apiKey: flags['api-key'],
    emrId: flags['emr-id'],
    tenantId: flags['tenant-id'],
    allowInsecure: flags['allow-insecure'],
    requestTimeoutMs: flags.timeout,
    connectTimeoutMs: flags['connect-timeout'],
    maxResponseBytes: flags['max-response-bytes'],
    maxPages: flags['max-pages'],
    embeddedSandbox: flags.sandbox,
  };
}
