/**
 * `care-etl plan`: what a run would do, computed against the state ledger and the live server with zero writes.
 * It is `execute`'s `plan` mode (src/pipeline/phases/plan.ts): the same sources, transform, validation, `$ref`
 * order and listings as `state check`, each key decided by `ResourceSync.plan` exactly as `sync` decides it,
 * and `onMissing: end` by `ResourceSync.planEnds`. This file holds the plan document, the ledger snapshot (the
 * real state file is never written, not even a new scope row) and the exit code.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CareEtlError, ExitCode } from '../core/issues.js';
import type { IndexBuild } from '../load/server-index.js';
import { Ledger, type LedgerScope } from '../state/ledger.js';
import { isPostgresLocation } from '../state/state-location.js';
import type { MappingPlan, PlanCounts, RunReport } from './run-report.js';

/**
 * `care-etl plan`'s exit code when the run would write to the server (create, update or end something), after
 * `terraform plan -detailed-exitcode`'s "2": here 4, since 1–3 already mean something in the project's table.
 */
export const PLAN_CHANGES_EXIT = ExitCode.changes;

/** Prefix of the ids a plan gives resources the run would create, so that `$ref`s to them resolve (`Patient/plan-<key>`). */
export const PLAN_PLACEHOLDER = 'plan';

/** The plan, as `--json` prints it and `--out` writes it. */
export interface PlanDocument {
  kind: 'care-etl-plan';
  version: 2;
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

export const emptyPlanCounts = (): PlanCounts => ({ read: 0, skipped: 0, created: 0, updated: 0, unchanged: 0, adopted: 0, rejected: 0, ended: 0, drifted: 0 });

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
    version: 2,
    mappingFile: report.mappingFile,
    target: report.target,
    statePath: report.statePath,
    createdAt: report.startedAt,
    durationMs: report.durationMs,
    order: report.order,
    changes: totals.created + totals.updated + totals.ended > 0,
    totals,
    mappings,
    indexes: report.indexes,
    warnings: report.warnings,
  };
  if (report.interrupted) doc.interrupted = true;
  return doc;
}

/** The read methods of a `LedgerScope` a plan may call; anything else throws (a plan writes nothing). */
const READS = new Set<PropertyKey>([
  'baseUrl',
  'tenantId',
  'get',
  'entries',
  'keys',
  'pending',
  'notSeenSince',
  'notSeenCount',
  'loadedCount',
  'keyOfServerId',
  'serverIdOf',
  'getWatermark',
  'counts',
  'recentRuns',
  'deliveredVersion',
  'deliveredCount',
]);

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
 * The state ledger as a plan reads it: a consistent copy of the state file (`VACUUM INTO`, one read transaction: never
 * half of a write transaction; a plan takes no run lease, so during a run it sees what that run has done so far), opened from a private temporary folder
 * (0700, the copy 0600: it holds source keys) and removed by `dispose`. The real file's content is never written —
 * not even the scope row a new server or tenant would get; only a WAL left by a killed run is folded into it when the
 * snapshot's connection closes (SQLite's own recovery, which the next run would do: same content). No state file:
 * an empty in-memory ledger (nothing is created).
 */
export async function openLedgerSnapshot(path: string, opts: { busyTimeoutMs?: number } = {}): Promise<{ ledger: Ledger; dispose(): void }> {
  // PostgreSQL: the shared state itself, read live (behind the read-only view); only a new scope's row is written.
  if (isPostgresLocation(path)) return { ledger: Ledger.open(path, opts), dispose() {} };
  if (!existsSync(path)) return { ledger: Ledger.open(':memory:'), dispose() {} };
  const { default: Database } = await import('better-sqlite3');
  const dir = mkdtempSync(join(tmpdir(), 'care-etl-plan-'));
  const dispose = () => rmSync(dir, { recursive: true, force: true });
  const copy = join(dir, 'state.db');
  try {
    let db: InstanceType<typeof Database> | undefined;
    try {
      db = new Database(path, { fileMustExist: true, timeout: opts.busyTimeoutMs ?? 5000 });
      db.prepare('VACUUM INTO ?').run(copy);
    } catch (err) {
      const code = (err as { code?: unknown } | null)?.code;
      if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') {
        throw new CareEtlError(`State file ${path} stayed locked by another process past the busy timeout; the plan could not read it.`, {
          hint: 'retry when the other process is done, or plan against a different state file with --state',
          cause: err,
          exitCode: ExitCode.incomplete,
        });
      }
      throw new CareEtlError(`State file ${path}: reading it failed: ${(err as Error)?.message ?? String(err)}`, {
        hint: 'delete or move the state file with --state',
        cause: err,
      });
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
