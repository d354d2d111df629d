import type { Issue, Location } from '../core/issues.js';

/** Per mapping name: source key → server id, or `auto` (every key resolves to `<Type>/<key>`). */
export type RefStubs = Record<string, Record<string, string> | 'auto'>;

export type RowSelector = number | { from: number; to: number };

export interface FixtureDef {
  /** Absolute path; undefined = the mapping's own source file of the resource. */
  path?: string;
  /** As written in the test file (for messages). */
  shownPath?: string;
  rows?: RowSelector[];
  where?: string;
}

export interface RejectExpectation {
  stage: 'source' | 'transform' | 'validate';
  code?: string;
  message?: string;
  path?: string;
}

export interface TestCaseDef {
  /** 0-based index in `cases:`. */
  index: number;
  name: string;
  resource?: string;
  /** Inline rows (`input:`), each with the line of the test file it is written on. */
  input?: { data: Record<string, unknown>; line?: number }[];
  fixture?: FixtureDef;
  refs?: RefStubs;
  now?: Date;
  expect?: unknown;
  expectSubset?: unknown;
  /** Number of resources produced. */
  count?: number;
  reject?: RejectExpectation;
  skip: boolean;
  /** Where the case starts in the test file. */
  location: Location;
}

export interface MappingTestFile {
  /** Absolute path of the test file. */
  file: string;
  dir: string;
  /** Absolute path of the mapping under test. */
  mappingFile: string;
  env: Record<string, string>;
  now?: Date;
  refs: RefStubs;
  cases: TestCaseDef[];
}

/** One difference between an expected and a produced value. `path` is a JSON pointer into the resource. */
export interface DiffEntry {
  path: string;
  kind: 'changed' | 'missing' | 'unexpected';
  expected?: unknown;
  got?: unknown;
  /** e.g. "YAML read the expected value as a number: quote it". */
  note?: string;
}

export type CaseStatus = 'passed' | 'failed' | 'error' | 'skipped';

/** A rejection produced by the case, as shown in the report (no row data). */
export interface ProducedReject {
  stage: string;
  /** Where the rejected row came from (test file line, fixture file:line). */
  origin: string;
  key?: string;
  issues: Issue[];
}

export interface CaseFailure {
  message: string;
  /** Structural differences (expected vs produced resource). */
  diff?: DiffEntry[];
  /** Issues of unexpected (or non-matching) rejections, with the mapping file:line:column of the expression. */
  issues?: Issue[];
}

export interface CaseResult {
  name: string;
  /** Resource mapping name (`resources[].name`). */
  resource?: string;
  status: CaseStatus;
  durationMs: number;
  /** Test file position of the case. */
  location: Location;
  failures: CaseFailure[];
  /** What the case produced (for --json): resources and rejects. */
  produced?: { resources: unknown[]; rejects: ProducedReject[] };
}

export interface FileResult {
  file: string;
  mappingFile?: string;
  /** The test file or its mapping could not be loaded: every problem, with positions. */
  error?: { message: string; issues: Issue[]; hint?: string };
  cases: CaseResult[];
  durationMs: number;
}

export interface TestTotals {
  files: number;
  brokenFiles: number;
  cases: number;
  passed: number;
  failed: number;
  errors: number;
  skipped: number;
}

export interface TestReport {
  files: FileResult[];
  totals: TestTotals;
  durationMs: number;
  /** 0 all passed, 1 some case failed, 2 a test file, mapping or case is broken (or no test file was found). */
  exitCode: number;
}
