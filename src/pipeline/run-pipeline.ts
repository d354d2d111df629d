import { join, resolve } from 'node:path';
import type { WriteStream } from 'node:fs';
import { CareClient } from '../api/client.js';
import type { ConnectionInput } from '../api/connection.js';
import { CareEtlError, ExitCode, type Issue } from '../core/issues.js';
import { createPrivateWriteStream } from '../core/secure-fs.js';
import { compileMapping, RefError, type CompiledMapping } from '../mapping/compile-mapping.js';
import type { EvalContext } from '../mapping/functions.js';
import { loadMapping } from '../mapping/load-mapping.js';
import type { ResourceType } from '../mapping/types.js';
import { AdaptiveLimiter } from '../load/adaptive-concurrency.js';
import { ResourceSync, type SyncOutcome } from '../load/resource-sync.js';
import type { RetryOptions } from '../load/retry.js';
import { openSource } from '../sources/open-source.js';
import { Ledger, type LedgerScope } from '../state/ledger.js';
import { KeyIndex } from '../transform/key-index.js';
import { transformSource, type MappedResource } from '../transform/transform-source.js';
import { validateResource } from '../validate/resource-validator.js';
import { RejectsWriter, type RejectRecord } from './rejects.js';
import { openTarget, type Target } from './target.js';

export interface MappingCounts {
  /** Source rows read (rejected ones included). */
  read: number;
  created: number;
  updated: number;
  unchanged: number;
  /** Creates whose answer was lost, found on the server and adopted instead of re-sent. */
  adopted: number;
  rejected: number;
  /**
   * Practitioner–patient associations this run ended: a care team ended by `onMissing: end` counts once,
   * and so does each participant given an end date or dropped from its group (see `RunReport.ended`).
   */
  ended: number;
  /** Dry run: resources written to --out. */
  written: number;
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
  outDir?: string;
  statePath?: string;
  /** One entry per ended association: a whole care team (`onMissing: end`), or one `member` of it (an end date or a dropped row). */
  ended: { mapping: string; key: string; serverId: string; member?: string }[];
  warnings: string[];
  /** Why the run stopped before the end (e.g. `--max-errors`). */
  stoppedEarly?: string;
  /** 0 all loaded, 1 some rows rejected (or stopped early), 2 configuration/authentication (see README). */
  exitCode: number;
}

export type RunEvent =
  | { type: 'target'; baseUrl: string; tenantId: string; embedded: boolean; dataFile?: string }
  | { type: 'phase-start'; mapping: string; resourceType: ResourceType }
  | { type: 'progress'; mapping: string; counts: MappingCounts; limit?: number }
  | { type: 'phase-end'; mapping: string; counts: MappingCounts }
  | { type: 'reject'; reject: RejectRecord };

export interface RunOptions {
  mappingFile: string;
  env?: NodeJS.ProcessEnv;
  /** From command-line flags: they win over the environment, which wins over the mapping's `target:`. */
  connection?: ConnectionInput;
  dryRun?: boolean;
  /** Dry run: folder for `<Type>.ndjson` (default `.care-etl/dry-run` beside the mapping). */
  outDir?: string;
  /** Default `.care-etl/rejects.ndjson` beside the mapping. */
  rejectsFile?: string;
  /** Default `.care-etl/state.db` beside the mapping. */
  statePath?: string;
  /** Requests in flight at most (default 8). */
  concurrency?: number;
  /** Stop once more rows than this were rejected. */
  maxErrors?: number;
  retry?: RetryOptions;
  /** The embedded sandbox's data file when no target is configured (default `.care-etl/sandbox.db`). */
  sandboxDataFile?: string;
  onEvent?: (e: RunEvent) => void;
  signal?: AbortSignal;
  now?: Date;
}

const emptyCounts = (): MappingCounts => ({ read: 0, created: 0, updated: 0, unchanged: 0, adopted: 0, rejected: 0, ended: 0, written: 0 });

/** FHIR ids allow `[A-Za-z0-9-.]{1,64}`: dry-run placeholders stay valid and deterministic (golden files). */
function placeholderId(key: string): string {
  return `dryrun-${key.replace(/[^A-Za-z0-9\-.]/g, '-')}`.slice(0, 64);
}


/**
 * `care-etl run`: every resource mapping in dependency order, source → transform → validate → load.
 * Rows that fail any stage are rejected (rejects file) and the run goes on; configuration and
 * authentication problems throw a CareEtlError (exit 2) before anything is loaded.
 */
