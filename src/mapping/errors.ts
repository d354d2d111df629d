import { CareEtlError, ExitCode, type Issue, type Location, type IssueCode, type KnownIssueCode } from '../core/issues.js';

/**
 * Thrown by a custom function (`$date`, `$lookup`, …) for bad row data. JSONata adds `position` (the
 * call's position in the expression) and `token` (the function name) on its way out.
 */
export class MappingFunctionError extends Error {
  readonly code: KnownIssueCode;
  position?: number;
  token?: string;
  constructor(code: KnownIssueCode, message: string) {
    super(message);
    this.name = 'MappingFunctionError';
    this.code = code;
  }
}

/**
 * Thrown by `EvalContext.resolveRef` when a `$ref(name, key)` cannot be resolved (e.g. the referenced
 * record was rejected or not loaded yet). Defined here so the transform / load stages can throw it and
 * recognise it again on `MappingEvalError.cause`.
 */
export class RefError extends Error {
  readonly code: KnownIssueCode;
  constructor(
    readonly target: string,
    readonly key: string,
    message?: string,
    code: KnownIssueCode = 'ref-unresolved',
  ) {
    super(message ?? `no ${target} with source key \`${key}\` has been loaded`);
    this.name = 'RefError';
    this.code = code;
  }
}

export type ExpressionRole = 'key' | 'groupBy' | 'where' | 'map' | 'match' | 'records' | 'column';

/**
 * A row-level evaluation failure (JSONata runtime error, function error, missing key…): the row is
 * rejected, the run goes on. `issue.location` is the position inside the mapping file of the expression
 * part that failed; the caller adds the record's own origin.
 */
export class MappingEvalError extends CareEtlError {
  readonly issue: Issue;
  /** Issue code: `jsonata`, `date-invalid`, `lookup-miss`, `key-missing`, `ref-unresolved`, … */
  readonly code: IssueCode;
  /** The JSONata error code (T2001, D1012, …) when JSONata itself failed. */
  readonly jsonataCode?: string;
  /** Resource (or export) name. */
  readonly resource: string;
  readonly role: ExpressionRole;

  constructor(issue: Issue, opts: { resource: string; role: ExpressionRole; jsonataCode?: string; cause?: unknown }) {
    super(issue.message, { issues: [issue], exitCode: ExitCode.rejected, cause: opts.cause });
    this.name = 'MappingEvalError';
    this.issue = issue;
    this.code = issue.code;
    this.jsonataCode = opts.jsonataCode;
    this.resource = opts.resource;
    this.role = opts.role;
  }

  get location(): Location | undefined {
    return this.issue.location;
  }
}
