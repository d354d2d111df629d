/**
 * What the modes of `execute` share: the `RunMode` each of them implements (run, plan, state check, state
 * rebuild), the run's context, and one mapping's phase (its counters, loader and reject handler).
 */
import type { CareClient } from '../../api/client.js';
import { ExitCode, hasCode } from '../../core/issues.js';
import type { CompiledMapping, CompiledResource } from '../../mapping/compile-mapping.js';
import type { EvalContext } from '../../mapping/functions.js';
import { defaultReconcile } from '../../mapping/mapping-defaults.js';
import type { ReconcilePolicy } from '../../mapping/types.js';
import type { AdaptiveLimiter } from '../../load/adaptive-concurrency.js';
import { ResourceSync } from '../../load/resource-sync.js';
import { matchDigestFor, type MatchDigest } from '../../load/match-digest.js';
import { stateSecretFromEnv } from '../../core/secret.js';
import type { ServerIndexes } from '../../load/server-index.js';
import { SourceBytes } from '../../sources/open-source.js';
import type { SourceConfig } from '../../sources/types.js';
import { Ledger, type LedgerScope } from '../../state/ledger.js';
import { acquireLease, describeHolder } from '../../state/lease.js';
import { KeyIndex } from '../../transform/key-index.js';
import type { RejectRecord } from '../../transform/reject-record.js';
import { resolveAllowEnding, type EndingSetting } from '../ending-settings.js';
import type { DryRunFiles } from '../dry-run-files.js';
import type { RejectSelection, RejectsWriter } from '../rejects.js';
import type { SourceAhead, SourcesAhead } from '../source-ahead.js';
import type { PhaseOptions } from '../run-options.js';
import { parseRejectThreshold, withinRejectThreshold, withinThresholdWarning } from '../reject-threshold.js';
import type { MappingCounts, RunReport } from '../run-report.js';

/** The state ledger a mode works on, and what to release after the run. */
export interface OpenedState {
  ledger: Ledger;
  scope: LedgerScope;
  /** What to release after the run, called before `ledger.close()` (the run lease; a plan's copy closes the ledger itself). */
  dispose?: () => void;
  /** A stale lease was taken over: said in the report's warnings. */
  warning?: string;
}

/** The run lease a mode that writes the ledger takes (src/state/lease.ts). */
export interface LeaseRequest {
  /** `--wait-for-lock`: how long to wait for a held lease (0: exit 3 at once). */
  waitMs?: number;
  /** Waiting lines (every 30 s) and a stale lease taken over, for stderr. */
  onNotice?: (line: string) => void;
  signal?: AbortSignal;
}

/**
 * One mode of `execute`, chosen once by the entry function: `execute` never asks which mode it runs. `begin` adds
 * the mode's report sections, `mapping` runs one mapping (`stop` ends the run), `end` follows the last mapping.
 */
export interface RunMode {
  /** How listings and messages name the mode (`state check`). */
  readonly label: string;
  /** A loading run: it keeps a rejects file, reads `--only-rejected`, may be a dry run. */
  readonly loads: boolean;
  /** Writes the ledger, so records itself as a run in it. */
  readonly recordsRun: boolean;
  /** Server listings keep each resource's body (a plan's field diffs). */
  readonly keepsBodies: boolean;
  /** `$ref`s resolve to the ids this mode found (or planned) before the ledger's. */
  readonly foundIdsFirst: boolean;
  /** Against a server: listings started up front, mappings run alongside those they do not refer to (phase-schedule.ts). */
  readonly overlapsPhases?: boolean;
  openState(statePath: string, scopeUrl: string, tenantId: string, lease: LeaseRequest): Promise<OpenedState>;
  begin(report: RunReport): void;
  mapping(phase: MappingPhase, run: RunContext): Promise<'next' | 'stop'>;
  end(run: RunContext): void;
  /** The report's exit code once the run is over (done, stopped or failed). */
  exitCode(report: RunReport): number;
}

