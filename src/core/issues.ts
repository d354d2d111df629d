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
 * Every issue code care-etl itself produces. A typo where an issue is made (`issue.*`) or compared (`hasCode`)
 * fails to compile; each code needs its line in `ISSUE_CODE_MEANINGS`, from which docs/issue-codes.md is generated.
 */
export const ISSUE_CODES = [
  // sources
  'source-config',
  'source-format',
  'not-object',
  'source-missing',
  'source-not-found',
  'source-read',
  'source-too-large',
  'file-unreadable',
  'csv-syntax',
  'csv-header',
  'csv-ragged',
  'csv-quote',
  'json-syntax',
  'json-records',
  'opening',
  'encoding-invalid',
  // mapping file
  'yaml',
  'invalid',
  'required',
  'env-missing',
  'interpolation-invalid',
  'secret-in-file',
  'target-invalid',
  'insecure',
  'duplicate-name',
  'lookup-file',
  'lookup-name',
  'lookup-column',
  'lookup-duplicate',
  'lookup-code-not-text',
  'jsonata-syntax',
  'function-unknown',
  'ref-unknown',
  'ref-context',
  'ref-dynamic',
  'ref-cycle',
  'ref-key-invalid',
  'match-invalid',
  'resource-type-mismatch',
  'lookup-unknown',
  'variable-unknown',
  'source-unknown',
  'expression-timeout',
  'file-exists',
  'env-syntax',
  'env-invalid',
  'todo',
  // rows
  'jsonata',
  'eval-failed',
  'key-missing',
  'key-invalid',
  'duplicate-key',
  'map-not-object',
  'date-invalid',
  'date-format-invalid',
  'date-zone-invalid',
  'phone-invalid',
  'phone-country',
  'lookup-miss',
  'type-invalid',
  'number-not-text',
  'ref-missing',
  'ref-rejected',
  'ref-unresolved',
  'value-too-large',
  'ref-invalid',
  'ref-key-missing',
  'too-many-issues',
  // column contract (issue 22, part "contract"): a field a row expression reads is not a column of its source
  'column-missing',
  // load
  'duplicate-on-server',
  'match-ambiguous',
  'outcome-unknown',
  'exception',
  // target (issue 22, part 4): no base URL although CARE_*, CI or `target:` suggest a server; --sandbox with one
  'target-missing',
  'target-conflict',
  // issue 22 part 5 (regex): a pattern the linear-time engine cannot run; a source file that is not text
  'regex-unsupported',
  'source-not-text',
  // issue 24 part "gateway": a Retry-After longer than --max-retry-after stops the run
  'retry-after-too-long',
  // issue 25 part "listings": a listing that cannot be believed stops the run; a server's issue as handed over
  'listing-refused',
  'server-issue',
  // issue 24 part "hmac": match values kept in the state as a keyed digest (CARE_STATE_SECRET)
  'state-secret-missing',
  'state-secret-mismatch',
  // issue 24 part "dupcheck": the listing after a phase lacks an id a create was answered with
  'created-id-missing',
  // issue 25 part "settings": proxy answers; settings that cannot work; output that cannot be written
  'proxy-auth',
  'proxy-failed',
  'csv-dialect',
  'source-shared-fifo',
  'write-failed',
  // issue 27 part "view": a SQL-on-FHIR ViewDefinition that cannot be used, or fails on a resource
  'view-invalid',
  'view-unsupported',
  'view-eval',
  // session 31 part R (review): a mapped resource holding nothing but its resourceType
  'resource-empty',
  'map-field-unknown',
  'ref-type-mismatch',
  'lookup-value-invalid',
] as const;

/**
 * One line per code for docs/issue-codes.md (`node scripts/issue-codes-doc.mjs` writes it; a test fails when it is
 * stale). A `Record` so that a new code does not compile without its meaning.
 */
