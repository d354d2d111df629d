import { join, resolve } from 'node:path';
import type { WriteStream } from 'node:fs';
import { CareClient, type ClientOptions } from '../api/client.js';
import type { ConnectionInput } from '../api/connection.js';
import { CareEtlError, ExitCode, hasCode, type Issue } from '../core/issues.js';
import { createPrivateWriteStream } from '../core/secure-fs.js';
import { compileMapping, RefError, type CompiledMapping, type CompiledResource } from '../mapping/compile-mapping.js';
import type { SourceConfig } from '../sources/types.js';
import type { EvalContext } from '../mapping/functions.js';
import { closeLookups, loadMapping } from '../mapping/load-mapping.js';
import { checkColumnContract } from '../mapping/column-contract.js';
import { defaultReconcile } from '../mapping/mapping-defaults.js';
import { placeholderId } from '../mapping/placeholder-id.js';
import { RECONCILE_POLICIES, type ReconcilePolicy } from '../mapping/types.js';
import { matchRuleOf, ServerIndexes, type IndexBuild, type MatchRule } from '../load/server-index.js';
import type { WritableType } from '../schemas/resource-types.js';
import { AdaptiveLimiter } from '../load/adaptive-concurrency.js';
import { ResourceSync, type Inspection, type SyncOutcome } from '../load/resource-sync.js';
import { decideIdentity, MatchClaims } from '../load/identity-check.js';
import type { RetryOptions } from '../core/retry.js';
import { checkSource, openSource, SourceBytes } from '../sources/open-source.js';
import { Ledger, type LedgerScope } from '../state/ledger.js';
import { KeyIndex } from '../transform/key-index.js';
import { transformSource, type MappedResource } from '../transform/transform-source.js';
import { validateResource } from '../validate/resource-validator.js';
import { runSummary } from './run-history.js';
import { readRejectSelection, RejectsWriter, type RejectSelection } from './rejects.js';
import type { RejectRecord } from '../transform/reject-record.js';
import { openLedgerSnapshot, planExitCode, planPhase, readOnlyScope, type MappingPlan } from './plan.js';
import { openTarget, usesEmbeddedSandbox, type Target } from '../target/open-target.js';
import { guardEnding, resolveAllowEnding, type EndingSetting } from './ending-settings.js';
import type { EndingGuardReport } from '../load/ending-guard.js';

export interface MappingCounts {
  /** Source rows read (rejected ones included). */
  read: number;
  /**
   * Source rows left out on purpose — `where:` false, or a map that produced nothing (every row of such a
   * `groupBy` group) — neither sent, written nor rejected; their keys are not "seen" (so `onMissing: end` ends them).
   */
  skipped: number;
  created: number;
  updated: number;
  unchanged: number;
  /**
   * Of the created, updated and unchanged: resources whose server id was found on the server by the match rule
   * rather than read from the ledger (a lost or new state, a tenant already holding them, a create whose
   * answer was lost). Not a separate outcome: each is also counted as created, updated or unchanged.
   */
  adopted: number;
  rejected: number;
  /**
   * Practitioner–patient associations this run ended: a care team ended by `onMissing: end` counts once,
   * and so does each participant given an end date or dropped from its group (see `RunReport.ended`).
   */
  ended: number;
  /** Dry run: resources written to --out. */
  written: number;
  /**
   * `--only-rejected` only: rows of the source read (keys checked for duplicates, `$ref`s resolved) but not
   * selected, so neither sent nor written. Rows that fail now are counted as `rejected` whether selected or not.
   */
  notSelected?: number;
}

export interface RunReport {
  mappingFile: string;
  dryRun: boolean;
  target?: { baseUrl: string; tenantId: string; embedded: boolean; dataFile?: string };
  runId?: number;
  startedAt: string;
  finishedAt: string;
  durationMs: number;
  order: string[];
  mappings: Record<string, MappingCounts>;
  totals: MappingCounts;
  rejectsFile?: string;
  /** The redacted summary of the rejects (CSV: file, line, key, stage, code, message — no row content). */
  rejectsSummaryFile?: string;
  /** `--only-rejected`: which rows were re-processed, and from where. */
  selection?: RunSelection;
  outDir?: string;
  statePath?: string;
  /** One entry per ended association: a whole care team (`onMissing: end`), or one `member` of it (an end date or a dropped row). */
  ended: { mapping: string; key: string; serverId: string; member?: string }[];
  /**
   * Keys loaded by an earlier run that this run's export no longer holds, for mappings with `onMissing: ignore`
   * (nothing is done to them on the server; `end` mappings list them under `ended`). At most 1,000 listed; `vanishedCount`
   * has the total.
   */
  vanished?: { mapping: string; key: string; serverId?: string }[];
  vanishedCount?: number;
  /** `onMissing: end` mappings: what the ending guard counted and decided (src/load/ending-guard.ts). */
  endingGuard?: Record<string, EndingGuardReport>;
  warnings: string[];
  /** Every listing of the server this run made to find resources the ledger did not know (see `--reconcile`). */
  indexes: IndexBuild[];
  /** `care-etl state rebuild|check`: per mapping, the source, the ledger and the server side by side. */
  state?: Record<string, StateCounts>;
  /** `care-etl plan`: per mapping, what the run would do (its counts are in `mappings`; see src/pipeline/plan.ts). */
  plan?: Record<string, MappingPlan>;
  /** Why the run stopped before the end (`--max-errors`, interrupted). */
  stoppedEarly?: string;
  /** SIGINT/SIGTERM (the `signal`): rows not read yet are left for the next run; the bookkeeping was done. */
  interrupted?: boolean;
  /**
   * Requests in flight (a run that sent requests): `pinned` by `--concurrency`, or `discovered` within the
   * `ceiling` (`--max-concurrency`). `settled`: the window most of the loading time was spent at (time-weighted
   * median while requests were queued or running); `max`: the largest window; `maxInFlight`: most requests at once.
   */
  concurrency?: { mode: 'pinned' | 'discovered'; settled: number; max: number; maxInFlight: number; ceiling: number };
  /** 0 all loaded, 1 some rows rejected (or `--max-errors`), 3 interrupted — see `ExitCode` and the README. */
  exitCode: number;
}