export async function runPipeline(opts: RunOptions): Promise<RunReport> {
  const started = new Date();
  const now = opts.now ?? started;
  const mappingFile = resolve(opts.mappingFile);
  const mapping = await loadMapping(mappingFile, { env: opts.env ?? process.env });
  const compiled = compileMapping(mapping);
  const dryRun = opts.dryRun ?? false;
  const concurrency = opts.concurrency ?? 8;
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new CareEtlError(`Expected \`--concurrency\` to be an integer ≥ 1, got \`${opts.concurrency}\``, { exitCode: ExitCode.config });
  }
  const careDir = join(mapping.dir, '.care-etl');
  const rejectsFile = resolve(opts.rejectsFile ?? join(careDir, 'rejects.ndjson'));
  const report: RunReport = {
    mappingFile,
    dryRun,
    startedAt: started.toISOString(),
    finishedAt: '',
    durationMs: 0,
    order: compiled.order,
    mappings: Object.fromEntries(compiled.order.map((n) => [n, emptyCounts()])),
    totals: emptyCounts(),
    rejectsFile,
    ended: [],
    warnings: mapping.warnings.map((w) => w.message),
    exitCode: ExitCode.ok,
  };

  let target: Target | undefined;
  let ledger: Ledger | undefined;
  let scope: LedgerScope | undefined;
  let client: CareClient | undefined;
  let runId: number | undefined;
  let outcome: 'completed' | 'aborted' | 'failed' = 'failed';
  const rejects = new RejectsWriter(rejectsFile);
  const dryOut = new Map<string, WriteStream>();
  try {
    if (dryRun) {
      report.outDir = resolve(opts.outDir ?? join(careDir, 'dry-run'));
    } else {
      target = await openTarget(mapping, opts);
      report.target = { baseUrl: target.settings.baseUrl, tenantId: target.settings.tenantId, embedded: target.embedded, dataFile: target.dataFile };
      opts.onEvent?.({ type: 'target', ...report.target });
      client = new CareClient(target.settings, { retry: false });
      await preflight(client, opts.retry);
      report.statePath = resolve(opts.statePath ?? join(careDir, 'state.db'));
      ledger = Ledger.open(report.statePath);
      scope = ledger.scope(target.scopeUrl, target.settings.tenantId);
      runId = scope.beginRun({ mappingFile, dryRun });
      report.runId = runId;
    }
    await runPhases(compiled, { ...opts, dryRun, concurrency, now }, report, { client, scope, runId, rejects, dryOut });
    outcome = report.stoppedEarly ? 'aborted' : 'completed';
  } finally {
    await rejects.close().catch(() => {});
    await Promise.all([...dryOut.values()].map((s) => new Promise<void>((r) => s.end(() => r()))));
    const finished = new Date();
    report.finishedAt = finished.toISOString();
    report.durationMs = finished.getTime() - started.getTime();
    for (const c of Object.values(report.mappings)) for (const k of Object.keys(c) as (keyof MappingCounts)[]) report.totals[k] += c[k];
    report.exitCode = report.totals.rejected > 0 || report.stoppedEarly ? ExitCode.rejected : ExitCode.ok;
    if (scope && runId !== undefined) {
      try {
        scope.finishRun(runId, outcome, { totals: report.totals, stoppedEarly: report.stoppedEarly });
      } catch {
        /* the run's own error matters more */
      }
    }
    ledger?.close();
    await client?.close();
    await target?.close();
  }
  return report;
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
  client?: CareClient;
  scope?: LedgerScope;
  runId?: number;
  rejects: RejectsWriter;
  dryOut: Map<string, WriteStream>;
}