/** What `execute` opened for the run before its first mapping. */
export interface RunSetup {
  mode: RunMode;
  client?: CareClient;
  scope?: LedgerScope;
  runId?: number;
  rejects: RejectsWriter;
  dryOut: DryRunFiles;
  /** `--only-rejected`: the rows to re-process; every other row is read but not sent. */
  selection?: RejectSelection;
  /** How match values are kept in the state (`stateMatchDigest`). */
  matchDigest?: MatchDigest;
}

/** What the mappings of one run share. */
export interface RunContext extends RunSetup {
  compiled: CompiledMapping;
  opts: PhaseOptions;
  report: RunReport;
  limiter: AdaptiveLimiter;
  indexes?: ServerIndexes;
  ctx: EvalContext;
  /** Per mapping: the keys `$ref` must not resolve to in this run. */
  rejectedKeys: Map<string, Set<string>>;
  /** Dry run only: per mapping, what `$ref` may point to. */
  loadedKeys: Map<string, KeyIndex>;
  /**
   * `state check` writes no ledger: server ids found by the check resolve `$ref`s from here. `plan`: every key's
   * id after the run (found, adopted, or the placeholder of a create), which wins over the ledger's.
   */
  foundIds: Map<string, Map<string, string>>;
  totalRejected: number;
  /** The window the limiter started at, and the earlier run of the target it was remembered from (issue 28). */
  startWindow: { window: number; rememberedFrom?: number };
  /** A mapping met its first key unknown to the state (phase-schedule.ts starts the listings that make likely). */
  onNewKeys?: (mapping: string) => void;
  /** Aborted when a mapping running alongside failed: this one stops reading and fails too (phase-schedule.ts). */
  halt?: AbortSignal;
  /** Sources opened while the mappings they wait for are checked (source-ahead.ts). */
  sourcesAhead?: SourcesAhead;
}

/** One mapping of the run: its source, counters and loader, and the callbacks its rows report through. */
export interface MappingPhase {
  name: string;
  res: CompiledResource;
  source: SourceConfig;
  counts: MappingCounts;
  /** Every key of a rejected row: still in the export, so not "missing" for onMissing: end. */
  rejectedSeen: Set<string>;
  /** Dry run: the keys `$ref` may point to. */
  loaded?: KeyIndex;
  keylessRejects: number;
  /** Bytes read of this phase's source (the file stream's own counter: read per event, nothing per row). */
  bytes: SourceBytes;
  /** Its source, opened and its first record read before the phase started (source-ahead.ts). */
  ahead?: SourceAhead;
  policy: ReconcilePolicy;
  /** `onMissing: end`: the ending guard's allowance and the mapping's loaded resources when the phase starts. */
  ending?: EndingSetting;
  sync?: ResourceSync;
  progress(): void;
  phaseEnd(): void;
  onReject(r: RejectRecord): void;
}

/** The ledger itself, without the run lease (`state check`: it writes nothing). */
export async function openLedger(statePath: string, scopeUrl: string, tenantId: string): Promise<OpenedState> {
  const ledger = Ledger.open(statePath);
  try {
    return { ledger, scope: ledger.scope(scopeUrl, tenantId) };
  } catch (err) {
    ledger.close();
    throw err;
  }
}

/** The ledger under the run lease of its (server, tenant), for the modes that write it (run, state rebuild). */
export async function openLeasedLedger(statePath: string, scopeUrl: string, tenantId: string, request: LeaseRequest): Promise<OpenedState> {
  const opened = await openLedger(statePath, scopeUrl, tenantId);
  try {
    const lease = await acquireLease(opened.ledger, opened.ledger.scopeIdOf(opened.scope), request);
    const from = lease.tookOverFrom;
    return { ...opened, dispose: () => lease.release(), warning: from ? `took over the stale lease of ${describeHolder(from, new Date())}` : undefined };
  } catch (err) {
    opened.ledger.close();
    throw err;
  }
}