/** `--only-rejected`: the rows of the previous rejects file (and the state's refused keys) re-processed. */
export interface RunSelection {
  /** The rejects file the selection was read from (the previous real run's). */
  rejectsFile: string;
  /** Rejects it held. */
  rejects: number;
  /** Distinct source keys selected (rows whose key was known when rejected; plus `fromState`). */
  keys: number;
  /** Distinct file lines (JSON: record numbers) selected: rows rejected before their key was known, or as duplicates. */
  lines: number;
  /** Of `keys`: keys the state ledger holds as refused by the server (status rejected) that the file did not name. */
  fromState: number;
  /** Rows (groups) of the current sources that matched the selection. */
  selected: number;
  /** Lines of the rejects file that are not a reject (ignored). */
  unreadable: number;
}

/** Bytes read of the phase's source so far, and its size when known (not a FIFO). */
export interface ByteProgress {
  read: number;
  total?: number;
}

/** `care-etl state check` (and `rebuild`): one mapping's keys in the source, the ledger and on the server. */
export interface StateCounts {
  /** Distinct keys of the source that mapped (rows rejected before the key was known are not counted). */
  sourceKeys: number;
  /** Of those, keys the ledger holds a server id for. */
  inLedger: number;
  /** Of those, keys whose resource is on the server (by the ledger's id, else by the match rule). */
  foundOnServer: number;
  /** …of which the server's content differs from the mapped one (a run would update them). */
  differing: number;
  /** Keys on the server under no ledger id but found by the match rule (a rebuild adopts them). */
  foundByMatch: number;
  /** Source keys not on the server (a run would create them). */
  notOnServer: number;
  /** Server resources of the type that no source key of this mapping matched. */
  onlyOnServer: number;
  /** Ledger entries (source key or not) recorded as loaded whose server id the server no longer has. */
  syncedButAbsent: number;
  /** Keys that cannot be settled: duplicates on the server, two keys with one match value, rows that fail to map. */
  rejected: number;
}

export type RunEvent =
  | { type: 'target'; baseUrl: string; tenantId: string; embedded: boolean; dataFile?: string }
  | { type: 'index'; phase: 'start' | 'end'; build: IndexBuild }
  | { type: 'phase-start'; mapping: string; resourceType: WritableType }
  | { type: 'progress'; mapping: string; counts: MappingCounts; limit?: number; bytes?: ByteProgress }
  | { type: 'phase-end'; mapping: string; counts: MappingCounts; bytes?: ByteProgress }
  | { type: 'reject'; reject: RejectRecord };

export interface RunOptions {
  mappingFile: string;
  env?: NodeJS.ProcessEnv;
  /** From command-line flags: they win over the environment, which wins over the mapping's `target:`. */
  connection?: ConnectionInput;
  dryRun?: boolean;
  /** Dry run: folder for `<Type>.ndjson` (default `.care-etl/dry-run` beside the mapping). */
  outDir?: string;
  /**
   * Default `.care-etl/rejects.ndjson` beside the mapping (a dry run: `rejects.ndjson` in its `outDir`). It is
   * replaced only when the run did its work; a failed run keeps the previous one.
   */
  rejectsFile?: string;
  /** Default `.care-etl/state.db` beside the mapping. */
  statePath?: string;
  /**
   * Pins the requests in flight at N (429/503 lower it for a while, it never goes above). Without it the loader
   * discovers the server's capacity (src/load/concurrency-window.ts) up to `maxConcurrency`.
   */
  concurrency?: number;
  /** Ceiling of the discovered concurrency (default 32, `AdaptiveLimiter.DEFAULT_MAX_CONCURRENCY`); unused with `concurrency`. */
  maxConcurrency?: number;
  /** Stop once this many rows were rejected (≥ 1). */
  maxErrors?: number;
  /**
   * Re-process only the rows the previous run rejected (its rejects file: `rejectsFile`, else
   * `.care-etl/rejects.ndjson` — also for a dry run), from the current source: by key when the key was known,
   * else by file and line; plus the keys the state holds as refused by the server. Every other row is read (keys
   * for duplicates and `$ref`) but neither sent nor written (`notSelected`); `onMissing: end` is skipped.
   */
  onlyRejected?: boolean;
  /**
   * When to list the server for resources the ledger does not know; wins over each mapping's `reconcile:`
   * (default `auto`). See `ReconcilePolicy`.
   */
  reconcile?: ReconcilePolicy;
  /**
   * `--allow-ending`: how many resources of each `onMissing: end` mapping the run may end — a count or `P%` of
   * the loaded ones; wins over each mapping's `allowEnding:` (default: the schema's). See src/load/ending-guard.ts.
   */
  allowEnding?: string | number;
  /** `_count` asked for when listing the server to reconcile (default 1000; 0 = the server's own page size). */
  indexPageSize?: number;
  retry?: RetryOptions;
  /** The embedded sandbox's data file when no target is configured (default `.care-etl/sandbox.db`). */
  sandboxDataFile?: string;
  onEvent?: (e: RunEvent) => void;
  /** One call per HTTP attempt (the CLI's `--verbose` request log); never sees headers or bodies. */
  onRequest?: ClientOptions['onResponse'];
  /**
   * Interrupts the run (SIGINT/SIGTERM): no further row is read, requests in flight finish, the ledger and the
   * rejects file are written, and the report says `interrupted`.
   */
  signal?: AbortSignal;
  now?: Date;
}

