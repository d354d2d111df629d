import { Flags } from '@oclif/core';
import type { ConnectionInput } from '../api/connection.js';

/**
 * Connection flags shared by `run` and `export`. CARE_* variables are read by `resolveConnection`, not by oclif,
 * so that the precedence flags > environment > mapping file `target:` is applied in one place.
 */
export const connectionFlags = {
  'base-url': Flags.string({ description: 'base URL of the service (or CARE_BASE_URL)', helpGroup: 'CONNECTION' }),
  'api-key': Flags.string({ description: 'API key (prefer CARE_API_KEY: flags show in process lists)', helpGroup: 'CONNECTION' }),
  'emr-id': Flags.string({ description: 'EMR id issued by the operator (or CARE_EMR_ID)', helpGroup: 'CONNECTION' }),
  'tenant-id': Flags.string({ description: 'tenant id (or CARE_TENANT_ID)', helpGroup: 'CONNECTION' }),
  'allow-insecure': Flags.boolean({ description: 'allow a plain http:// base URL that is not loopback', helpGroup: 'CONNECTION' }),
  timeout: Flags.integer({ description: 'per-request time-out in ms', min: 1, helpGroup: 'CONNECTION' }),
};

export function connectionFromFlags(flags: {
  'base-url'?: string;
  'api-key'?: string;
  'emr-id'?: string;
  'tenant-id'?: string;
  'allow-insecure'?: boolean;
  timeout?: number;
}): ConnectionInput {
  return {
    baseUrl: flags['base-url'],
    apiKey: flags['api-key'],
    emrId: flags['emr-id'],
    tenantId: flags['tenant-id'],
    allowInsecure: flags['allow-insecure'],
    requestTimeoutMs: flags.timeout,
  };
}
