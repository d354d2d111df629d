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

/**
 * Every issue code care-etl itself produces. A typo where an issue is made or compared (`hasCode`) fails to
 * compile; docs/issue-codes are generated from nothing else.
 */
export const ISSUE_CODES = [
  // sources
  'source-config', 'source-format', 'not-object', 'source-missing', 'source-not-found', 'source-read', 'source-too-large', 'file-unreadable',
  'csv-syntax', 'csv-header', 'csv-ragged', 'csv-quote', 'json-syntax', 'json-records', 'opening', 'encoding-invalid',
  // mapping file
  'yaml', 'invalid', 'required', 'env-missing', 'interpolation-invalid', 'secret-in-file', 'target-invalid', 'insecure',
  'duplicate-name', 'lookup-file', 'lookup-name', 'lookup-column', 'lookup-duplicate', 'lookup-code-not-text',
  'jsonata-syntax', 'function-unknown', 'ref-unknown', 'ref-context', 'ref-dynamic', 'ref-cycle', 'ref-key-invalid',
  'match-invalid', 'resource-type-mismatch', 'lookup-unknown', 'variable-unknown', 'source-unknown', 'expression-timeout', 'file-exists', 'env-syntax', 'env-invalid', 'todo',
  // rows
  'jsonata', 'eval-failed', 'key-missing', 'key-invalid', 'duplicate-key', 'map-not-object', 'date-invalid', 'date-format-invalid',
  'date-zone-invalid', 'phone-invalid', 'phone-country', 'lookup-miss', 'type-invalid', 'number-not-text',
  'ref-missing', 'ref-rejected', 'ref-unresolved', 'value-too-large', 'ref-invalid', 'ref-key-missing', 'too-many-issues',
  // column contract (issue 22, part "contract"): a field a row expression reads is not a column of its source
  'column-missing',
  // load
  'duplicate-on-server', 'match-ambiguous', 'outcome-unknown', 'exception',
  // target (issue 22, part 4): no base URL although CARE_*, CI or `target:` suggest a server; --sandbox with one
  'target-missing', 'target-conflict',
  // issue 22 part 5 (regex): a pattern the linear-time engine cannot run; a source file that is not text
  'regex-unsupported', 'source-not-text',
] as const;

/** Codes made from an HTTP status or a transport failure. */
export type DerivedIssueCode = `http-${number}` | `transport-${'timeout' | 'reset' | 'refused' | 'dns' | 'other'}`;
export type KnownIssueCode = (typeof ISSUE_CODES)[number] | DerivedIssueCode;

declare const foreign: unique symbol;
/** A code defined outside care-etl and passed through as given: a server's OperationOutcome code, an ajv keyword, a YAML error code. */
export type ForeignIssueCode = string & { readonly [foreign]: true };
export const foreignCode = (code: string): ForeignIssueCode => code as ForeignIssueCode;

export type IssueCode = KnownIssueCode | ForeignIssueCode;

/** Compares with a known code (a typo fails to compile, which `issue.code === '…'` would not). */
export function hasCode(issue: Pick<Issue, 'code'> | undefined, code: KnownIssueCode): boolean {
  return issue?.code === code;
}

export interface Issue {
  severity: Severity;
  /** Short machine code (`ISSUE_CODES`, `http-404`, or a server's/schema's own code), e.g. `invalid`, `csv-ragged`. */
  code: IssueCode;
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

/**
 * Exit codes, one table for every command (README "Exit codes"):
 * 0 done; 1 done, but some rows were rejected (or a test case failed, or the state differs from the server);
 * 2 usage, configuration, mapping or authentication problem — nothing was loaded; 3 could not complete
 * (server unreachable, wrong base path, server failing beyond retries, interrupted, unexpected error).
 */
export const ExitCode = {
  ok: 0,
  rejected: 1,
  config: 2,
  incomplete: 3,
  /** `care-etl plan` only: the run would write to the server (terraform plan -detailed-exitcode's "2"). */
  changes: 4,
  /** `run` and `plan`: the ending guard refused to end a mapping's resources (`onMissing: end`); the rows loaded. */
  endingRefused: 5,
} as const;

export class CareEtlError extends Error {
  readonly issues: Issue[];
  /** What the user can do next. */
  hint?: string;
  readonly exitCode: number;

  constructor(message: string, opts: { issues?: Issue[]; hint?: string; exitCode?: number; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'CareEtlError';
    this.issues = opts.issues ?? [];
    this.hint = opts.hint;
    this.exitCode = opts.exitCode ?? ExitCode.config;
  }

  /** The issues a row rejected by this error carries (subclasses add their own head issue). */
  toIssues(): Issue[] {
    return this.issues.length ? this.issues : [{ severity: 'error', code: 'exception', message: this.message }];
  }

  /** Message plus one line per issue, ready for a terminal. */
  describe(): string {
    const lines = [this.message, ...this.issues.map((i) => `  ${formatIssue(i)}`)];
    if (this.hint) lines.push(`Hint: ${this.hint}`);
    return lines.join('\n');
  }
}

/**
 * The one normaliser from any thrown value to issues (a row's reject reasons, a test case's failure): a
 * CareEtlError knows its own; anything else is an unexpected `exception`. `where` fills missing locations.
 */
export function issuesOf(err: unknown, where?: Location): Issue[] {
  const issues: Issue[] =
    err instanceof CareEtlError ? err.toIssues() : [{ severity: 'error', code: 'exception', message: err instanceof Error ? err.message : String(err) }];
  return where ? issues.map((i) => (i.location ? i : { ...i, location: where })) : issues;
}