export const ISSUE_CODE_MEANINGS: Record<(typeof ISSUE_CODES)[number], string> = {
  // sources
  'source-config': 'a source is configured wrongly (e.g. an unknown `format`)',
  'source-format': "a file's format cannot be told from its extension; name it with `format:`",
  'not-object': 'a JSON/NDJSON record is not an object',
  'source-missing': "a mapping's source file does not exist (checked before anything is sent)",
  'source-not-found': 'a source file does not exist',
  'source-read': 'a source file cannot be read (not a regular file, an I/O error)',
  'source-too-large': 'a JSON source read with a JSONata `records:` expression is too large to hold in memory',
  'file-unreadable': 'a file named on the command line or in a test (mapping, test, env or columns file) cannot be read',
  'csv-syntax': 'a CSV record is malformed (e.g. text after a closing quote)',
  'csv-header': 'a CSV header (or `csv.columns`) has an empty or duplicate column name',
  'csv-ragged': 'a CSV record has more or fewer fields than the header',
  'csv-quote': 'a quoted CSV field stays open beyond its bound (a broken quote); the record is cut and rejected',
  'json-syntax': 'a JSON document or NDJSON line is not valid JSON',
  'json-records': "a JSON source's `records` expression does not find the records array",
  opening: 'not produced by care-etl at present',
  'encoding-invalid': "a source's bytes are not valid in its encoding",
  // mapping file
  yaml: 'a mapping, test or columns file is not valid YAML (a warning for what YAML only warns about)',
  invalid: 'a file, setting or resource does not have the shape its schema requires',
  required: 'a required property or setting is missing',
  'env-missing': 'a `${VAR}` in the mapping names a variable that is not set',
  'interpolation-invalid': 'a `${…}` in the mapping is not a valid variable reference',
  'secret-in-file': 'warning: the API key is written in the mapping file instead of `${CARE_API_KEY}`',
  'target-invalid': "the mapping's `target:` is invalid (e.g. a baseUrl that is not an http(s) URL)",
  insecure: 'plain http:// to a non-local server without `--allow-insecure`',
  'duplicate-name': 'two mappings (or two test cases) have the same name',
  'lookup-file': 'a lookup file has no rows, or its `key` gives no code',
  'lookup-name': 'a lookup is named like a function (`$name` would be ambiguous)',
  'lookup-column': 'a lookup file has no record with the `key`/`value` property',
  'lookup-duplicate': 'a lookup file holds one code twice',
  'lookup-code-not-text': 'YAML reads an inline lookup code as a number or boolean; quote it',
  'jsonata-syntax': 'an expression is not valid JSONata',
  'function-unknown': 'an expression calls a function that does not exist',
  'ref-unknown': '`$ref` names a mapping that is not in the file',
  'ref-context': '`$ref` (or a function like it) used outside `map` (or export columns)',
  'ref-dynamic': "`$ref`'s mapping name is not a literal, so the load order cannot be known",
  'ref-cycle': 'mappings refer to each other in a circle through `$ref`',
  'ref-key-invalid': '`$ref` got several keys, a key that is not text, or one holding a NUL character (U+0000)',
  'match-invalid': '`match:` does not give one text value',
  'resource-type-mismatch': "`map` produced a resourceType other than the mapping's `type`",
  'lookup-unknown': 'an expression names a lookup table that is not defined',
  'variable-unknown': 'an expression reads a `$variable` that is not defined',
  'source-unknown': 'a mapping names a source that is not defined',
  'expression-timeout': 'not produced by care-etl at present',
  'file-exists': '`init` would overwrite an existing file (pass `--force`)',
  'env-syntax': 'a line of the env file is not `KEY=value`',
  'env-invalid': 'an environment variable care-etl reads has an invalid value',
  todo: 'a `$TODO("…")` marker left by `init` is still in the mapping',
  // rows
  jsonata: 'JSONata raised an error on a row (its own code in brackets, e.g. `[T2001]`; guardrails and the time limit included)',
  'eval-failed': 'an expression failed on a row for another reason than a JSONata error',
  'key-missing': "a row's `key` expression gave nothing",
  'key-invalid':
    "a row's `key` expression gave a value that is not text or a number, or text holding a NUL character (U+0000) or longer than 1,024 bytes (UTF-8): no identifier is, and a PostgreSQL state cannot store or index it",
  'duplicate-key': 'a key already used by an earlier row of the same source',
  'map-not-object': '`map` did not produce one object',
  'date-invalid': 'a value is not a valid date in the given format',
  'date-format-invalid': 'a date function got no format, or an invalid one',
  'date-zone-invalid': 'a date function got an unknown time zone',
  'phone-invalid': 'a value is not a valid phone number',
  'phone-country': "`$phone`'s default country is not supported",
  'lookup-miss': 'a code is not in the lookup table and no default was given',
  'type-invalid': 'a function got a value of the wrong type (e.g. an array where text is expected)',
  'number-not-text': 'YAML reads a test file value as a number; quote it (source cells and ids are text)',
  'ref-missing': '`$ref` names a key that has not been loaded (not in its source, or not yet)',
  'ref-rejected': '`$ref` names a key whose row was rejected in this run',
  'ref-unresolved': '`$ref` names a key that has not been loaded (the default when no finer reason is known)',
  'value-too-large': 'a value (a cell, an NDJSON line, a `$pad` width) is over its limit',
  'ref-invalid': '`$ref` got no resource name as its first argument',
  'ref-key-missing': '`$ref` got an empty key',
  'too-many-issues': 'more schema problems than are listed',
  'column-missing': 'an expression reads a field that is not a column of its source (the column contract)',
  // load
  'duplicate-on-server':
    'the server holds several resources with the match value; none is changed (found after the run created the key: another writer created it too, both ids named)',
  'match-ambiguous': 'warning from `validate`: two keys of a mapping have the same match value',
  'outcome-unknown': "a create's outcome stayed unknown after reconciling; it stays pending",
  exception: 'an unexpected error (a bug or an unforeseen condition)',
  // target
  'target-missing': 'no base URL although CARE_*, CI or `target:` suggest a server',
  'target-conflict': '`--sandbox` together with a base URL',
  // regex
  'regex-unsupported': 'a regular expression the linear-time engine cannot run',
  'source-not-text': 'a source or lookup file is not text (NUL bytes, unmarked UTF-16)',
  // gateway
  'retry-after-too-long': 'the server asked to wait (Retry-After) longer than `--max-retry-after`: the run stopped',
  // listings (issue 25)
  'listing-refused':
    "a server's listing is incomplete or inconsistent (total, entries, types, ids, nesting): the run stopped before creating what it does not show",
  'server-issue': "a server's OperationOutcome issue whose code is not a FHIR issue type (that code is not kept; the issue's text is only in the rejects file)",
  // hmac
  'state-secret-missing': 'a shared (PostgreSQL) state needs CARE_STATE_SECRET, the key of its match digests (or the one given is too short)',
  'state-secret-mismatch': 'an interrupted create was recorded under another CARE_STATE_SECRET: it cannot be matched, so it stays pending',
  // dupcheck
  'created-id-missing': 'a create was answered with an id the server does not list: the key is left pending for the next run to reconcile',
  // settings (issue 25)
  'proxy-auth': 'the proxy (HTTPS_PROXY / HTTP_PROXY) refused the credentials in its URL (HTTP 407)',
  'proxy-failed': 'the proxy could not be reached, or answered its CONNECT with an error (e.g. 502): the server was not reached',
  'csv-dialect': "a source's `csv.delimiter` / `csv.quote` cannot work (empty, a line break, the same character for both)",
  'source-shared-fifo': 'two sources name the same FIFO (named pipe): it can be read only once',
  'write-failed': 'a file or folder care-etl writes (state, rejects, report) cannot be written: disk full, read-only, no permission',
  // view (issue 27)
  'view-invalid': 'a SQL-on-FHIR ViewDefinition (`export --view`) is not of the shape it must have, at the named JSON path: nothing was fetched',
  'view-unsupported': 'a ViewDefinition uses a FHIRPath construct or view feature care-etl does not support (named with its JSON path): nothing was fetched',
  'view-eval': 'a ViewDefinition expression failed on a resource (several values in a column without `collection: true`, a `where` that is not boolean)',
  // session 31 part R (review)
  'map-field-unknown':
    'a literal key of the `map` (`"birthdate": …`) is not a field of the resource\'s schema at that place: a load-time error with the allowed names',
  'ref-type-mismatch':
    '`$ref("name", …)` written where the resource wants a reference to another type than mapping `name` loads (`subject` of a CareTeam is a Patient): a load-time error',
  'lookup-value-invalid':
    'an inline lookup gives a label the field it feeds through `$lookup` does not allow (`gender: { M: männlich }` for `gender`): a load-time error at the entry',
  'resource-empty':
    'the map produced a resource with nothing but its `resourceType` (every field empty for the row): rejected, not sent; make the map produce nothing (or use `where:`) to skip such rows',
};

