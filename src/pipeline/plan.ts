/**
 * `care-etl plan`: what a run would do, computed against the state ledger and the live server with zero writes.
 * It is `execute`'s `plan` mode (src/pipeline/run-pipeline.ts): the same sources, transform, validation, `$ref`
 * order and listings as `state check`, each key decided by `ResourceSync.plan` exactly as `sync` decides it,
 * and `onMissing: end` by `ResourceSync.planEnds`. This file holds the phase, the plan document, the ledger
 * snapshot (the real state file is never written, not even a new scope row) and the exit code.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CareEtlError, ExitCode } from '../core/issues.js';
import type { CompiledResource } from '../mapping/compile-mapping.js';
import type { EvalContext } from '../mapping/functions.js';
import { placeholderId } from '../mapping/placeholder-id.js';
import type { ReconcilePolicy } from '../mapping/types.js';
import type { WritableType } from '../schemas/resource-types.js';
import { comparableDiff, type FieldChange } from '../load/identity.js';
import type { PlanOutcome, ResourceSync } from '../load/resource-sync.js';
import type { IndexBuild } from '../load/server-index.js';
import { openSource } from '../sources/open-source.js';
import type { SourceConfig } from '../sources/types.js';
import { Ledger, type LedgerScope } from '../state/ledger.js';
import { transformSource, type MappedResource } from '../transform/transform-source.js';
import { validateResource } from '../validate/resource-validator.js';
import type { RejectRecord } from '../transform/reject-record.js';
import type { MappingCounts, RunReport } from './run-pipeline.js';
import { guardEnding, type EndingSetting } from './ending-settings.js';
import type { EndingGuardReport } from '../load/ending-guard.js';

/**
 * `care-etl plan`'s exit code when the run would write to the server (create, update or end something), after
 * `terraform plan -detailed-exitcode`'s "2": here 4, since 1–3 already mean something in the project's table.
 */
export const PLAN_CHANGES_EXIT = ExitCode.changes;

/** Prefix of the ids a plan gives resources the run would create, so that `$ref`s to them resolve (`Patient/plan-<key>`). */
export const PLAN_PLACEHOLDER = 'plan';

export interface PlanCounts {
  /** Source rows read (rejected ones included). */
  read: number;
  /** Rows the run would skip (`where:` false, or a map producing nothing): neither sent nor rejected. */
  skipped: number;
  creates: number;
  updates: number;
  unchanged: number;
  /** Of the updates and unchanged: found on the server by the match rule, unknown to the state (recorded by the run). */
  adoptions: number;
  /** Associations a run would end: care teams (or Patients/Practitioners) of `onMissing: end`, and participants given an end date or dropped. */
  ends: number;
  /** Rows a run would reject (source, transform, validation, `$ref`, duplicates on the server, an end that would fail). */
  rejects: number;
  /** Recorded as loaded and unchanged, so the run sends nothing — but the server's copy differs or is gone. */
  drifted: number;
}

export interface PlannedCreate {
  key: string;
  line?: number;
  lines?: number[];
  /** Why a key the state records is created again. */
  recreate?: string;
  note?: string;
  /** What would be sent (references to resources this run would create first read `Type/plan-<key>`). */
  resource: unknown;
}

export interface PlannedUpdate {
  key: string;
  serverId: string;
  line?: number;
  lines?: number[];
  /** Found on the server by the match rule: the run records it, then updates it. */
  adopted?: boolean;
  /** Care team members (`Practitioner/<id>`) whose participation this update ends. */
  endedMembers?: string[];
  /** From the server's current resource to the one the run would send (`id`, `meta`, nulls and empty values ignored). Empty when the server already holds it and only the state's record is behind. */
  diff: FieldChange[];
}

export interface PlannedAdoption {
  key: string;
  serverId: string;
  /** The server's content differs: the run also updates it (listed under `updates`). */
  updated: boolean;
}

export interface PlannedEnd {
  key: string;
  serverId: string;
  /** One participant ended inside an update (its diff is the update's); absent: the whole resource is ended. */
  member?: string;
  diff?: FieldChange[];
}

/** A row the run would reject: where it is and why (never the row itself). */
export type PlannedReject = Pick<RejectRecord, 'stage' | 'file' | 'line' | 'record' | 'lines' | 'key' | 'issues'>;

