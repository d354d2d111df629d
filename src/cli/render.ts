import type { Issue } from '../core/issues.js';
import { CareEtlError, ExitCode, formatIssue } from '../core/issues.js';
import { redactKnown } from '../core/secret.js';

/** A small fixed-width table (oclif 4 dropped its table helper; this is all we need). */
export function table(head: string[], rows: (string | number)[][]): string {
  const cells = [head, ...rows.map((r) => r.map(String))];
  const widths = head.map((_, i) => Math.max(...cells.map((r) => r[i]?.length ?? 0)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(head), widths.map((w) => '─'.repeat(w)).join('  '), ...cells.slice(1).map(line)].join('\n');
}

/**
 * The version of the `--json` documents' shape, in every one of them beside `exitCode`: raised when a field is
 * renamed, removed or changes meaning (new fields do not raise it). The plan's own `version` is its file format.
 */
export const JSON_FORMAT_VERSION = 1;

export interface ErrorJson {
  error: { name: string; message: string; hint?: string; issues: Issue[] };
  exitCode: number;
  formatVersion: number;
}

const BUG_HINT = 'This looks like a bug in care-etl: run again with --verbose and report the output (it holds no secrets).';

/** Renders any thrown value for the terminal or `--json`, with every known secret scrubbed. */
export function describeError(err: unknown): { text: string; json: ErrorJson } {
  const e = err instanceof CareEtlError ? err : undefined;
  const message = err instanceof Error ? err.message : String(err);
  const text = e ? e.describe() : `Unexpected error: ${message}\nHint: ${BUG_HINT}`;
  const json: ErrorJson = {
    error: { name: err instanceof Error ? err.name : 'Error', message, hint: e ? e.hint : BUG_HINT, issues: e?.issues ?? [] },
    exitCode: e?.exitCode ?? ExitCode.incomplete,
    formatVersion: JSON_FORMAT_VERSION,
  };
  return { text: redactKnown(text), json: JSON.parse(redactKnown(JSON.stringify(json))) as ErrorJson };
}

export { formatIssue };
