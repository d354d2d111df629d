/**
 * `--fail-on-rejects N|P%` (dbt's `error_if`): how many rejected rows a run may have and still exit 0. A count, or a
 * percentage of the source rows read. Without it any reject is exit 1; the rejects are reported either way.
 */
import { CareEtlError, ExitCode } from '../core/issues.js';

type RejectThreshold = { count: number } | { percent: number };

/** `7` or `0.5%` / `5 %`; undefined for anything else (a negative, a fraction of a row, over 100%). */
export function parseRejectThreshold(input: string | number): RejectThreshold | undefined {
  const s = String(input).trim();
  if (/^\d+$/.test(s)) return Number.isSafeInteger(Number(s)) ? { count: Number(s) } : undefined;
  const m = /^(\d+(?:\.\d+)?)\s*%$/.exec(s);
  return m && Number(m[1]) <= 100 ? { percent: Number(m[1]) } : undefined;
}

/** The p-queue-style message for a bad `--fail-on-rejects` value. */
export function rejectThresholdError(input: unknown): string {
  return `Expected \`--fail-on-rejects\` to be a count ≥ 0 or a percentage like 5%, got \`${String(input)}\``;
}

/** The threshold as given, refused (exit 2) when it is neither a count nor a percentage. */
export function checkedRejectThreshold(input: string | undefined): string | undefined {
  if (input !== undefined && !parseRejectThreshold(input)) throw new CareEtlError(rejectThresholdError(input), { exitCode: ExitCode.config });
  return input;
}

/** At or below the threshold: the run's rejects do not fail it. */
export function withinRejectThreshold(t: RejectThreshold, rejected: number, read: number): boolean {
  return 'count' in t ? rejected <= t.count : read > 0 && (rejected / read) * 100 <= t.percent;
}

/** The warning a run within its threshold carries (summary, report, JSON log): the rejects are still there. */
export function withinThresholdWarning(input: string, rejected: number, read: number): string {
  const share = read > 0 ? ` (${((rejected / read) * 100).toFixed(1)}% of ${read} rows read)` : '';
  return `${rejected} row(s) rejected${share}: at or below --fail-on-rejects ${input}, so the run exits 0 — the rejects are in the rejects file all the same`;
}