/** Codes made from an HTTP status or a transport failure. */
export type DerivedIssueCode = `http-${number}` | `transport-${'timeout' | 'reset' | 'refused' | 'dns' | 'other'}`;

/** The derived codes' lines in docs/issue-codes.md. */
export const DERIVED_CODE_MEANINGS = {
  'http-<status>': "the server answered with this HTTP status (e.g. `http-422`); the server's own issues follow it",
  'transport-<failure>': 'the request failed before an answer: `timeout`, `reset`, `refused`, `dns` or `other`',
};
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
  /** The message is a server's own text (OperationOutcome diagnostics): handed over by code and path only (pipeline/hand-over.ts). */
  serverText?: true;
  /** The export's column(s) the failing expression or key reads (issue 26 reasons): hand-over text names them first. */
  columns?: string[];
  /** A `ref-rejected` issue: the referenced row whose own reject is the cause. */
  refersTo?: { mapping: string; key: string };
}

/** Where an issue points: a JSON path and/or a file position; its keys are copied into the issue as given. */
interface IssueWhere {
  path?: string;
  location?: Location;
}

/**
 * Named constructors, the one way care-etl makes an issue (after Medplum's `badRequest`, `notFound`): the code is
 * one of `ISSUE_CODES`, a derived code, or explicitly `foreignCode(…)` — a typo fails to compile.
 */