/**
 * `run` loads; `rebuild` records what the server holds in the ledger; `check` compares without writing anything;
 * `plan` decides every key as a run would, without writing anything (src/pipeline/plan.ts).
 */
type Mode = 'run' | 'rebuild' | 'check' | 'plan';

const emptyStateCounts = (): StateCounts => ({ sourceKeys: 0, inLedger: 0, foundOnServer: 0, differing: 0, foundByMatch: 0, notOnServer: 0, onlyOnServer: 0, syncedButAbsent: 0, rejected: 0 });

/** Vanished keys listed in the report at most (the count is always complete). */
const MAX_VANISHED_LISTED = 1000;

const emptyCounts = (): MappingCounts => ({ read: 0, skipped: 0, created: 0, updated: 0, unchanged: 0, adopted: 0, rejected: 0, ended: 0, written: 0 });



/**
 * `care-etl run`: every resource mapping in dependency order, source → transform → validate → load.
 * Rows that fail any stage are rejected (rejects file) and the run goes on; configuration and
 * authentication problems throw a CareEtlError (exit 2) before anything is loaded.
 */
export function runPipeline(opts: RunOptions): Promise<RunReport> {
  return execute(opts, 'run');
}

/**
 * `care-etl state rebuild` (`record`) and `state check`: every mapping's source through transform and
 * validation, each key looked up on the server (one listing per type), nothing sent but reads. A rebuild
 * records what it finds in the ledger (so a run after it writes only what differs); a check writes nothing.
 */
export function inspectState(opts: Omit<RunOptions, 'dryRun' | 'outDir' | 'rejectsFile' | 'maxErrors' | 'reconcile'>, record: boolean): Promise<RunReport> {
  return execute({ ...opts, rejectsFile: undefined }, record ? 'rebuild' : 'check');
}

/**
 * `care-etl plan`: everything a run would do — creates, updates (with the server's current resource), unchanged,
 * adoptions, ends, rejects — against a snapshot of the ledger and the live server, nothing sent but reads and
 * nothing written (not the state, not a rejects file). Counts in `mappings`, details in `plan`; `exitCode` as
 * `planExitCode`.
 */
export function planPipeline(opts: Omit<RunOptions, 'dryRun' | 'outDir' | 'rejectsFile' | 'maxErrors'>): Promise<RunReport> {
  return execute({ ...opts, rejectsFile: undefined }, 'plan');
}

