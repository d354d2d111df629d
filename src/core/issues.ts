/**
 * One error type for the whole toolkit (after Medplum's OperationOutcome-carrying errors):
 * validators collect every issue and fail once; the CLI renders issues and picks the exit code.
 */
export type Severity = 'fatal' | 'error' | 'warning' | 'information';

/** Where a problem was found: a file position (YAML, CSV line) and/or a place inside a JSONata expression. */
export interface Location {
  file?: string;
  line?: number;
  column?: number;
  /** 1-based record number inside a source (JSON/NDJSON element, CSV data row). */
  record?: number;
}

export interface Issue {
  severity: Severity;
  /** Short machine code, e.g. `invalid`, `required`, `jsonata`, `ref-unknown`, `csv-ragged`. */
  code: string;
  message: string;
  /** JSON path inside the resource or mapping document, e.g. `/name/0/family`. */
  path?: string;
  location?: Location;
}

export function formatLocation(loc: Location | undefined): string {
  if (!loc) return '';
  let s = loc.file ?? '';
  if (loc.line !== undefined) s += `:${loc.line}${loc.column !== undefined ? `:${loc.column}` : ''}`;
  else if (loc.record !== undefined) s += `#${loc.record}`;
  return s;
}

export function formatIssue(issue: Issue): string {
  const where = formatLocation(issue.location);
  const path = issue.path ? ` at ${issue.path}` : '';
  return `${where ? `${where}: ` : ''}${issue.severity} [${issue.code}]${path}: ${issue.message}`;
}

/** Exit codes documented in the README. */
export const ExitCode = {
  ok: 0,
  rejected: 1,
  config: 2,
} as const;

export class CareEtlError extends Error {
  readonly issues: Issue[];
  /** What the user can do next. */
  readonly hint?: string;
  readonly exitCode: number;

  constructor(message: string, opts: { issues?: Issue[]; hint?: string; exitCode?: number; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'CareEtlError';
    this.issues = opts.issues ?? [];
    this.hint = opts.hint;
    this.exitCode = opts.exitCode ?? ExitCode.config;
  }

  /** Message plus one line per issue, ready for a terminal. */
  describe(): string {
    const lines = [this.message, ...this.issues.map((i) => `  ${formatIssue(i)}`)];
    if (this.hint) lines.push(`Hint: ${this.hint}`);
    return lines.join('\n');
  }
}
