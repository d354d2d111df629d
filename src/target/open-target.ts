/**
 * Which server a command talks to (shared by `run` and `export`): flags win over CARE_* variables, which
 * win over the mapping file's `target:`. With no server named anywhere, an in-process sandbox is started
 * on `.care-etl/sandbox.db` beside the mapping, so `care-etl run` then `care-etl export` work out of the box.
 */
import { join, resolve } from 'node:path';
import { connectionFromEnv, hasTarget, resolveConnection, type ConnectionInput, type ConnectionSettings } from '../api/connection.js';
import { ensureDir } from '../core/secure-fs.js';
import type { LoadedMapping } from '../mapping/types.js';

export interface Target {
  settings: ConnectionSettings;
  /** Identity of the server in the ledger: the base URL, or the data file of the embedded sandbox (its port changes every run). */
  scopeUrl: string;
  embedded: boolean;
  dataFile?: string;
  close(): Promise<void>;
}

export interface TargetOptions {
  /** Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** From command-line flags. */
  connection?: ConnectionInput;
  /** The embedded sandbox's data file when no target is configured (default `.care-etl/sandbox.db` beside the mapping). */
  sandboxDataFile?: string;
}

export async function openTarget(mapping: LoadedMapping, opts: TargetOptions): Promise<Target> {
  const env = opts.env ?? process.env;
  const fromFile: ConnectionInput = {
    baseUrl: mapping.target.baseUrl,
    apiKey: mapping.target.apiKey,
    emrId: mapping.target.emrId,
    tenantId: mapping.target.tenantId,
    updateRoutes: mapping.target.updateMethod as ConnectionInput['updateRoutes'],
  };
  const fromEnv = connectionFromEnv(env);
  if (hasTarget(opts.connection, fromEnv, fromFile)) {
    const settings = resolveConnection(opts.connection, fromEnv, fromFile);
    return { settings, scopeUrl: settings.baseUrl, embedded: false, close: async () => {} };
  }
  // No server named anywhere: the in-process sandbox, durable beside the mapping.
  const { startSandbox, DEFAULT_CREDENTIALS } = await import('../sandbox/server.js');
  const dataFile = opts.sandboxDataFile ?? join(mapping.dir, '.care-etl', 'sandbox.db');
  ensureDir(join(dataFile, '..'));
  const sandbox = await startSandbox({ dataFile });
  const settings = resolveConnection(
    { ...opts.connection, baseUrl: sandbox.url, apiKey: DEFAULT_CREDENTIALS.apiKey, emrId: DEFAULT_CREDENTIALS.emrId, tenantId: DEFAULT_CREDENTIALS.tenants[0] },
    { updateRoutes: fromFile.updateRoutes },
  );
  return { settings, scopeUrl: `sandbox:${resolve(dataFile)}`, embedded: true, dataFile, close: () => sandbox.close() };
}
