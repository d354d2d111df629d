/** The studio's HTTP vocabulary (docs/studio.md): what `/api/*` answers, shared by the server and the page. */

/** A mapping problem at its place in the editor's text (1-based line and column). */
export interface Diag {
  severity: 'error' | 'warning';
  message: string;
  hint?: string;
  code: string;
  /** The JSON pointer of the mapping node the problem is about (`/resources/0/map`). */
  field?: string;
  line: number;
  column: number;
  endLine?: number;
  endColumn?: number;
}

export interface ResourceInfo {
  name: string;
  type: string;
  source: string;
  /** Rows sampled from its source (once the source has been read). */
  rows?: number;
}

export type RowStatus = 'loaded' | 'rejected' | 'skipped';

/** One `$ref` a row's map resolved: where in the resource, to which mapping and key, and the stub it got. */
export interface RefInfo {
  path: string;
  target: string;
  key: string;
  resolvesTo: string;
}

export interface RowResult {
  /** 0-based position in the sample. */
  index: number;
  /** Line of the source file where the row starts (JSON: its record number). */
  line: number;
  key: string;
  status: RowStatus;
  input: Record<string, unknown>;
  resource?: object;
  issues: { path: string; message: string }[];
  reason?: string;
  refs: RefInfo[];
}

export interface Totals {
  sampled: number;
  loaded: number;
  rejected: number;
  skipped: number;
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

export interface EvaluateResponse {
  errors: Diag[];
  resources: ResourceInfo[];
  resource: string | null;
  totals: Totals;
  rows: RowResult[];
  page: { offset: number; limit: number; total: number };
  elapsedMs: number;
}

/** `GET /api/mapping`: the mapping file as read, its hash (what a save must name) and its test file. */
export interface MappingDoc {
  path: string;
  text: string;
  hash: string;
  testFile: string;
  sampleSize: number;
}
