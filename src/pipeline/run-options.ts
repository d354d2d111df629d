/** What `runPipeline`, `planPipeline` and `checkState`/`rebuildState` are given (the CLI's flags, resolved). */
import type { ClientOptions } from '../api/client.js';
import type { ConnectionInput } from '../api/connection.js';
import type { RetryOptions } from '../core/retry.js';
import type { ReconcilePolicy } from '../mapping/types.js';
import type { VerifyPolicy } from '../load/duplicate-check.js';
import type { RunEvent } from './run-report.js';

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
   * `--fail-on-rejects N|P%`: rejected rows up to this count, or this percentage of the rows read, still exit 0
   * (a warning says so); default: any reject is exit 1. See src/pipeline/reject-threshold.ts.
   */
  failOnRejects?: string;
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
  /**
   * `--verify-after-load`: list each type this run created again at the end of its phase, to name the keys another
   * writer created too (`duplicate-on-server`) and creates answered with an id the server lacks (default `auto`: when
   * the phase created something, unless `sharedState`). See src/load/duplicate-check.ts.
   */
  verifyAfterLoad?: VerifyPolicy;
  /** The state is shared by every runner and its lease held (Postgres): `auto` skips the check, exactly-once holds there. */
  sharedState?: boolean;
  /** `_count` asked for when listing the server to reconcile (default 1000; 0 = the server's own page size). */
  indexPageSize?: number;
  retry?: RetryOptions;
  /** `--wait-for-lock`: how long a run waits for the lease another run holds on the same server and tenant (default 0: exit 3 at once). */
  waitForLockMs?: number;
  /** Lines about the run lease (waiting, a stale lease taken over), for stderr. */
  onLockNotice?: (line: string) => void;
  /** The embedded sandbox's data file when no target is configured (default `.care-etl/sandbox.db`). */
  sandboxDataFile?: string;
  onEvent?: (e: RunEvent) => void;
  /** One call per HTTP attempt (the CLI's `--verbose` request log); never sees headers or bodies. */
  onRequest?: ClientOptions['onResponse'];
  /**
   * Interrupts the run (SIGINT/SIGTERM): no further row is read, waits and requests in flight are abandoned (a
   * create cut off stays pending), the ledger and the rejects file are written, and the report says `interrupted`
   * (docs/design/cancel.md).
   */
  signal?: AbortSignal;
  now?: Date;
}

/** The options as the phases see them: the dry run settled (never outside `run`), one clock for the whole run. */
export type PhaseOptions = RunOptions & { dryRun: boolean; now: Date };