async function runPhases(
  compiled: CompiledMapping,
  opts: RunOptions & { dryRun: boolean; concurrency: number; now: Date },
  report: RunReport,
  st: PhaseState,
): Promise<void> {
  const { mapping } = compiled;
  const typeOf = new Map([...compiled.resources.values()].map((r) => [r.def.name, r.def.type]));
  const rejectedKeys = new Map<string, Set<string>>();
  const loadedKeys = new Map<string, KeyIndex>(); // dry run only: what `$ref` may point to
  const limiter = new AdaptiveLimiter({ initial: opts.concurrency, max: opts.concurrency, min: 1 });
  let totalRejected = 0;

  const ctx: EvalContext = {
    now: opts.now,
    resolveRef(name, key) {
      const type = typeOf.get(name);
      if (rejectedKeys.get(name)?.has(key)) throw new RefError(name, key, `${name} \`${key}\` was rejected in this run, so this reference cannot be resolved`, 'ref-rejected');
      if (opts.dryRun) {
        if (loadedKeys.get(name)?.has(key)) return `${type}/${placeholderId(key)}`;
      } else {
        const id = st.scope!.serverIdOf(name, key);
        if (id) return `${type}/${id}`;
      }
      throw new RefError(name, key, `no ${name} with key \`${key}\` has been loaded (not in its source, or not yet loaded)`, 'ref-missing');
    },
    sourceKey(reference) {
      const [type, id] = reference.split('/');
      return st.scope?.keyOfServerId(type, id)?.key;
    },
  };

  for (const name of compiled.order) {
    const res = compiled.resources.get(name)!;
    const counts = report.mappings[name];
    const source = mapping.sources[res.def.from];
    /** Keys `$ref` must not resolve to in this run. */
    const rejected = new Set<string>();
    rejectedKeys.set(name, rejected);
    /** Every key of a rejected row: still in the export, so not "missing" for onMissing: end. */
    const rejectedSeen = new Set<string>();
    const loaded = opts.dryRun ? new KeyIndex() : undefined;
    if (loaded) loadedKeys.set(name, loaded);
    let keylessRejects = 0;
    opts.onEvent?.({ type: 'phase-start', mapping: name, resourceType: res.def.type });
    const progress = () => opts.onEvent?.({ type: 'progress', mapping: name, counts, limit: limiter.limit });

    const onReject = (r: RejectRecord) => {
      counts.rejected++;
      totalRejected++;
      if (r.key === undefined) keylessRejects++;
      else {
        rejectedSeen.add(r.key);
        // A duplicate row does not make its key unusable (its first row was loaded), nor does a failed update
        // of a resource that exists on the server: references to them stay valid.
        if (r.issues[0]?.code !== 'duplicate-key' && !(r.stage === 'load' && st.scope?.serverIdOf(name, r.key))) rejected.add(r.key);
      }
      st.rejects.write(r);
      const { row: _row, raw: _raw, ...forDisplay } = r;
      opts.onEvent?.({ type: 'reject', reject: forDisplay });
    };
    const sync = st.client ? new ResourceSync(res, { client: st.client, scope: st.scope!, runId: st.runId!, limiter, retry: opts.retry ?? {}, now: opts.now }) : undefined;
    const apply = (item: MappedResource, o: SyncOutcome) => {
      switch (o.kind) {
        case 'created':
        case 'updated':
        case 'unchanged':
        case 'adopted':
          counts[o.kind]++;
          for (const member of (o.kind !== 'unchanged' && o.endedMembers) || []) {
            counts.ended++;
            report.ended.push({ mapping: name, key: item.key, serverId: o.serverId, member });
          }
          break;
        case 'rejected':
          onReject({ stage: 'load', mapping: name, source: item.origin.source, file: item.origin.file, line: item.origin.line, record: item.origin.record, lines: item.lines, key: item.key, issues: o.issues, row: undefined });
          break;
        case 'deferred':
          break;
      }
      progress();
    };

    const abort = new AbortController();
    const signal = opts.signal ? AbortSignal.any([opts.signal, abort.signal]) : abort.signal;
    const inFlight = new Set<Promise<void>>();
    const tooMany = () => opts.maxErrors !== undefined && totalRejected > opts.maxErrors;
    try {
      for await (const item of transformSource(res, openSource(source, { signal }), { ctx, validate: validateResource, onRead: () => counts.read++ })) {
        if (!item.ok) {
          onReject(item);
          progress();
        } else if (opts.dryRun) {
          loaded!.set(item.key, 0);
          writeDry(st.dryOut, report.outDir!, item);
          counts.written++;
          progress();
        } else {
          // Bounded hand-off: the transform waits when twice the concurrency is queued (flat memory).
          while (inFlight.size >= limiter.limit * 2) await Promise.race(inFlight);
          const p: Promise<void> = sync!.sync(item).then((o) => apply(item, o)).finally(() => inFlight.delete(p));
          inFlight.add(p);
        }
        if (tooMany()) {
          report.stoppedEarly = `more than ${opts.maxErrors} rows rejected (--max-errors)`;
          abort.abort();
          break;
        }
      }
    } finally {
      await Promise.allSettled(inFlight);
      sync?.flush();
    }
    if (sync) {
      for await (const { item, outcome } of sync.reconcile()) apply(item, outcome);
      sync.flush(); // the next phase's `$ref`s read these server ids from the ledger
      // A row rejected before loading is still in the export: it must not count as "gone".
      if (rejectedSeen.size) st.scope!.markSeen(name, [...rejectedSeen], st.runId!);
      if (res.def.onMissing === 'end') {
        if (report.stoppedEarly || keylessRejects > 0) {
          report.warnings.push(`${name}: onMissing: end skipped — ${report.stoppedEarly ? 'the run stopped early' : `${keylessRejects} row(s) were rejected before their key was known`}, so absent keys cannot be told apart from unread ones`);
        } else {
          const { ended, failed } = await sync.endMissing();
          counts.ended += ended.length;
          for (const e of ended) report.ended.push({ mapping: name, ...e });
          for (const f of failed) onReject({ stage: 'load', mapping: name, source: source.name, file: source.path, key: f.key, issues: f.issues });
        }
      }
    }
    opts.onEvent?.({ type: 'phase-end', mapping: name, counts });
    if (report.stoppedEarly) break;
  }
}

function writeDry(out: Map<string, WriteStream>, dir: string, item: MappedResource): void {
  let s = out.get(item.type);
  if (!s) out.set(item.type, (s = createPrivateWriteStream(join(dir, `${item.type}.ndjson`))));
  s.write(`${JSON.stringify(item.resource)}\n`);
}

export type { Issue };