export interface PlannedDrift {
  key: string;
  serverId: string;
  /** The recorded resource is gone from the server. */
  gone?: boolean;
  diff?: FieldChange[];
}

export interface MappingPlan {
  resourceType: WritableType;
  reconcile: ReconcilePolicy;
  counts: PlanCounts;
  creates: PlannedCreate[];
  updates: PlannedUpdate[];
  adoptions: PlannedAdoption[];
  ends: PlannedEnd[];
  rejects: PlannedReject[];
  drifted: PlannedDrift[];
  /** `onMissing: end`: the ending guard's numbers and verdict, as the run would decide (refused: `ends` holds no whole resource). */
  endingGuard?: EndingGuardReport;
}

/** The plan, as `--json` prints it and `--out` writes it. */
export interface PlanDocument {
  kind: 'care-etl-plan';
  version: 1;
  mappingFile: string;
  target?: RunReport['target'];
  statePath?: string;
  createdAt: string;
  durationMs: number;
  order: string[];
  /** The run would write to the server (create, update or end something): exit code 4. */
  changes: boolean;
  totals: PlanCounts;
  mappings: Record<string, MappingPlan>;
  indexes: IndexBuild[];
  warnings: string[];
  /** SIGINT/SIGTERM: the plan is incomplete (exit 3). */
  interrupted?: boolean;
}

const emptyPlanCounts = (): PlanCounts => ({ read: 0, skipped: 0, creates: 0, updates: 0, unchanged: 0, adoptions: 0, ends: 0, rejects: 0, drifted: 0 });

function emptyMappingPlan(resourceType: WritableType, reconcile: ReconcilePolicy): MappingPlan {
  return { resourceType, reconcile, counts: emptyPlanCounts(), creates: [], updates: [], adoptions: [], ends: [], rejects: [], drifted: [] };
}

function countsOf(c: MappingCounts, drifted: number): PlanCounts {
  return { read: c.read, skipped: c.skipped, creates: c.created, updates: c.updated, unchanged: c.unchanged, adoptions: c.adopted, ends: c.ended, rejects: c.rejected, drifted };
}

/** 3 interrupted; 4 the run would write to the server; 1 it would write nothing but reject rows; 0 nothing to do. */
export function planExitCode(report: RunReport): number {
  if (report.interrupted) return ExitCode.incomplete;
  // The run would exit 5 too: its ending guard would refuse (the run's other writes are still listed).
  if (Object.values(report.endingGuard ?? {}).some((g) => !g.allowed)) return ExitCode.endingRefused;
  const t = report.totals;
  if (t.created + t.updated + t.ended > 0) return PLAN_CHANGES_EXIT;
  return t.rejected > 0 ? ExitCode.rejected : ExitCode.ok;
}

/** The plan document of a report made by `planPipeline`. */
export function planDocument(report: RunReport): PlanDocument {
  const mappings = report.plan ?? {};
  const totals = emptyPlanCounts();
  for (const m of Object.values(mappings)) for (const k of Object.keys(totals) as (keyof PlanCounts)[]) totals[k] += m.counts[k];
  const doc: PlanDocument = {
    kind: 'care-etl-plan',
    version: 1,
    mappingFile: report.mappingFile,
    target: report.target,
    statePath: report.statePath,
    createdAt: report.startedAt,
    durationMs: report.durationMs,
    order: report.order,
    changes: totals.creates + totals.updates + totals.ends > 0,
    totals,
    mappings,
    indexes: report.indexes,
    warnings: report.warnings,
  };
  if (report.interrupted) doc.interrupted = true;
  return doc;
}

/** What `planPhase` needs from `runPhases`. */
export interface PlanPhaseContext {
  source: SourceConfig;
  ctx: EvalContext;
  /** runPhases' reject handler: counts, `$ref` blocking, progress event. */
  onReject: (r: RejectRecord) => void;
  /** This mapping's key → server id (or placeholder of a planned create), for the `$ref`s of later phases. */
  planned: Map<string, string>;
  progress: () => void;
  counts: MappingCounts;
  policy: ReconcilePolicy;
  signal?: AbortSignal;
  /** `onMissing: end`: the ending guard's allowance and the loaded count (see src/pipeline/ending-settings.ts). */
  ending?: EndingSetting;
}