async function execute(opts: RunOptions, mode: Mode): Promise<RunReport> {
  const started = new Date();
  const now = opts.now ?? started;
  const mappingFile = resolve(opts.mappingFile);
  const concurrency = opts.concurrency; // undefined: discovered
  for (const [flag, v] of [['--concurrency', concurrency], ['--max-concurrency', opts.maxConcurrency]] as const) {
    if (v !== undefined && !(Number.isInteger(v) && v >= 1)) throw new CareEtlError(`Expected \`${flag}\` to be an integer ≥ 1, got \`${v}\``, { exitCode: ExitCode.config });
  }
  if (opts.reconcile !== undefined && !RECONCILE_POLICIES.includes(opts.reconcile)) {
    throw new CareEtlError(`Expected \`--reconcile\` to be one of ${RECONCILE_POLICIES.join(', ')}, got \`${String(opts.reconcile)}\``, { exitCode: ExitCode.config });
  }
  if (opts.maxErrors !== undefined && !(Number.isInteger(opts.maxErrors) && opts.maxErrors >= 1)) {
    throw new CareEtlError(`Expected \`--max-errors\` to be an integer ≥ 1, got \`${opts.maxErrors}\``, { exitCode: ExitCode.config });
  }
  if (opts.indexPageSize !== undefined && !(Number.isInteger(opts.indexPageSize) && opts.indexPageSize >= 0)) {
    throw new CareEtlError(`Expected \`--index-page-size\` to be an integer ≥ 0, got \`${opts.indexPageSize}\``, { exitCode: ExitCode.config });
  }
  resolveAllowEnding(opts.allowEnding); // a bad --allow-ending is a usage error before anything is read
  const mapping = await loadMapping(mappingFile, { env: opts.env ?? process.env });
  const compiled = compileMapping(mapping);
  const dryRun = mode === 'run' && (opts.dryRun ?? false);
  // A refused target (CARE_* or `target:` without a base URL) fails before any source is read or file written.
  if (!dryRun) usesEmbeddedSandbox(mapping, opts);
  // Every source opened and checked before any side effect (target, ledger, rejects, dry-run output).
  await checkSources(compiled, opts.signal);
  await checkColumnContract(mapping, compiled.order);
  const careDir = join(mapping.dir, '.care-etl');
  const outDir = dryRun ? resolve(opts.outDir ?? join(careDir, 'dry-run')) : undefined;
  // A dry run keeps its own rejects: it must not replace those of the last real run.
  const rejectsFile = mode === 'run' ? resolve(opts.rejectsFile ?? join(outDir ?? careDir, 'rejects.ndjson')) : undefined;
  // --only-rejected: the rows the last real run rejected (a dry run previews what the real one would re-process).
  const selectionFile = mode === 'run' && opts.onlyRejected ? resolve(opts.rejectsFile ?? join(careDir, 'rejects.ndjson')) : undefined;
  const selection = selectionFile ? await readRejectSelection(selectionFile) : undefined;
  const report = newRunReport(compiled, mode, { mappingFile, dryRun, started, rejectsFile, selection, selectionFile });

  let target: Target | undefined;
  let ledger: Ledger | undefined;
  let scope: LedgerScope | undefined;
  let client: CareClient | undefined;
  let disposeSnapshot: (() => void) | undefined;
  let runId: number | undefined;
  let outcome: 'completed' | 'aborted' | 'failed' = 'failed';
  let failure: unknown;
  const rejects = new RejectsWriter(rejectsFile, { baseDir: mapping.dir });
  report.rejectsSummaryFile = rejects.summaryPath;
  const dryOut = new Map<string, WriteStream>();
  try {
    if (dryRun) {
      report.outDir = outDir;
      // Each type's file exists (emptied) from the start: a type whose rows are all rejected leaves no stale output.
      for (const name of compiled.order) {
        const type = compiled.resources.get(name)!.def.type;
        if (!dryOut.has(type)) dryOut.set(type, createPrivateWriteStream(join(outDir!, `${type}.ndjson`)));
      }
    } else {
      target = await openTarget(mapping, opts);
      report.target = { baseUrl: target.settings.baseUrl, tenantId: target.settings.tenantId, embedded: target.embedded, dataFile: target.dataFile };
      opts.onEvent?.({ type: 'target', ...report.target });
      client = new CareClient(target.settings, { retry: false, onResponse: opts.onRequest });
      await preflight(client, opts.retry);
      report.statePath = resolve(opts.statePath ?? join(careDir, 'state.db'));
      if (mode === 'plan') {
        // A copy: the real state file is never written, not even the scope row of a new server or tenant.
        const snapshot = await openLedgerSnapshot(report.statePath);
        ledger = snapshot.ledger;
        disposeSnapshot = snapshot.dispose;
        scope = readOnlyScope(ledger.scope(target.scopeUrl, target.settings.tenantId));
      } else {
        ledger = Ledger.open(report.statePath);
        scope = ledger.scope(target.scopeUrl, target.settings.tenantId);
      }
      if (mode === 'run' || mode === 'rebuild') {
        runId = scope.beginRun({ mappingFile, dryRun });
        report.runId = runId;
      }
    }
    await runPhases(compiled, { ...opts, dryRun, concurrency, now }, report, { client, scope, runId, rejects, dryOut, mode, selection });
    outcome = report.stoppedEarly ? 'aborted' : 'completed';
    await rejects.commit();
  } catch (err) {
    failure = err;
    const kept = await rejects.discard();
    if (kept && err instanceof CareEtlError) {
      err.hint = `${err.hint ? `${err.hint} ` : ''}The previous rejects file is unchanged; the ${rejects.count} row(s) this run rejected before failing are in ${kept}.`;
    }
    throw err;
  } finally {
    await Promise.all([...dryOut.values()].map((s) => new Promise<void>((r) => s.end(() => r()))));
    closeRunReport(report, mode, started, selection);
    if (scope && runId !== undefined) {
      try {
        scope.finishRun(runId, outcome, runSummary(report, opts, failure));
      } catch {
        /* the run's own error matters more */
      }
    }
    ledger?.close();
    disposeSnapshot?.();
    await client?.close();
    await target?.close();
    closeLookups(mapping.lookups);
  }
  return report;
}

/** The report of a run about to start: every mapping at zero, the mode's own sections present. */
function newRunReport(
  compiled: CompiledMapping,
  mode: Mode,
  x: { mappingFile: string; dryRun: boolean; started: Date; rejectsFile?: string; selection?: RejectSelection; selectionFile?: string },
): RunReport {
  const report: RunReport = {
    mappingFile: x.mappingFile,
    dryRun: x.dryRun,
    startedAt: x.started.toISOString(),
    finishedAt: '',
    durationMs: 0,
    order: compiled.order,
    mappings: Object.fromEntries(compiled.order.map((n) => [n, emptyCounts()])),
    totals: emptyCounts(),
    rejectsFile: x.rejectsFile,
    ended: [],
    warnings: compiled.mapping.warnings.map((w) => w.message),
    indexes: [],
    exitCode: ExitCode.ok,
  };
  if (mode === 'rebuild' || mode === 'check') report.state = Object.fromEntries(compiled.order.map((n) => [n, emptyStateCounts()]));
  if (mode === 'plan') report.plan = {};
  const selection = x.selection;
  if (selection) {
    for (const c of [...Object.values(report.mappings), report.totals]) c.notSelected = 0;
    report.selection = { rejectsFile: x.selectionFile!, rejects: selection.rejects, keys: 0, lines: selection.placeCount, fromState: 0, selected: 0, unreadable: selection.unreadable };
  }
  return report;
}

