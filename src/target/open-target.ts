/**
 * Which server a command talks to (shared by `run`, `plan`, `state …` and `export`): flags win over CARE_*
 * variables, which win over the mapping file's `target:`. The embedded sandbox (`.care-etl/sandbox.db` beside the
 * mapping) is used only when nothing says otherwise, or with `--sandbox`: CARE_* variables, `CI`, connection flags or
 * a `target:` key without any base URL are refused (exit 2) — one misspelled CI secret must not load a clinic into
 * a local file and exit 0.
 */
import { join, resolve } from 'node:path';
import { connectionFromEnv, ENV, hasTarget, resolveConnection, type ConnectionInput, type ConnectionSettings } from '../api/connection.js';
import { CareEtlError, ExitCode, formatLocation, issue } from '../core/issues.js';
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
  /** From command-line flags (`embeddedSandbox`: `--sandbox`). */
  connection?: ConnectionInput;
  /** The embedded sandbox's data file when no target is configured (default `.care-etl/sandbox.db` beside the mapping). */
  sandboxDataFile?: string;
}

/** Flags that only make sense for a real server (the time-outs apply to the sandbox too). */
const SERVER_FLAGS = [
  ['apiKey', '--api-key'],
  ['emrId', '--emr-id'],
  ['tenantId', '--tenant-id'],
  ['allowInsecure', '--allow-insecure'],
] as const;

function fileLayer(mapping: LoadedMapping): ConnectionInput {
  return {
    baseUrl: mapping.target.baseUrl,
    apiKey: mapping.target.apiKey,
    emrId: mapping.target.emrId,
    tenantId: mapping.target.tenantId,
    updateRoutes: mapping.target.updateMethod as ConnectionInput['updateRoutes'],
  };
}

/** Where a base URL comes from (names only, never a value). */
function baseUrlSource(mapping: LoadedMapping, env: NodeJS.ProcessEnv, flags: ConnectionInput | undefined): string {
  if (flags?.baseUrl) return '--base-url';
  if (env[ENV.baseUrl]) return ENV.baseUrl;
  return `target.baseUrl (${formatLocation(mapping.positionOf(['target', 'baseUrl']))})`;
}

/** What suggests a real server although no base URL is known: variable and flag names, never their values. */
function realTargetHints(mapping: LoadedMapping, env: NodeJS.ProcessEnv, flags: ConnectionInput | undefined): string[] {
  const hints: string[] = [];
  const vars = Object.values(ENV).filter((name) => env[name]);
  if (vars.length) hints.push(`${vars.join(', ')} ${vars.length === 1 ? 'is' : 'are'} set`);
  if (env.CI) hints.push('CI is set (a CI job)');
  const given = SERVER_FLAGS.filter(([k]) => flags?.[k]).map(([, flag]) => flag);
  if (given.length) hints.push(`${given.join(', ')} ${given.length === 1 ? 'is' : 'are'} given`);
  if (mapping.target.declared) hints.push(`the mapping has a \`target:\` section (${formatLocation(mapping.positionOf(['target']))})`);
  return hints;
}

/**
 * Decides, without side effects, whether the embedded sandbox is to be used; throws the usage error (exit 2) when the
 * configuration is contradictory. Called before anything is written (`run` calls it ahead of its ledger and rejects file).
 */
export function usesEmbeddedSandbox(mapping: LoadedMapping, opts: TargetOptions): boolean {
  const env = opts.env ?? process.env;
  const flags = opts.connection;
  const known = hasTarget(flags, connectionFromEnv(env), fileLayer(mapping));
  if (flags?.embeddedSandbox) {
    if (!known) return true;
    const source = baseUrlSource(mapping, env, flags);
    throw new CareEtlError(`--sandbox loads into the embedded sandbox, but a base URL is set by ${source}`, {
      issues: [issue.error('target-conflict', `--sandbox and a base URL (${source}) name two different targets`, { path: 'baseUrl' })],
      hint: `Drop --sandbox to load into that server, or unset ${source.split(' ')[0]} to use the embedded sandbox.`,
      exitCode: ExitCode.config,
    });
  }
  if (known) return false;
  const hints = realTargetHints(mapping, env, flags);
  if (!hints.length) return true;
  const message = `${hints.join('; ')} but no base URL: set ${ENV.baseUrl} (or --base-url, or target.baseUrl in the mapping), or pass --sandbox to load into the embedded sandbox`;
  throw new CareEtlError(message, {
    issues: [issue.error('target-missing', `no base URL, yet ${hints.join('; ')}`, { path: 'baseUrl' })],
    hint: 'Nothing was read or written. Under CI, pass --sandbox for a job that loads into the embedded sandbox on purpose.',
    exitCode: ExitCode.config,
  });
}

export async function openTarget(mapping: LoadedMapping, opts: TargetOptions): Promise<Target> {
  const env = opts.env ?? process.env;
  const fromFile = fileLayer(mapping);
  if (!usesEmbeddedSandbox(mapping, opts)) {
    const settings = resolveConnection(opts.connection, connectionFromEnv(env), fromFile);
    return { settings, scopeUrl: settings.baseUrl, embedded: false, close: async () => {} };
  }
  // Nothing names a server (or --sandbox): the in-process sandbox, durable beside the mapping, with its own credentials.
  const { startSandbox, DEFAULT_CREDENTIALS } = await import('../sandbox/server.js');
  const dataFile = opts.sandboxDataFile ?? join(mapping.dir, '.care-etl', 'sandbox.db');
  ensureDir(join(dataFile, '..'));
  const sandbox = await startSandbox({ dataFile });
  const settings = resolveConnection(
    {
      ...opts.connection,
      baseUrl: sandbox.url,
      apiKey: DEFAULT_CREDENTIALS.apiKey,
      emrId: DEFAULT_CREDENTIALS.emrId,
      tenantId: DEFAULT_CREDENTIALS.tenants[0],
    },
    { updateRoutes: fromFile.updateRoutes },
  );
  return { settings, scopeUrl: `sandbox:${resolve(dataFile)}`, embedded: true, dataFile, close: () => sandbox.close() };
}