export const issue = {
  error: (code: IssueCode, message: string, where?: IssueWhere): Issue => ({ severity: 'error', code, message, ...where }),
  warning: (code: IssueCode, message: string, where?: IssueWhere): Issue => ({ severity: 'warning', code, message, ...where }),
  /** The whole source (or file) cannot be used: nothing of it is read. */
  fatal: (code: IssueCode, message: string, where?: IssueWhere): Issue => ({ severity: 'fatal', code, message, ...where }),
  /** A file, setting or resource not of the shape it must have. */
  invalid: (message: string, where?: IssueWhere): Issue => issue.error('invalid', message, where),
  /** A file that does not exist or cannot be read, located at the file. */
  fileUnreadable: (file: string, message: string): Issue => issue.error('file-unreadable', message, { location: { file } }),
};

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
    return this.issues.length ? this.issues : [issue.error('exception', this.message)];
  }

  /** Message plus one line per issue, ready for a terminal. */
  describe(): string {
    const lines = [this.message, ...this.issues.map((i) => `  ${formatIssue(i)}`)];
    if (this.hint) lines.push(`Hint: ${this.hint}`);
    return lines.join('\n');
  }
}

/** `ExitCode.config` error for an option of a library function (named by the caller's option or flag), with a hint. */
export const configError = (message: string, hint?: string): CareEtlError => new CareEtlError(message, { exitCode: ExitCode.config, hint });

/**
 * The one normaliser from any thrown value to issues (a row's reject reasons, a test case's failure): a
 * CareEtlError knows its own; anything else is an unexpected `exception`. `where` fills missing locations.
 */
export function issuesOf(err: unknown, where?: Location): Issue[] {
  const issues: Issue[] = err instanceof CareEtlError ? err.toIssues() : [issue.error('exception', err instanceof Error ? err.message : String(err))];
  return where ? issues.map((i) => (i.location ? i : { ...i, location: where })) : issues;
}