/** The run is over (done, stopped or failed): its times, totals and exit code. */
function closeRunReport(report: RunReport, mode: Mode, started: Date, selection: RejectSelection | undefined): void {
  const finished = new Date();
  report.finishedAt = finished.toISOString();
  report.durationMs = finished.getTime() - started.getTime();
  for (const c of Object.values(report.mappings)) for (const k of Object.keys(c) as (keyof MappingCounts)[]) report.totals[k] = (report.totals[k] ?? 0) + (c[k] ?? 0);
  if (selection && report.selection) {
    report.selection.keys = selection.keyCount;
    report.selection.fromState = selection.fromState;
  }
  report.exitCode = report.interrupted ? ExitCode.incomplete : report.totals.rejected > 0 || report.stoppedEarly ? ExitCode.rejected : ExitCode.ok;
  if (!report.interrupted && Object.values(report.endingGuard ?? {}).some((g) => !g.allowed)) report.exitCode = ExitCode.endingRefused;
  if (report.state && Object.values(report.state).some((c) => c.rejected > 0 || (mode === 'check' && c.syncedButAbsent > 0))) report.exitCode = ExitCode.rejected;
  if (mode === 'plan') report.exitCode = planExitCode(report);
}

/**
 * Checks every source the mappings read (exists, readable, format and header open) before anything is written, so
 * that a missing second source ends the run with exit 2 before the first mapping loaded anything. All failures
 * are reported together.
 */
async function checkSources(compiled: CompiledMapping, signal: AbortSignal | undefined): Promise<void> {
  const used = new Map<string, SourceConfig>();
  for (const name of compiled.order) {
    const from = compiled.resources.get(name)!.def.from;
    const source = compiled.mapping.sources[from];
    if (source && !used.has(from)) used.set(from, source);
  }
  const errors: CareEtlError[] = [];
  for (const source of used.values()) {
    try {
      await checkSource(source, { signal });
    } catch (err) {
      if (!(err instanceof CareEtlError)) throw err;
      errors.push(err);
    }
  }
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) {
    throw new CareEtlError(`${errors.length} sources cannot be read: ${errors.map((e) => e.message).join('; ')}`, {
      issues: errors.flatMap((e) => e.issues),
      hint: errors.find((e) => e.hint)?.hint,
      exitCode: ExitCode.config,
    });
  }
}

/** One cheap request before anything is read: wrong credentials end the run with exit 2, nothing loaded. */
async function preflight(client: CareClient, retry: RetryOptions | undefined): Promise<void> {
  const pages = client.pages('Patient', { pageSize: 1, retry: retry ?? {} });
  try {
    await pages.next();
  } finally {
    await pages.return(undefined);
  }
}

interface PhaseState {
  mode: Mode;
  client?: CareClient;
  scope?: LedgerScope;
  runId?: number;
  rejects: RejectsWriter;
  dryOut: Map<string, WriteStream>;
  /** `--only-rejected`: the rows to re-process; every other row is read but not sent. */
  selection?: RejectSelection;
}

type PhaseOptions = RunOptions & { dryRun: boolean; now: Date };

/** What the phases of one run share. */
interface RunShared {
  compiled: CompiledMapping;
  opts: PhaseOptions;
  report: RunReport;
  st: PhaseState;
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
}

/** One mapping of the run: its source, counters and loader, and the callbacks its rows report through. */
interface Phase {
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
  policy: ReconcilePolicy;
  /** `onMissing: end`: the ending guard's allowance and the mapping's loaded resources when the phase starts. */
  ending?: EndingSetting;
  sync?: ResourceSync;
  progress(): void;
  phaseEnd(): void;
  onReject(r: RejectRecord): void;
}

async function runPhases(compiled: CompiledMapping, opts: PhaseOptions, report: RunReport, st: PhaseState): Promise<void> {
  const limiter = AdaptiveLimiter.forRun(opts);
  const keys = { rejectedKeys: new Map<string, Set<string>>(), loadedKeys: new Map<string, KeyIndex>(), foundIds: new Map<string, Map<string, string>>() };
  const indexes = serverIndexes(compiled, opts, st);
  report.indexes = indexes?.builds ?? [];
  const shared: RunShared = { compiled, opts, report, st, limiter, indexes, ...keys, ctx: refContext(compiled, opts, st, keys), totalRejected: 0 };
  for (const name of compiled.order) {
    if ((await runPhase(name, shared)) === 'stop') break;
  }
  if (st.mode === 'run' && st.client) {
    const c = limiter.stats();
    report.concurrency = { mode: c.growth === 'aimd' ? 'pinned' : 'discovered', settled: c.settled, max: c.max, maxInFlight: c.maxInFlight, ceiling: c.ceiling };
  }
}

/** One listing per type serves every mapping of that type (each indexes it by its own match rule). */
function serverIndexes(compiled: CompiledMapping, opts: PhaseOptions, st: PhaseState): ServerIndexes | undefined {
  if (!st.client) return undefined;
  const rulesByType = new Map<WritableType, Map<string, MatchRule>>();
  for (const r of compiled.resources.values()) {
    let m = rulesByType.get(r.def.type);
    if (!m) rulesByType.set(r.def.type, (m = new Map()));
    m.set(r.def.name, matchRuleOf(r));
  }
  return new ServerIndexes(st.client, rulesByType, { pageSize: opts.indexPageSize, retry: opts.retry, signal: opts.signal, keepBodies: st.mode === 'plan', onBuild: (e) => opts.onEvent?.({ type: 'index', ...e }) });
}

