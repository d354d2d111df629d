// The studio's HTTP contract (docs/studio.md), as the page sees it: what `care-etl studio` answers.

export interface Diag {
  severity: 'error' | 'warning';
  message: string;
  hint?: string;
  code: string;
  field?: string;
  /** 1-based, in the text that was evaluated. */
  line: number;
  column: number;
  endLine?: number;
  endColumn?: number;
}

export interface ResourceInfo {
  name: string;
  type: string;
  source: string;
  rows?: number;
}

export interface RowRef {
  path: string;
  target: string;
  key: string;
  resolvesTo: string;
}

export type RowStatus = 'loaded' | 'rejected' | 'skipped';

export interface RowResult {
  index: number;
  line: number;
  key: string;
  status: RowStatus;
  input: Record<string, unknown>;
  resource?: object;
  issues: { path: string; message: string }[];
  reason?: string;
  refs: RowRef[];
}

export interface Totals {
  sampled: number;
  loaded: number;
  rejected: number;
  skipped: number;
}

export interface Evaluation {
  errors: Diag[];
  resources: ResourceInfo[];
  resource: string;
  totals: Totals;
  rows: RowResult[];
  page: { offset: number; limit: number; total: number };
  elapsedMs: number;
}

export interface MappingFile {
  path: string;
  text: string;
  testFile: string;
  sampleSize: number;
  hash: string;
}

export interface EvaluateRequest {
  text: string;
  resource?: string;
  offset?: number;
  limit?: number;
  search?: string;
  line?: number;
  sampleSize?: number;
}
