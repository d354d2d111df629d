/**
 * The run's vocabulary: the report `run`, `plan` and `state check|rebuild` return (`RunReport`), its counts, the
 * plan's per-mapping details, and the events the CLI renders progress from. Types only (and their empty values),
 * so that every layer above the pipeline imports them without importing the pipeline itself.
 */
import type { EndingGuardReport } from '../load/ending-guard.js';
import type { FieldChange } from '../load/identity.js';
import type { IndexBuild } from '../load/server-index.js';
import type { ReconcilePolicy } from '../mapping/types.js';
import type { WritableType } from '../schemas/resource-types.js';
import type { RejectRecord } from '../transform/reject-record.js';

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
  /** `--verify-after-load`: per phase that listed its type again after creating, the cost and what it found. */
  verification?: PhaseVerification[];
  /** `care-etl state rebuild|check`: per mapping, the source, the ledger and the server side by side. */
  state?: Record<string, StateCounts>;
  /** `care-etl plan`: per mapping, what the run would do (its counts are in `mappings`; see src/pipeline/plan.ts). */
  plan?: Record<string, MappingPlan>;
  /** Why the run stopped before the end (`--max-errors`, interrupted). */
  stoppedEarly?: string;
  /** SIGINT/SIGTERM (the `signal`): rows not read yet are left for the next run; the bookkeeping was done. */
  interrupted?: boolean;
  /** Interrupted: the state's creates whose outcome is unknown (intents), looked up by the next run before it creates anything. */
  pendingCreates?: number;
  /**
   * Requests in flight (a run that sent requests): `pinned` by `--concurrency`, or `discovered` within the
   * `ceiling` (`--max-concurrency`). `settled`: the window most of the loading time was spent at (time-weighted
   * median while requests were queued or running); `max`: the largest window; `maxInFlight`: most requests at once.
   */
  concurrency?: {
    mode: 'pinned' | 'discovered';
    settled: number;
    max: number;
    maxInFlight: number;
    ceiling: number;
    /** The window the run started at; `rememberedFrom`: the earlier run of this target that settled there (issue 28). */
    started?: number;
    rememberedFrom?: number;
  };
  /** `--fail-on-rejects` as given: rejects up to it do not fail the run (exit 0, with a warning). */
  failOnRejects?: string;
  /** 0 all loaded, 1 some rows rejected (or `--max-errors`), 3 interrupted — see `ExitCode` and the README. */
  exitCode: number;
}

/**
 * The listing a phase made after its creates (src/load/duplicate-check.ts): its cost (`pages`, one GET each plus
 * retries; `durationMs`), the keys checked, and the keys found duplicated by another writer or missing on the server.
 */
export interface PhaseVerification {
  mapping: string;
  resourceType: WritableType;
  /** Keys created by the phase and checked against the listing. */
  checked: number;
  pages: number;
  /** Resources listed. */
  resources: number;
  durationMs: number;
  /**
   * A listing started before the phase's creates ended (issue 28), read again from its last page while they went on
   * (as they added pages) and after them: the pages of all those readings and the resources they added (believed: they
   * showed every key created after the listing started).
   */
  reread?: { pages: number; resources: number };
  /**
   * Why the early listing was not believed and the type was listed again after the creates (`pages`… are that
   * listing's): it failed or was refused, its re-read failed, or the re-read lacked a key created after it started
   * (the server does not list in the order resources are added, or lacks an id it answered with).
   */
  fallback?: 'early-listing-failed' | 'reread-failed' | 'not-append-ordered';
  /** Keys found duplicated, and missing (the lists below stop at 1,000). */
  duplicateCount: number;
  missingCount: number;
  /** Keys with another copy on the server no state key holds: this run's id first, then the others (at most 1,000 listed). */
  duplicates: { key: string; serverIds: string[] }[];
  /** Keys whose create was answered with an id the listing lacks: left pending (at most 1,000 listed). */
  missing: { key: string; serverId: string }[];
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
  /** `purpose: 'verify'`: the listing after a phase's creates (`--verify-after-load`), not a look-up before creating. */
  | { type: 'index'; phase: 'start' | 'end'; build: IndexBuild; purpose?: 'verify' }
  | { type: 'phase-start'; mapping: string; resourceType: WritableType }
  | { type: 'progress'; mapping: string; counts: MappingCounts; limit?: number; bytes?: ByteProgress }
  | { type: 'phase-end'; mapping: string; counts: MappingCounts; bytes?: ByteProgress }
  | { type: 'reject'; reject: RejectRecord };

/**
 * `care-etl plan`: a mapping's counts in the run's own words (what the run's report would say), plus `drifted`:
 * recorded as loaded and unchanged, so the run sends nothing — but the server's copy differs or is gone.
 */
export type PlanCounts = Omit<MappingCounts, 'written' | 'notSelected'> & { drifted: number };

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

export interface PlannedEnding {
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
  ends: PlannedEnding[];
  rejects: PlannedReject[];
  drifted: PlannedDrift[];
  /** `onMissing: end`: the ending guard's numbers and verdict, as the run would decide (refused: `ends` holds no whole resource). */
  endingGuard?: EndingGuardReport;
}

export const emptyCounts = (): MappingCounts => ({ read: 0, skipped: 0, created: 0, updated: 0, unchanged: 0, adopted: 0, rejected: 0, ended: 0, written: 0 });

export const emptyStateCounts = (): StateCounts => ({
  sourceKeys: 0,
  inLedger: 0,
  foundOnServer: 0,
  differing: 0,
  foundByMatch: 0,
  notOnServer: 0,
  onlyOnServer: 0,
  syncedButAbsent: 0,
  rejected: 0,
});