/**
 * One mapping of `care-etl plan`: every row through transform and validation as in a run, each key classified
 * by `ResourceSync.plan` (the type listed once, with bodies), then `onMissing: end` by `planEnds`. Fills
 * `report.plan[name]` and the mapping's counts (what the run's report would say).
 */
export async function planPhase(res: CompiledResource, sync: ResourceSync, report: RunReport, x: PlanPhaseContext): Promise<void> {
  const name = res.def.name;
  const plan = emptyMappingPlan(res.def.type, x.policy);
  report.plan![name] = plan;
  const { counts } = x;
  /** Every key of the export, rejected rows included: not "missing" for onMissing: end. */
  const seen = new Set<string>();
  let keyless = 0;
  const reject = (r: RejectRecord) => {
    if (r.key === undefined) keyless++;
    else seen.add(r.key);
    plan.rejects.push({ stage: r.stage, file: r.file, line: r.line, record: r.record, lines: r.lines, key: r.key, issues: r.issues });
    x.onReject(r);
  };
  const where = (item: MappedResource) => ({ line: item.origin.line, ...(item.lines ? { lines: item.lines } : {}) });
  const tally = (item: MappedResource, o: PlanOutcome) => {
    switch (o.kind) {
      case 'create':
        counts.created++;
        plan.creates.push({ key: item.key, ...where(item), ...(o.recreate ? { recreate: o.recreate } : {}), ...(o.note ? { note: o.note } : {}), resource: item.resource });
        x.planned.set(item.key, placeholderId(item.key, PLAN_PLACEHOLDER));
        break;
      case 'update':
        counts.updated++;
        if (o.adopted) {
          counts.adopted++;
          plan.adoptions.push({ key: item.key, serverId: o.serverId, updated: true });
        }
        plan.updates.push({ key: item.key, serverId: o.serverId, ...where(item), ...(o.adopted ? { adopted: true } : {}), ...(o.endedMembers ? { endedMembers: o.endedMembers } : {}), diff: comparableDiff(o.before, o.after) });
        for (const member of o.endedMembers ?? []) {
          counts.ended++;
          plan.ends.push({ key: item.key, serverId: o.serverId, member });
        }
        x.planned.set(item.key, o.serverId);
        break;
      case 'unchanged':
        counts.unchanged++;
        if (o.adopted) {
          counts.adopted++;
          plan.adoptions.push({ key: item.key, serverId: o.serverId, updated: false });
        }
        if (o.drift) plan.drifted.push(o.drift.before ? { key: item.key, serverId: o.serverId, diff: comparableDiff(o.drift.before, o.drift.after) } : { key: item.key, serverId: o.serverId, gone: true });
        x.planned.set(item.key, o.serverId);
        break;
      case 'rejected':
        reject({ stage: 'load', mapping: name, source: item.origin.source, file: item.origin.file, line: item.origin.line, record: item.origin.record, lines: item.lines, key: item.key, issues: o.issues });
        break;
      case 'deferred':
        return;
    }
    x.progress();
  };

  try {
    for await (const item of transformSource(res, openSource(x.source, { signal: x.signal }), { ctx: x.ctx, validate: validateResource, onRead: () => counts.read++, onSkip: (n) => (counts.skipped += n) })) {
      if (x.signal?.aborted) break;
      if (!item.ok) {
        reject(item);
        x.progress();
        continue;
      }
      seen.add(item.key);
      tally(item, await sync.plan(item));
    }
  } catch (err) {
    if (!x.signal?.aborted) throw err;
  }
  if (x.signal?.aborted) {
    report.interrupted = true;
    report.stoppedEarly = 'interrupted (SIGINT/SIGTERM): the plan is incomplete';
    return;
  }
  for await (const { item, outcome } of sync.settleAmbiguousPlans()) tally(item, outcome);
  if (sync.sharedMatchValues) {
    report.warnings.push(`${name}: ${sync.sharedMatchValues} key(s) share their match value (\`match: ${res.def.match}\`) with another key; without the state they are told apart on the server by content only — \`care-etl validate --sample N\` names them`);
  }
  if (res.def.onMissing === 'end') {
    if (keyless > 0) {
      report.warnings.push(`${name}: onMissing: end skipped — ${keyless} row(s) would be rejected before their key was known, so absent keys cannot be told apart from unread ones`);
    } else {
      const { ends, failed, wouldEnd } = await sync.planEnds(seen);
      const members = plan.ends.length; // participants ended inside updates, listed above
      const allowed = !x.ending || guardEnding(report, res, x.ending, { wouldEnd, rowsRead: counts.read, membersEnded: members });
      if (report.endingGuard?.[name]) plan.endingGuard = report.endingGuard[name];
      if (allowed) {
        for (const e of ends) {
          counts.ended++;
          plan.ends.push({ key: e.key, serverId: e.serverId, diff: comparableDiff(e.before, e.after) });
        }
        for (const f of failed) reject({ stage: 'load', mapping: name, source: x.source.name, file: x.source.path, key: f.key, issues: f.issues });
      }
    }
  }
  if (plan.drifted.length) {
    const gone = plan.drifted.filter((d) => d.gone).length;
    report.warnings.push(
      `${name}: ${plan.drifted.length} resource(s) recorded as loaded and unchanged differ on the server${gone ? ` (${gone} gone from it)` : ''}; the run leaves them${x.policy === 'always' ? '' : ' — `--reconcile always` would bring them back in line'}`,
    );
  }
  plan.counts = countsOf(counts, plan.drifted.length);
}

