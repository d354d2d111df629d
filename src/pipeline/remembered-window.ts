/**
 * The concurrency window remembered per target (issue 28): a run of a (server, tenant) starts its capacity
 * discovery at the window the newest earlier run of that scope settled at — read from the run history the state
 * keeps (`runs.summary.concurrency`, SQLite or PostgreSQL alike) — instead of climbing from 4 again.
 */
import type { LedgerScope } from '../state/ledger.js';

/** Runs looked back at: a window older than this many runs of the target is not remembered. */
const RUNS_LOOKED_AT = 20;

export interface RememberedWindow {
  window: number;
  /** The run it was settled by. */
  runId: number;
}

/** The window the newest earlier run of this scope discovered (a pinned `--concurrency` or a dry run says nothing of the server). */
export function rememberedWindow(scope: LedgerScope | undefined): RememberedWindow | undefined {
  if (!scope) return undefined;
  for (const run of scope.recentRuns(RUNS_LOOKED_AT)) {
    const c = (run.summary as { concurrency?: { mode?: unknown; settled?: unknown } } | null | undefined)?.concurrency;
    if (c?.mode === 'discovered' && typeof c.settled === 'number' && Number.isInteger(c.settled) && c.settled >= 1) return { window: c.settled, runId: run.id };
  }
  return undefined;
}
