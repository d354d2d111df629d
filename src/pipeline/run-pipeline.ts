import { join, resolve } from 'node:path';
import { CareClient } from '../api/client.js';
import { socketsForWindow, type ConnectionInput } from '../api/connection.js';
import { afterNextRequestWritten } from '../api/request-written.js';
import { getResourceValidator } from '../schemas/resource-schemas.js';
import { CareEtlError, ExitCode } from '../core/issues.js';
import { compileMapping, RefError, type CompiledMapping, type CompiledResource } from '../mapping/compile-mapping.js';
import type { SourceConfig } from '../sources/types.js';
import type { EvalContext } from '../mapping/functions.js';
import { closeLookups, loadMapping } from '../mapping/load-mapping.js';
import { checkColumnContract } from '../mapping/column-contract.js';
import { placeholderId } from '../mapping/placeholder-id.js';
import { RECONCILE_POLICIES } from '../mapping/types.js';
import { matchRuleOf, ServerIndexes, type MatchRule } from '../load/server-index.js';
import type { WritableType } from '../schemas/resource-types.js';
import { AdaptiveLimiter } from '../load/adaptive-concurrency.js';
import type { RetryOptions } from '../core/retry.js';
import { checkSource } from '../sources/open-source.js';
import type { Ledger, LedgerScope } from '../state/ledger.js';
import { displayStateLocation, isPostgresLocation, resolveStateLocation } from '../state/state-location.js';
import { KeyIndex } from '../transform/key-index.js';
import { runSummary } from './run-history.js';
import { sharedFifoIssues } from './validate-mapping.js';
import { readRejectSelection, RejectsWriter, type RejectSelection } from './rejects.js';
import { openTarget, usesEmbeddedSandbox, type Target } from '../target/open-target.js';
import { resolveAllowEnding } from './ending-settings.js';
import type { PhaseOptions, RunOptions } from './run-options.js';
import { emptyCounts, type MappingCounts, type RunReport } from './run-report.js';
import { openMappingPhase, stateMatchDigest, type OpenedState, type RunContext, type RunMode, type RunSetup } from './phases/run-context.js';
import { loadMode } from './phases/load.js';
import { planMode } from './phases/plan.js';
import { checkMode, rebuildMode } from './phases/inspect.js';
import { checkedRejectThreshold } from './reject-threshold.js';
import { listingsOnNewKeys, phasePrerequisites, runScheduled, startListings } from './phase-schedule.js';
import { SourcesAhead } from './source-ahead.js';
import { rememberedWindow } from './remembered-window.js';
import { defaultReconcile } from '../mapping/mapping-defaults.js';
import { DryRunFiles } from './dry-run-files.js';

/**
 * `care-etl run`: every resource mapping in dependency order, source → transform → validate → load.
 * Rows that fail any stage are rejected (rejects file) and the run goes on; configuration and
 * authentication problems throw a CareEtlError (exit 2) before anything is loaded.
 */
export function runPipeline(opts: RunOptions): Promise<RunReport> {
  return execute(opts, loadMode);
}

/**
 * `care-etl state check`: every mapping's source through transform and validation, each key looked up on the
 * server (one listing per type), nothing sent but reads, nothing written.
 */
export function checkState(opts: StateOptions): Promise<RunReport> {
  return execute({ ...opts, rejectsFile: undefined }, checkMode);
}

/** `care-etl state rebuild`: as `checkState`, and what it finds recorded in the ledger (so a run after it writes only what differs). */
export function rebuildState(opts: StateOptions): Promise<RunReport> {
  return execute({ ...opts, rejectsFile: undefined }, rebuildMode);
}

type StateOptions = Omit<RunOptions, 'dryRun' | 'outDir' | 'rejectsFile' | 'maxErrors' | 'reconcile'>;

/**
 * `care-etl plan`: everything a run would do — creates, updates (with the server's current resource), unchanged,
 * adoptions, ends, rejects — against a snapshot of the ledger and the live server, nothing sent but reads and
 * nothing written (not the state, not a rejects file). Counts in `mappings`, details in `plan`; `exitCode` as
 * `planExitCode`.
 */
export function planPipeline(opts: Omit<RunOptions, 'dryRun' | 'outDir' | 'rejectsFile' | 'maxErrors'>): Promise<RunReport> {
  return execute({ ...opts, rejectsFile: undefined }, planMode);
}