/** `$ref` and `$sourceKey` of this run: placeholders in a dry run, else the plan's, the ledger's or the check's server ids. */
function refContext(compiled: CompiledMapping, opts: PhaseOptions, st: PhaseState, keys: Pick<RunShared, 'rejectedKeys' | 'loadedKeys' | 'foundIds'>): EvalContext {
  const typeOf = new Map([...compiled.resources.values()].map((r) => [r.def.name, r.def.type]));
  const { rejectedKeys, loadedKeys, foundIds } = keys;
  return {
    now: opts.now,
    resolveRef(name, key) {
      const type = typeOf.get(name);
      if (rejectedKeys.get(name)?.has(key)) throw new RefError(name, key, `${name} \`${key}\` was rejected in this run, so this reference cannot be resolved`, 'ref-rejected');
      if (opts.dryRun) {
        if (loadedKeys.get(name)?.has(key)) return `${type}/${placeholderId(key, 'dryrun')}`;
      } else {
        const planned = st.mode === 'plan' ? foundIds.get(name)?.get(key) : undefined;
        const id = planned ?? st.scope!.serverIdOf(name, key) ?? foundIds.get(name)?.get(key);
        if (id) return `${type}/${id}`;
      }
      throw new RefError(name, key, `no ${name} with key \`${key}\` has been loaded (not in its source, skipped by its \`where:\` or a map producing nothing, or not yet loaded)`, 'ref-missing');
    },
    sourceKey(reference) {
      const [type, id] = reference.split('/');
      return st.scope?.keyOfServerId(type, id)?.key;
    },
  };
}

/** One mapping, by mode: loaded (`run`), planned, or inspected (`state`). `stop` ends the run (interrupted, stopped early). */
async function runPhase(name: string, sh: RunShared): Promise<'next' | 'stop'> {
  const { report, st, opts } = sh;
  const ph = openPhase(name, sh);
  const { res, source, counts, onReject, progress } = ph;
  if (st.mode === 'plan') {
    const planned = new Map<string, string>();
    sh.foundIds.set(name, planned);
    await planPhase(res, ph.sync!, report, { source, ctx: sh.ctx, onReject, planned, progress, counts, policy: ph.policy, signal: opts.signal, ending: ph.ending });
    ph.phaseEnd();
    return report.interrupted ? 'stop' : 'next';
  }
  if (st.mode !== 'run') {
    await inspectPhase(res, ph.sync!, sh.indexes!, st, report, { source, ctx: sh.ctx, onReject, foundIds: sh.foundIds, progress, counts, signal: opts.signal, bytes: ph.bytes });
    ph.phaseEnd();
    return 'next';
  }
  await loadPhase(ph, sh);
  if (report.interrupted) {
    ph.phaseEnd();
    return 'stop'; // creates whose answer is unknown stay recorded as intents: the next run settles them first
  }
  if (ph.sync) await settlePhase(ph, sh);
  ph.phaseEnd();
  return report.stoppedEarly ? 'stop' : 'next';
}

function openPhase(name: string, sh: RunShared): Phase {
  const { compiled, opts, report, st } = sh;
  const res = compiled.resources.get(name)!;
  const counts = report.mappings[name]!;
  const rejected = new Set<string>();
  sh.rejectedKeys.set(name, rejected);
  const loaded = opts.dryRun ? new KeyIndex() : undefined;
  if (loaded) sh.loadedKeys.set(name, loaded);
  opts.onEvent?.({ type: 'phase-start', mapping: name, resourceType: res.def.type });
  const bytes = new SourceBytes();
  const policy: ReconcilePolicy = opts.reconcile ?? res.def.reconcile ?? defaultReconcile();
  const ph: Phase = {
    name,
    res,
    source: compiled.mapping.sources[res.def.from]!,
    counts,
    rejectedSeen: new Set(),
    loaded,
    keylessRejects: 0,
    bytes,
    policy,
    ending: res.def.onMissing === 'end' && st.scope ? resolveAllowEnding(opts.allowEnding, res.def, st.scope.loadedCount(name)) : undefined,
    sync: st.client
      ? new ResourceSync(res, { client: st.client, scope: st.scope!, runId: st.runId ?? 0, limiter: sh.limiter, retry: opts.retry ?? {}, now: opts.now, indexes: sh.indexes!, policy })
      : undefined,
    progress: () => opts.onEvent?.({ type: 'progress', mapping: name, counts, limit: sh.limiter.limit, bytes: bytes.snapshot() }),
    phaseEnd: () => opts.onEvent?.({ type: 'phase-end', mapping: name, counts, bytes: bytes.snapshot() }),
    onReject: (r) => {
      counts.rejected++;
      sh.totalRejected++;
      if (r.key === undefined) ph.keylessRejects++;
      else {
        ph.rejectedSeen.add(r.key);
        // A duplicate row does not make its key unusable (its first row was loaded), nor does a failed update
        // of a resource that exists on the server: references to them stay valid.
        if (!hasCode(r.issues[0], 'duplicate-key') && !(r.stage === 'load' && st.scope?.serverIdOf(name, r.key))) rejected.add(r.key);
      }
      st.rejects.write(r);
      const { row: _row, raw: _raw, ...forDisplay } = r;
      opts.onEvent?.({ type: 'reject', reject: forDisplay });
    },
  };
  return ph;
}

/** Counts what the loader did with one resource (a refused write is a reject of its row). */
function applyOutcome(ph: Phase, report: RunReport, item: MappedResource, o: SyncOutcome): void {
  switch (o.kind) {
    case 'created':
    case 'updated':
    case 'unchanged':
      ph.counts[o.kind]++;
      if (o.adopted) ph.counts.adopted++;
      for (const member of (o.kind !== 'unchanged' && o.endedMembers) || []) {
        ph.counts.ended++;
        report.ended.push({ mapping: ph.name, key: item.key, serverId: o.serverId, member });
      }
      break;
    case 'rejected':
      ph.onReject({ stage: 'load', mapping: ph.name, source: item.origin.source, file: item.origin.file, line: item.origin.line, record: item.origin.record, lines: item.lines, key: item.key, issues: o.issues, row: undefined });
      break;
    case 'deferred':
      break;
  }
  ph.progress();
}