/**
 * How the run keeps match values in its state: keyed by CARE_STATE_SECRET; a shared state without it is exit 2
 * before anything is sent. `sharedState`: the state is PostgreSQL (`isPostgresLocation`: flag, CARE_STATE_URL or the mapping's `state:`).
 */
export function stateMatchDigest(env: NodeJS.ProcessEnv, sharedState: boolean): MatchDigest {
  return matchDigestFor({ secret: stateSecretFromEnv(env), sharedState });
}

/** 3 interrupted; 5 an ending refused; 1 rows rejected (above `--fail-on-rejects`, which adds its warning) or stopped early; 0 otherwise. */
export function runExitCode(report: RunReport): number {
  if (report.interrupted) return ExitCode.incomplete;
  if (Object.values(report.endingGuard ?? {}).some((g) => !g.allowed)) return ExitCode.endingRefused;
  if (report.stoppedEarly) return ExitCode.rejected;
  const { rejected, read } = report.totals;
  const threshold = report.failOnRejects === undefined ? undefined : parseRejectThreshold(report.failOnRejects);
  if (rejected > 0 && threshold && withinRejectThreshold(threshold, rejected, read)) {
    report.warnings.push(withinThresholdWarning(report.failOnRejects!, rejected, read));
    return ExitCode.ok;
  }
  return rejected > 0 ? ExitCode.rejected : ExitCode.ok;
}

export function openMappingPhase(name: string, run: RunContext): MappingPhase {
  const { compiled, opts, report } = run;
  const res = compiled.resources.get(name)!;
  const counts = report.mappings[name]!;
  const rejected = new Set<string>();
  run.rejectedKeys.set(name, rejected);
  const loaded = opts.dryRun ? new KeyIndex() : undefined;
  if (loaded) run.loadedKeys.set(name, loaded);
  opts.onEvent?.({ type: 'phase-start', mapping: name, resourceType: res.def.type });
  const ahead = run.sourcesAhead?.take(name);
  const bytes = ahead?.bytes ?? new SourceBytes();
  const policy: ReconcilePolicy = opts.reconcile ?? res.def.reconcile ?? defaultReconcile();
  const phase: MappingPhase = {
    name,
    res,
    source: compiled.mapping.sources[res.def.from]!,
    counts,
    rejectedSeen: new Set(),
    loaded,
    keylessRejects: 0,
    bytes,
    ahead,
    policy,
    ending: res.def.onMissing === 'end' && run.scope ? resolveAllowEnding(opts.allowEnding, res.def, run.scope.loadedCount(name)) : undefined,
    sync: run.client
      ? new ResourceSync(res, {
          client: run.client,
          scope: run.scope!,
          runId: run.runId ?? 0,
          limiter: run.limiter,
          retry: opts.retry ?? {},
          now: opts.now,
          indexes: run.indexes!,
          policy,
          matchDigest: run.matchDigest,
          signal: opts.signal,
          onUnknownKey: () => run.onNewKeys?.(name),
        })
      : undefined,
    progress: () => opts.onEvent?.({ type: 'progress', mapping: name, counts, limit: run.limiter.limit, bytes: bytes.snapshot() }),
    phaseEnd: () => opts.onEvent?.({ type: 'phase-end', mapping: name, counts, bytes: bytes.snapshot() }),
    onReject: (r) => {
      counts.rejected++;
      run.totalRejected++;
      if (r.key === undefined) phase.keylessRejects++;
      else {
        phase.rejectedSeen.add(r.key);
        // A duplicate row does not make its key unusable (its first row was loaded), nor does a failed update
        // of a resource that exists on the server: references to them stay valid.
        if (!hasCode(r.issues[0], 'duplicate-key') && !(r.stage === 'load' && run.scope?.serverIdOf(name, r.key))) rejected.add(r.key);
      }
      run.rejects.write(r);
      const { row: _row, raw: _raw, ...forDisplay } = r;
      opts.onEvent?.({ type: 'reject', reject: forDisplay });
    },
  };
  return phase;
}