async function execute(opts: RunOptions, mode: RunMode): Promise<RunReport> {
  const started = new Date();
  const now = opts.now ?? started;
  const mappingFile = resolve(opts.mappingFile);
  const concurrency = opts.concurrency; // undefined: discovered
  checkRunOptions(opts);
  resolveAllowEnding(opts.allowEnding); // a bad --allow-ending is a usage error before anything is read
  const mapping = await loadMapping(mappingFile, { env: opts.env ?? process.env });
  const compiled = compileMapping(mapping);
  const dryRun = mode.loads && (opts.dryRun ?? false);
  // A refused target (CARE_* or `target:` without a base URL) fails before any source is read or file written.
  if (!dryRun) usesEmbeddedSandbox(mapping, opts);
  const stateLocation = stateLocationOf(mapping, opts);
  const sharedState = isPostgresLocation(stateLocation); // one writer per tenant under its lease: exactly once
  const matchDigest = dryRun ? undefined : stateMatchDigest(opts.env ?? process.env, sharedState); // no secret for a shared state: exit 2
  // Every source opened and checked before any side effect (target, ledger, rejects, dry-run output).
  await checkSources(compiled, opts.signal);
  await checkColumnContract(mapping, compiled.order);
  const careDir = join(mapping.dir, '.care-etl');
  const outDir = dryRun ? resolve(opts.outDir ?? join(careDir, 'dry-run')) : undefined;
  // A dry run keeps its own rejects: it must not replace those of the last real run.
  const rejectsFile = mode.loads ? resolve(opts.rejectsFile ?? join(outDir ?? careDir, 'rejects.ndjson')) : undefined;
  // --only-rejected: the rows the last real run rejected (a dry run previews what the real one would re-process).
  const selectionFile = mode.loads && opts.onlyRejected ? resolve(opts.rejectsFile ?? join(careDir, 'rejects.ndjson')) : undefined;
  const selection = selectionFile ? await readRejectSelection(selectionFile) : undefined;
  const report = newRunReport(compiled, mode, { mappingFile, dryRun, started, rejectsFile, selection, selectionFile, failOnRejects: opts.failOnRejects });

  let target: Target | undefined;
  let ledger: Ledger | undefined;
  let scope: LedgerScope | undefined;
  let client: CareClient | undefined;
  let disposeState: (() => void) | undefined;
  let runId: number | undefined;
  let outcome: 'completed' | 'aborted' | 'failed' = 'failed';
  let failure: unknown;
  const rejects = new RejectsWriter(rejectsFile, { baseDir: mapping.dir });
  report.rejectsSummaryFile = rejects.summaryPath;
  const dryOut = new DryRunFiles(outDir ?? '');
  try {
    if (dryRun) {
      report.outDir = outDir;
      openDryRunFiles(compiled, dryOut);
    } else {
      target = await openTarget(mapping, { ...opts, connection: withSocketsForWindow(opts) });
      report.target = { baseUrl: target.settings.baseUrl, tenantId: target.settings.tenantId, embedded: target.embedded, dataFile: target.dataFile };
      opts.onEvent?.({ type: 'target', ...report.target });
      client = new CareClient(target.settings, { retry: false, onResponse: opts.onRequest });
      // The mapped types' schema validators compiled while the check's answer is awaited: the first create waited for it.
      await preflight(client, opts.retry, opts.signal, () => compileValidators(compiled));
      const opened = await openRunState(mode, report, target, opts, stateLocation);
      ({ ledger, scope } = opened);
      disposeState = opened.dispose;
      if (mode.recordsRun) {
        runId = scope.beginRun({ mappingFile, dryRun });
        report.runId = runId;
      }
    }
    await runPhases(compiled, { ...opts, dryRun, concurrency, now, sharedState: opts.sharedState ?? sharedState }, report, {
      client,
      scope,
      runId,
      rejects,
      dryOut,
      mode,
      selection,
      matchDigest,
    });
    outcome = report.stoppedEarly ? 'aborted' : 'completed';
    await dryOut.end(); // a dry-run file the disk could not hold fails the run
    await rejects.commit();
  } catch (err) {
    if (cancelled(opts.signal, report)) return await endCancelled(report, rejects, dryRun || runId !== undefined);
    failure = err;
    const kept = await rejects.discard();
    if (kept && err instanceof CareEtlError) {
      err.hint = `${err.hint ? `${err.hint} ` : ''}The previous rejects file is unchanged; the ${rejects.count} row(s) this run rejected before failing are in ${kept}.`;
    }
    throw err;
  } finally {
    await dryOut.close();
    closeRunReport(report, mode, started, selection, scope);
    if (scope && runId !== undefined) {
      try {
        scope.finishRun(runId, report.interrupted ? 'aborted' : outcome, runSummary(report, opts, failure));
      } catch {
        /* the run's own error matters more */
      }
    }
    disposeState?.(); // before the close: a run's lease is released through its ledger
    ledger?.close();
    await client?.close();
    await target?.close();
    closeLookups(mapping.lookups);
  }
  return report;
}