/**
 * `run`: the phase's source read, transformed and validated; each resource sent (a dry run writes it), with at
 * most twice the concurrency queued. A failure that ends the run is raised once the requests in flight settled.
 */
async function loadPhase(ph: Phase, sh: RunShared): Promise<void> {
  const { opts, report, st } = sh;
  const { name, counts, loaded, sync } = ph;
  const selection = st.selection;
  if (selection && st.scope) {
    // Keys whose last write the server refused, never loaded since: rejected "last time" too, whatever the file says.
    for (const e of st.scope.entries(name)) if (e.status === 'rejected') selection.addKey(name, e.key, true);
  }
  /**
   * --only-rejected: keys read but not selected are marked seen by this run (as unchanged ones are), so that a
   * pending create of such a key is left for the next full run rather than taken for a key gone from the source.
   */
  const notSelectedSeen: string[] = [];
  const flushNotSelected = () => {
    const keys = notSelectedSeen.splice(0);
    if (keys.length && st.scope && st.runId !== undefined) st.scope.markSeen(name, keys, st.runId);
  };
  await sync?.prepare();
  // Dry run: the loader's offline decisions (src/load/identity-check.ts), made as the run makes them.
  const dryRule = opts.dryRun ? matchRuleOf(ph.res) : undefined;
  const dryClaims = opts.dryRun ? new MatchClaims() : undefined;

  const abort = new AbortController();
  const signal = opts.signal ? AbortSignal.any([opts.signal, abort.signal]) : abort.signal;
  const inFlight = new Set<Promise<void>>();
  /** A failure that ends the run (the ledger, the server gone): raised once the requests in flight settled. */
  let fatal: { error: unknown } | undefined;
  const tooMany = () => opts.maxErrors !== undefined && sh.totalRejected >= opts.maxErrors;
  const interrupted = () => {
    if (!opts.signal?.aborted) return false;
    report.interrupted = true;
    report.stoppedEarly ??= 'interrupted (SIGINT/SIGTERM): the rows not read yet are loaded by the next run';
    return true;
  };
  try {
    for await (const item of transformSource(ph.res, openSource(ph.source, { signal, bytes: ph.bytes }), { ctx: sh.ctx, validate: validateResource, onRead: () => counts.read++, onSkip: (n) => { counts.skipped += n; ph.progress(); } })) {
      if (fatal || interrupted()) break;
      const chosen = !selection || selection.selects(name, item.ok ? { key: item.key, lines: item.lines, ...item.origin } : item);
      if (selection && chosen) report.selection!.selected++;
      if (!item.ok) {
        ph.onReject(item);
        ph.progress();
      } else if (!chosen) {
        // Read, its key taken (duplicates, `$ref`), not sent: neither created nor updated.
        counts.notSelected = (counts.notSelected ?? 0) + 1;
        if (loaded) loaded.set(item.key, 0);
        notSelectedSeen.push(item.key);
        if (notSelectedSeen.length >= 1000) flushNotSelected();
        ph.progress();
      } else if (opts.dryRun) {
        const identity = await decideIdentity(dryRule!, item.resource);
        if (!identity.ok) applyOutcome(ph, report, item, { kind: 'rejected', issues: identity.issues });
        else {
          dryClaims!.claim(identity.matchValue, item.key);
          loaded!.set(item.key, 0);
          writeDry(st.dryOut, report.outDir!, item);
          counts.written++;
          ph.progress();
        }
      } else {
        // Bounded hand-off: the transform waits when twice the concurrency is queued (flat memory).
        while (inFlight.size >= sh.limiter.limit * 2) await Promise.race(inFlight);
        const p: Promise<void> = sync!
          .sync(item)
          .then(
            (o) => applyOutcome(ph, report, item, o),
            (error: unknown) => {
              fatal ??= { error };
              abort.abort();
            },
          )
          .finally(() => inFlight.delete(p));
        inFlight.add(p);
      }
      if (tooMany()) {
        report.stoppedEarly = `${opts.maxErrors} row(s) rejected (--max-errors ${opts.maxErrors})`;
        abort.abort();
        break;
      }
    }
  } catch (err) {
    // The source stops with an AbortError when interrupted: that is the end of the reading, not a failure.
    if (!interrupted() && !fatal) throw err;
  } finally {
    await Promise.allSettled(inFlight);
    sync?.flush();
    flushNotSelected();
  }
  if (fatal && !interrupted()) throw fatal.error;
  if (dryClaims?.shared) report.warnings.push(sharedMatchWarning(name, ph.res, dryClaims.shared));
}

/** The run's (and the dry run's) warning about source keys sharing one match value. */
function sharedMatchWarning(name: string, res: CompiledResource, shared: number): string {
  return `${name}: ${shared} key(s) share their match value (\`match: ${res.def.match}\`) with another key; without the state they are told apart on the server by content only (a changed one is then rejected until the other is settled) — \`care-etl validate --sample N\` names them`;
}

