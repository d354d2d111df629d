/**
 * `care-etl runs`: the run history the state ledger keeps (one entry per run that reached the server: start,
 * end, outcome, flags, counts per mapping and stage, exit code, host and user — never a secret).
 */
import { existsSync, readFileSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { dirname, resolve } from 'node:path';
import { CareEtlError, ExitCode } from '../core/issues.js';
import { redactKnown } from '../core/secret.js';
import { parse as parseYaml } from 'yaml';
import { interpolate } from '../mapping/interpolate.js';
import { Ledger, normalizeBaseUrl, type RunInfo } from '../state/ledger.js';
import { displayStateLocation, isPostgresLocation, resolveStateLocation } from '../state/state-location.js';

/** care-etl's own version (package.json two folders up from src/ and dist/). */
const VERSION = ((): string | undefined => {
  try {
    return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: string }).version;
  } catch {
    return undefined;
  }
})();

export interface RunHistoryOptions {
  /** The mapping file: its `.care-etl/state.db` is read unless `statePath` is given. */
  mappingFile?: string;
  statePath?: string;
  limit?: number;
  /** One run (`runs show N`). */
  id?: number;
  /** Only the runs of this tenant / against this server (a shared state holds every runner's runs). */
  tenant?: string;
  server?: string;
}

/** Default of `limit`, as the ledger's. */
const DEFAULT_RUNS_LISTED = 50;

export interface RunHistory {
  statePath: string;
  runs: RunInfo[];
}

export function readRunHistory(opts: RunHistoryOptions): RunHistory {
  const location = resolveStateLocation({
    flag: opts.statePath,
    env: process.env,
    mappingState: opts.mappingFile ? mappingStateKey(opts.mappingFile) : undefined,
    mappingDir: opts.mappingFile ? dirname(resolve(opts.mappingFile)) : process.cwd(),
  });
  const statePath = displayStateLocation(location); // a URL without its password
  if (!isPostgresLocation(location) && !existsSync(location)) {
    throw new CareEtlError(`No state file at ${statePath}: no run has been recorded there`, {
      exitCode: ExitCode.config,
      hint: 'Name the mapping file (its .care-etl/state.db is read) or the state file with --state.',
    });
  }
  const ledger = Ledger.open(location, { busyTimeoutMs: 2000 });
  try {
    const runs = filterRuns(ledger, opts);
    if (opts.id !== undefined && runs.length === 0) {
      throw new CareEtlError(`No run ${opts.id} in ${statePath}`, { exitCode: ExitCode.config, hint: '`care-etl runs` lists the runs recorded.' });
    }
    return { statePath, runs };
  } finally {
    ledger.close();
  }
}

/** The runs asked for, newest first: with a tenant or server filter, the newest `limit` of those that pass it. */
function filterRuns(ledger: Ledger, opts: RunHistoryOptions): RunInfo[] {
  if (opts.id !== undefined || (opts.tenant === undefined && opts.server === undefined)) return ledger.runs({ limit: opts.limit, id: opts.id });
  const server = opts.server === undefined ? undefined : normalizeBaseUrl(opts.server);
  return ledger
    .runs({ limit: Number.MAX_SAFE_INTEGER })
    .filter((r) => (opts.tenant === undefined || r.tenantId === opts.tenant) && (server === undefined || normalizeBaseUrl(r.baseUrl ?? '') === server))
    .slice(0, opts.limit ?? DEFAULT_RUNS_LISTED);
}

/** The mapping's `state:` key, read without loading the mapping (its sources need not exist to list runs). */
function mappingStateKey(mappingFile: string): string | undefined {
  try {
    const data = parseYaml(readFileSync(mappingFile, 'utf8')) as { state?: unknown } | null;
    if (typeof data?.state !== 'string') return undefined;
    const r = interpolate(data.state, process.env);
    return r.problems.length === 0 ? r.value : undefined;
  } catch {
    return undefined; // an unreadable mapping: the default location, whose absence is reported
  }
}

/** What a run's ledger entry keeps: flags, counts, exit code, who and where — never a secret, never row content. */
export function runSummary(
  report: {
    exitCode: number;
    totals: object;
    mappings: object;
    stoppedEarly?: string;
    interrupted?: boolean;
    durationMs: number;
    warnings: string[];
    concurrency?: object;
    endingGuard?: object;
  },
  opts: {
    dryRun?: boolean;
    concurrency?: number;
    maxConcurrency?: number;
    maxErrors?: number;
    reconcile?: string;
    indexPageSize?: number;
    rejectsFile?: string;
    onlyRejected?: boolean;
    allowEnding?: string | number;
  },
  failure: unknown,
): object {
  const error = failure === undefined ? undefined : redactKnown(failure instanceof Error ? failure.message : String(failure)).slice(0, 1000);
  return {
    exitCode: failure === undefined ? report.exitCode : failure instanceof CareEtlError ? failure.exitCode : ExitCode.incomplete,
    totals: report.totals,
    mappings: report.mappings,
    stoppedEarly: report.stoppedEarly,
    interrupted: report.interrupted,
    error,
    warnings: report.warnings.length,
    durationMs: report.durationMs,
    // what the run settled on (a discovered concurrency is not in the flags)
    concurrency: report.concurrency,
    // the ending guard's counts and verdict per mapping (counts only, no key)
    endingGuard: report.endingGuard,
    flags: {
      concurrency: opts.concurrency,
      maxConcurrency: opts.maxConcurrency,
      maxErrors: opts.maxErrors,
      reconcile: opts.reconcile,
      indexPageSize: opts.indexPageSize,
      rejects: opts.rejectsFile,
      onlyRejected: opts.onlyRejected || undefined,
      allowEnding: opts.allowEnding,
    },
    host: hostname(),
    user: safeUser(),
    version: VERSION,
    node: process.version,
  };
}

function safeUser(): string | undefined {
  try {
    return userInfo().username;
  } catch {
    return process.env.USER ?? undefined;
  }
}