/** The keep-alive sockets of `care-etl run` and of the library alike: the window's (socketsForWindow) unless set. */
function withSocketsForWindow(opts: RunOptions): ConnectionInput {
  const windowMax = opts.concurrency ?? opts.maxConcurrency ?? AdaptiveLimiter.DEFAULT_MAX_CONCURRENCY;
  return { ...opts.connection, connections: opts.connection?.connections ?? socketsForWindow(windowMax) };
}

/** The library's own options, checked by their own names before anything is read. */
function checkRunOptions(opts: RunOptions): void {
  for (const [flag, v] of [
    ['--concurrency', opts.concurrency],
    ['--max-concurrency', opts.maxConcurrency],
  ] as const) {
    if (v !== undefined && !(Number.isInteger(v) && v >= 1))
      throw new CareEtlError(`Expected \`${flag}\` to be an integer ≥ 1, got \`${v}\``, { exitCode: ExitCode.config });
  }
  if (opts.reconcile !== undefined && !RECONCILE_POLICIES.includes(opts.reconcile)) {
    throw new CareEtlError(`Expected \`--reconcile\` to be one of ${RECONCILE_POLICIES.join(', ')}, got \`${String(opts.reconcile)}\``, {
      exitCode: ExitCode.config,
    });
  }
  if (opts.maxErrors !== undefined && !(Number.isInteger(opts.maxErrors) && opts.maxErrors >= 1)) {
    throw new CareEtlError(`Expected \`--max-errors\` to be an integer ≥ 1, got \`${opts.maxErrors}\``, { exitCode: ExitCode.config });
  }
  if (opts.indexPageSize !== undefined && !(Number.isInteger(opts.indexPageSize) && opts.indexPageSize >= 0)) {
    throw new CareEtlError(`Expected \`--index-page-size\` to be an integer ≥ 0, got \`${opts.indexPageSize}\``, { exitCode: ExitCode.config });
  }
}

/** `--state`, then CARE_STATE_URL, then the mapping's `state:`, then `.care-etl/state.db` beside the mapping. */
function stateLocationOf(mapping: { state?: string; dir: string }, opts: RunOptions): string {
  return resolveStateLocation({ flag: opts.statePath, env: opts.env ?? process.env, mappingState: mapping.state, mappingDir: mapping.dir });
}

/** The state as the mode opens it, under the run lease if the mode takes one; a stale lease taken over is a warning. */
async function openRunState(mode: RunMode, report: RunReport, target: Target, opts: RunOptions, location: string): Promise<OpenedState> {
  report.statePath = displayStateLocation(location); // a URL without its password
  const lease = { waitMs: opts.waitForLockMs, onNotice: opts.onLockNotice, signal: opts.signal };
  const opened = await mode.openState(location, target.scopeUrl, target.settings.tenantId, lease);
  if (opened.warning) report.warnings.push(opened.warning);
  return opened;
}

/** Each type's file exists (emptied) from the start: a type whose rows are all rejected leaves no stale output. */
function openDryRunFiles(compiled: CompiledMapping, dryOut: DryRunFiles): void {
  for (const name of compiled.order) dryOut.open(compiled.resources.get(name)!.def.type);
}

/** The report of a run about to start: every mapping at zero, the mode's own sections present. */
function newRunReport(
  compiled: CompiledMapping,
  mode: RunMode,
  start: {
    mappingFile: string;
    dryRun: boolean;
    started: Date;
    rejectsFile?: string;
    selection?: RejectSelection;
    selectionFile?: string;
    failOnRejects?: string;
  },
): RunReport {
  const report: RunReport = {
    mappingFile: start.mappingFile,
    dryRun: start.dryRun,
    startedAt: start.started.toISOString(),
    finishedAt: '',
    durationMs: 0,
    order: compiled.order,
    mappings: Object.fromEntries(compiled.order.map((n) => [n, emptyCounts()])),
    totals: emptyCounts(),
    rejectsFile: start.rejectsFile,
    failOnRejects: mode.loads ? checkedRejectThreshold(start.failOnRejects) : undefined, // a bad one: exit 2, nothing sent yet
    ended: [],
    warnings: compiled.mapping.warnings.map((w) => w.message),
    indexes: [],
    exitCode: ExitCode.ok,
  };
  mode.begin(report);
  const selection = start.selection;
  if (selection) {
    for (const c of [...Object.values(report.mappings), report.totals]) c.notSelected = 0;
    report.selection = {
      rejectsFile: start.selectionFile!,
      rejects: selection.rejects,
      keys: 0,
      lines: selection.placeCount,
      fromState: 0,
      selected: 0,
      unreadable: selection.unreadable,
    };
  }
  return report;
}