/** After the rows: lost creates reconciled, then keys no longer in the export reported (`ignore`) or ended (`end`). */
async function settlePhase(ph: Phase, sh: RunShared): Promise<void> {
  const { report, st } = sh;
  const { name, res, counts } = ph;
  const sync = ph.sync!;
  const selection = st.selection;
  for await (const { item, outcome } of sync.reconcile()) applyOutcome(ph, report, item, outcome);
  sync.flush(); // the next phase's `$ref`s read these server ids from the ledger
  if (sync.sharedMatchValues) report.warnings.push(sharedMatchWarning(name, res, sync.sharedMatchValues));
  // A row rejected before loading is still in the export: it must not count as "gone".
  if (ph.rejectedSeen.size) st.scope!.markSeen(name, [...ph.rejectedSeen], st.runId!);
  if (res.def.onMissing !== 'end' && !selection && !report.stoppedEarly && ph.keylessRejects === 0) {
    // Not acted on, but said: the clinic should know which patients left the export.
    const gone = st.scope!.notSeenSince(name, st.runId!);
    if (gone.length) {
      report.vanishedCount = (report.vanishedCount ?? 0) + gone.length;
      report.vanished ??= [];
      for (const e of gone.slice(0, Math.max(0, MAX_VANISHED_LISTED - report.vanished.length))) report.vanished.push({ mapping: name, key: e.key, serverId: e.serverId });
      report.warnings.push(`${name}: ${gone.length} key(s) loaded by an earlier run are no longer in the export (onMissing: ignore leaves them as they are on the server)`);
    }
  }
  if (res.def.onMissing === 'end') {
    if (selection) {
      report.warnings.push(`${name}: onMissing: end skipped — --only-rejected sends only the selected rows, and a key merely not selected is not gone from the export`);
    } else if (report.stoppedEarly || ph.keylessRejects > 0) {
      report.warnings.push(`${name}: onMissing: end skipped — ${report.stoppedEarly ? 'the run stopped early' : `${ph.keylessRejects} row(s) were rejected before their key was known`}, so absent keys cannot be told apart from unread ones`);
    } else {
      const missing = sync.missingEntries();
      if (!guardEnding(report, res, ph.ending!, { wouldEnd: missing.length, rowsRead: counts.read, membersEnded: counts.ended })) return;
      const { ended, failed } = await sync.endMissing(missing);
      counts.ended += ended.length;
      for (const e of ended) report.ended.push({ mapping: name, ...e });
      for (const f of failed) ph.onReject({ stage: 'load', mapping: name, source: ph.source.name, file: ph.source.path, key: f.key, issues: f.issues });
    }
  }
}

/**
 * One mapping of `state rebuild|check`: each mapped key looked up on the server (`ResourceSync.inspect`),
 * then the ledger's own entries checked against the same listing.
 */
async function inspectPhase(
  res: CompiledResource,
  sync: ResourceSync,
  indexes: ServerIndexes,
  st: PhaseState,
  report: RunReport,
  x: { source: SourceConfig; ctx: EvalContext; onReject: (r: RejectRecord) => void; foundIds: Map<string, Map<string, string>>; progress: () => void; counts: MappingCounts; signal?: AbortSignal; bytes?: SourceBytes },
): Promise<void> {
  const name = res.def.name;
  const record = st.mode === 'rebuild';
  const c = report.state![name]!;
  const source = x.source;
  const found = new Map<string, string>();
  x.foundIds.set(name, found);
  const keys = new Set<string>();
  const matched = new Set<string>();
  for await (const item of transformSource(res, openSource(source, { signal: x.signal, bytes: x.bytes }), { ctx: x.ctx, validate: validateResource, onRead: () => x.counts.read++, onSkip: (n) => (x.counts.skipped += n) })) {
    if (!item.ok) {
      if (item.key !== undefined && !hasCode(item.issues[0], 'duplicate-key')) keys.add(item.key);
      c.rejected++;
      x.onReject(item);
      x.progress();
      continue;
    }
    keys.add(item.key);
    if (st.scope!.serverIdOf(name, item.key)) c.inLedger++;
    tally(item, await sync.inspect(item, record));
    x.progress();
  }
  for await (const { item, inspection } of sync.settleAmbiguousInspections(record)) tally(item, inspection);
  function tally(item: MappedResource, r: Inspection): void {
    if (r.kind === 'deferred') return;
    if (r.kind === 'found') {
      c.foundOnServer++;
      if (!r.equal) c.differing++;
      if (r.via === 'match') c.foundByMatch++;
      found.set(item.key, r.serverId);
      matched.add(r.serverId);
      x.counts[r.equal ? 'unchanged' : 'updated']++;
      if (r.via === 'match') x.counts.adopted++;
    } else if (r.kind === 'absent') {
      c.notOnServer++;
      x.counts.created++;
      if (r.vanished) c.syncedButAbsent++;
    } else {
      c.rejected++;
      x.onReject({ stage: 'load', mapping: name, source: item.origin.source, file: item.origin.file, line: item.origin.line, record: item.origin.record, lines: item.lines, key: item.key, issues: r.issues });
    }
  }
  c.sourceKeys = keys.size;
  const index = await indexes.get(res.def.type, `state ${st.mode}`);
  for (const id of index.ids()) if (!matched.has(id)) c.onlyOnServer++;
  // Entries of keys no longer in the source: recorded as loaded, but does the server still have them?
  for (const e of [...st.scope!.entries(name)]) {
    if (keys.has(e.key) || !e.serverId || e.status !== 'synced' || index.get(e.serverId)) continue;
    c.syncedButAbsent++;
    if (record) st.scope!.forget(name, e.key);
  }
}

function writeDry(out: Map<string, WriteStream>, dir: string, item: MappedResource): void {
  let s = out.get(item.type);
  if (!s) out.set(item.type, (s = createPrivateWriteStream(join(dir, `${item.type}.ndjson`))));
  s.write(`${JSON.stringify(item.resource)}\n`);
}

export type { Issue };