/** The read methods of a `LedgerScope` a plan may call; anything else throws (a plan writes nothing). */
const READS = new Set<PropertyKey>(['baseUrl', 'tenantId', 'get', 'entries', 'pending', 'notSeenSince', 'loadedCount', 'keyOfServerId', 'serverIdOf', 'getWatermark', 'counts', 'recentRuns', 'deliveredVersion', 'deliveredCount']);

/** A view of `scope` that refuses every write: a plan's bug fails loudly instead of touching the state. */
export function readOnlyScope(scope: LedgerScope): LedgerScope {
  return new Proxy(scope, {
    get(target, prop) {
      if (!READS.has(prop)) {
        if (prop === 'then') return undefined; // not a thenable
        return () => {
          throw new Error(`internal: care-etl plan tried to write the state (${String(prop)})`);
        };
      }
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/**
 * The state ledger as a plan reads it: a consistent copy of the state file (SQLite online backup, taken under
 * the same exclusive lock a run holds, so never half of a run's writes), opened from a private temporary folder
 * (0700, the copy 0600: it holds source keys) and removed by `dispose`. The real file's content is never written —
 * not even the scope row a new server or tenant would get; only a WAL left by a killed run is folded into it when the
 * snapshot's connection closes (SQLite's own recovery, which the next run would do: same content). No state file:
 * an empty in-memory ledger (nothing is created).
 */
export async function openLedgerSnapshot(path: string, opts: { busyTimeoutMs?: number } = {}): Promise<{ ledger: Ledger; dispose(): void }> {
  if (!existsSync(path)) return { ledger: Ledger.open(':memory:'), dispose() {} };
  const { default: Database } = await import('better-sqlite3');
  const dir = mkdtempSync(join(tmpdir(), 'care-etl-plan-'));
  const dispose = () => rmSync(dir, { recursive: true, force: true });
  const copy = join(dir, 'state.db');
  try {
    let db: InstanceType<typeof Database> | undefined;
    try {
      db = new Database(path, { fileMustExist: true, timeout: opts.busyTimeoutMs ?? 5000 });
      db.pragma('locking_mode = EXCLUSIVE');
      db.exec('BEGIN IMMEDIATE; COMMIT;'); // the lock now: a run in progress makes this fail, not a torn copy
      await db.backup(copy);
    } catch (err) {
      const code = (err as { code?: unknown } | null)?.code;
      if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') {
        throw new CareEtlError(`State file ${path} is in use by another care-etl process; a plan reads it once that run ends.`, {
          hint: 'wait for the other run to finish, or plan against a different state file with --state',
          cause: err,
          exitCode: ExitCode.incomplete,
        });
      }
      throw new CareEtlError(`State file ${path}: reading it failed: ${(err as Error)?.message ?? String(err)}`, { hint: 'delete or move the state file with --state', cause: err });
    } finally {
      db?.close();
    }
    try {
      return { ledger: Ledger.open(copy), dispose };
    } catch (err) {
      if (err instanceof CareEtlError) throw new CareEtlError(err.message.split(copy).join(path), { hint: err.hint, cause: err, exitCode: err.exitCode });
      throw err;
    }
  } catch (err) {
    dispose();
    throw err;
  }
}
