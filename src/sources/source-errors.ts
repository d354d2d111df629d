import { CareEtlError, ExitCode, issue, type Issue, type KnownIssueCode } from '../core/issues.js';
import type { Origin, SourceConfig, SourceItem } from './types.js';

/**
 * Builders for the two kinds of problems a source reader reports:
 * - a fatal `CareEtlError` (exit code 2) when the file as a whole cannot be read;
 * - a `{ ok: false }` reject for one record, after which reading goes on.
 * Messages name the source, file, line/record and reason — never field values (PHI).
 */

export interface FatalDetails {
  code: KnownIssueCode;
  line?: number;
  /** 1-based, with `line` (e.g. where trailing data after a JSON document starts). */
  column?: number;
  record?: number;
  hint?: string;
  cause?: unknown;
  /** Extra issues (e.g. one per bad header name); default: one issue built from the message. */
  issues?: Issue[];
}

/** Control characters (C0, DEL, C1), line/paragraph separators and bidirectional controls: never raw on a terminal. */
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** `s` with every control character written as `\u{..}` (messages are one line, and ANSI escapes stay inert). */
export function escapeControls(s: string): string {
  return s.replace(UNSAFE, (c) => `\\u{${c.charCodeAt(0).toString(16)}}`);
}

/**
 * Source text (a header name, a key) quoted for a message: JSON-style, control characters escaped, at most
 * `max` characters.
 */
export function showText(s: string, max = 64): string {
  const cut = s.length > max ? `${s.slice(0, max)}…` : s;
  return escapeControls(JSON.stringify(cut));
}

export function sourceFatal(cfg: SourceConfig, message: string, details: FatalDetails): CareEtlError {
  message = escapeControls(message);
  const issues = details.issues?.map((i) => ({ ...i, message: escapeControls(i.message) })) ?? [
    issue.fatal(details.code, message, { location: { file: cfg.path, line: details.line, column: details.column, record: details.record } }),
  ];
  const where = details.line !== undefined ? `${cfg.path}:${details.line}${details.column !== undefined ? `:${details.column}` : ''}` : cfg.path;
  return new CareEtlError(`Source \`${cfg.name}\`: ${where}: ${message}`, {
    issues,
    hint: details.hint,
    exitCode: ExitCode.config,
    cause: details.cause,
  });
}

export function rejectItem(origin: Origin, code: KnownIssueCode, message: string, raw?: string): SourceItem {
  const problem = issue.error(code, escapeControls(message), { location: { file: origin.file, line: origin.line, record: origin.record } });
  return raw === undefined ? { ok: false, origin, issues: [problem] } : { ok: false, origin, issues: [problem], raw };
}

/** True for errors that mean "the caller aborted", which are passed through unchanged. */
export function isAbortError(err: unknown): boolean {
  return err instanceof Error && (err.name === 'AbortError' || (err as { code?: unknown }).code === 'ABORT_ERR');
}

/** Wraps an unexpected error (I/O, library) into a fatal error naming the source; keeps CareEtlError / AbortError. */
export function wrapReadError(cfg: SourceConfig, err: unknown, details: { line?: number; record?: number; what?: string } = {}): unknown {
  if (err instanceof CareEtlError || isAbortError(err)) return err;
  const code = (err as { code?: unknown } | null)?.code;
  // Node system errors (EIO, EISDIR, …) name no data; library errors may quote the input, so they are summarised.
  const reason =
    typeof code === 'string' && /^E[A-Z]+$/.test(code) && err instanceof Error
      ? err.message
      : `${details.what ?? 'read error'}${typeof code === 'string' ? ` (${code})` : ''}`;
  return sourceFatal(cfg, `cannot read the file: ${reason}`, {
    code: 'source-read',
    line: details.line,
    record: details.record,
    cause: err,
  });
}