/** The run is over (done, stopped or failed): its times, totals and exit code; interrupted, the creates left pending. */
function closeRunReport(report: RunReport, mode: RunMode, started: Date, selection: RejectSelection | undefined, scope: LedgerScope | undefined): void {
  if (report.interrupted && scope) report.pendingCreates = countPending(scope);
  const finished = new Date();
  report.finishedAt = finished.toISOString();
  report.durationMs = finished.getTime() - started.getTime();
  for (const c of Object.values(report.mappings))
    for (const k of Object.keys(c) as (keyof MappingCounts)[]) report.totals[k] = (report.totals[k] ?? 0) + (c[k] ?? 0);
  if (selection && report.selection) {
    report.selection.keys = selection.keyCount;
    report.selection.fromState = selection.fromState;
  }
  report.exitCode = mode.exitCode(report);
}

/**
 * Checks every source the mappings read (exists, readable, format and header open) before anything is written, so
 * that a missing second source ends the run with exit 2 before the first mapping loaded anything. All failures
 * are reported together.
 */
async function checkSources(compiled: CompiledMapping, signal: AbortSignal | undefined): Promise<void> {
  const fifo = sharedFifoIssues(compiled.mapping); // issue 25: a pipe two mappings read would hang the second
  if (fifo.length) throw new CareEtlError(fifo[0]!.message, { issues: fifo, exitCode: ExitCode.config });
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

/** The run's signal aborted (SIGINT/SIGTERM): whatever it interrupted (a listing, a reconcile, the lease wait), not a failure — the report says so (exit 3). */
function cancelled(signal: AbortSignal | undefined, report: RunReport): boolean {
  if (!signal?.aborted) return false;
  report.interrupted = true;
  report.stoppedEarly ??= 'interrupted (SIGINT/SIGTERM): the rows not read yet are loaded by the next run';
  return true;
}

/**
 * A cancelled run keeps the rows it rejected — unless it was cancelled before its mappings started (the lease wait,
 * the first request): then the previous rejects file stays, as after a failure.
 */
async function endCancelled(report: RunReport, rejects: RejectsWriter, started: boolean): Promise<RunReport> {
  await (started ? rejects.commit() : rejects.discard());
  return report;
}

/** Creates whose outcome is unknown (intents): the next run looks each one up before creating anything. */
function countPending(scope: LedgerScope): number {
  try {
    return scope.counts().pending;
  } catch {
    return 0; // the state file failed: the run's own error matters more
  }
}

/**
 * One cheap request before anything is read: wrong credentials end the run with exit 2, nothing loaded. `whileWaiting`:
 * CPU work run once the request is written, while its answer is awaited (skipped if the answer comes first).
 */
async function preflight(client: CareClient, retry: RetryOptions | undefined, signal: AbortSignal | undefined, whileWaiting: () => void): Promise<void> {
  const cancel = afterNextRequestWritten(whileWaiting);
  const pages = client.pages('Patient', { pageSize: 1, retry: retry ?? {}, signal });
  try {
    await pages.next();
  } finally {
    cancel();
    await pages.return(undefined);
  }
}

/** Compiles the validator of every type the mapping writes (each is compiled once per process, on first use). */
function compileValidators(compiled: CompiledMapping): void {
  try {
    for (const res of compiled.resources.values()) getResourceValidator(res.def.type);
  } catch {
    // Run on a loop turn of its own: a schema that does not compile fails where it is first used, as it did before.
  }
}

async function runPhases(compiled: CompiledMapping, opts: PhaseOptions, report: RunReport, setup: RunSetup): Promise<void> {
  // One limiter for the whole run, starting where the last run of this target settled (issue 28).
  const remembered = opts.concurrency === undefined ? rememberedWindow(setup.scope) : undefined;
  const limiter = AdaptiveLimiter.forRun({ ...opts, startAt: remembered?.window, maxRetryAfterMs: setup.client?.retryOptions(opts.retry).retryAfterCapMs });
  const keys = { rejectedKeys: new Map<string, Set<string>>(), loadedKeys: new Map<string, KeyIndex>(), foundIds: new Map<string, Map<string, string>>() };
  const indexes = serverIndexes(compiled, opts, setup, limiter);
  report.indexes = indexes?.builds ?? [];
  const run: RunContext = {
    ...setup,
    compiled,
    opts,
    report,
    limiter,
    indexes,
    ...keys,
    ctx: refContext(compiled, opts, setup, keys),
    totalRejected: 0,
    startWindow: { window: limiter.limit, rememberedFrom: remembered && remembered.window === limiter.limit ? remembered.runId : undefined },
  };
  const runOne = (name: string) => setup.mode.mapping(openMappingPhase(name, run), run);
  if (setup.mode.overlapsPhases && indexes && setup.scope) {
    // Listings up front, and each mapping as soon as those it refers to are done (phase-schedule.ts).
    const policyOf = (res: CompiledResource) => opts.reconcile ?? res.def.reconcile ?? defaultReconcile();
    startListings(compiled, indexes, setup.scope, policyOf);
    run.onNewKeys = listingsOnNewKeys(compiled, indexes, policyOf);
    // A failure of one mapping stops those running alongside (as a sequential run would not have started them).
    const halt = new AbortController();
    run.halt = halt.signal;
    const prerequisites = phasePrerequisites(compiled);
    const sourceOf = (name: string) => compiled.mapping.sources[compiled.resources.get(name)!.def.from]!;
    run.sourcesAhead = new SourcesAhead(prerequisites, sourceOf, opts.signal ? AbortSignal.any([opts.signal, halt.signal]) : halt.signal);
    try {
      await runScheduled(compiled.order, prerequisites, runOne, halt);
    } finally {
      await run.sourcesAhead.close(); // the sources of mappings that never started (a stop, a failure)
    }
  } else {
    for (const name of compiled.order) if ((await runOne(name)) === 'stop') break;
  }
  setup.mode.end(run);
}

/** One listing per type serves every mapping of that type (each indexes it by its own match rule). */
function serverIndexes(compiled: CompiledMapping, opts: PhaseOptions, setup: RunSetup, limiter: AdaptiveLimiter): ServerIndexes | undefined {
  if (!setup.client) return undefined;
  const rulesByType = new Map<WritableType, Map<string, MatchRule>>();
  for (const r of compiled.resources.values()) {
    let m = rulesByType.get(r.def.type);
    if (!m) rulesByType.set(r.def.type, (m = new Map()));
    m.set(r.def.name, matchRuleOf(r));
  }
  return new ServerIndexes(setup.client, rulesByType, {
    pageSize: opts.indexPageSize,
    retry: opts.retry,
    signal: opts.signal,
    keepBodies: setup.mode.keepsBodies,
    slot: (listing) => limiter.run(listing, opts.signal),
    onBuild: (e) => opts.onEvent?.({ type: 'index', ...e }),
  });
}

/** `$ref` and `$sourceKey` of this run: placeholders in a dry run, else the plan's, the ledger's or the check's server ids. */
function refContext(
  compiled: CompiledMapping,
  opts: PhaseOptions,
  setup: RunSetup,
  keys: Pick<RunContext, 'rejectedKeys' | 'loadedKeys' | 'foundIds'>,
): EvalContext {
  const typeOf = new Map([...compiled.resources.values()].map((r) => [r.def.name, r.def.type]));
  const { rejectedKeys, loadedKeys, foundIds } = keys;
  return {
    now: opts.now,
    resolveRef(name, key) {
      const type = typeOf.get(name);
      if (rejectedKeys.get(name)?.has(key))
        throw new RefError(name, key, `${name} \`${key}\` was rejected in this run, so this reference cannot be resolved`, 'ref-rejected');
      if (opts.dryRun) {
        if (loadedKeys.get(name)?.has(key)) return `${type}/${placeholderId(key, 'dryrun')}`;
      } else {
        const planned = setup.mode.foundIdsFirst ? foundIds.get(name)?.get(key) : undefined;
        const id = planned ?? setup.scope!.serverIdOf(name, key) ?? foundIds.get(name)?.get(key);
        if (id) return `${type}/${id}`;
      }
      throw new RefError(
        name,
        key,
        `no ${name} with key \`${key}\` has been loaded (not in its source, skipped by its \`where:\` or a map producing nothing, or not yet loaded)`,
        'ref-missing',
      );
    },
    sourceKey(reference) {
      // `Patient/123` (`/_history/…` after it ignored); without an id it names no resource of the state.
      const [type, id] = reference.split('/');
      if (!type || !id) return undefined;
      return setup.scope?.keyOfServerId(type, id)?.key;
    },
  };
}
