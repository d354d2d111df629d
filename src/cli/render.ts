import type { Issue } from '../core/issues.js';
import { CareEtlError, ExitCode, formatIssue } from '../core/issues.js';
import { redact, type Secret } from '../core/secret.js';

/** A small fixed-width table (oclif 4 dropped its table helper; this is all we need). */
export function table(head: string[], rows: (string | number)[][]): string {
  const cells = [head, ...rows.map((r) => r.map(String))];
  const widths = head.map((_, i) => Math.max(...cells.map((r) => r[i]?.length ?? 0)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(head), widths.map((w) => '─'.repeat(w)).join('  '), ...cells.slice(1).map(line)].join('\n');
}

export interface ErrorJson {
  error: { name: string; message: string; hint?: string; issues: Issue[] };
  exitCode: number;
}

/** Renders any thrown value for the terminal or `--json`, with every known secret scrubbed. */
export function describeError(err: unknown, secrets: (Secret | string | undefined)[] = []): { text: string; json: ErrorJson } {
  const e = err instanceof CareEtlError ? err : undefined;
  const message = err instanceof Error ? err.message : String(err);
  const text = e ? e.describe() : `Unexpected error: ${message}`;
  const json: ErrorJson = {
    error: { name: err instanceof Error ? err.name : 'Error', message, hint: e?.hint, issues: e?.issues ?? [] },
    exitCode: e?.exitCode ?? ExitCode.config,
  };
  return { text: redact(text, secrets), json: JSON.parse(redact(JSON.stringify(json), secrets)) as ErrorJson };
}

export { formatIssue };

/** A command that failed: the error on stderr (unless `--json`), the exit code set, the JSON body returned. */
export function failCommand(err: unknown, secrets: (Secret | string | undefined)[], json: boolean): ErrorJson {
  const { text, json: body } = describeError(err, secrets);
  if (!json) process.stderr.write(`${text}\n`);
  process.exitCode = body.exitCode;
  return body;
}
