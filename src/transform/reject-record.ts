import type { Issue } from '../core/issues.js';

export type RejectStage = 'source' | 'transform' | 'validate' | 'load';

/**
 * One rejected row (or group of rows) — by the source reader, the transform, validation or the loader — as the
 * transform yields it and the run writes it to the rejects file (NDJSON, mode 0600). It keeps the
 * source row so the row can be fixed and re-processed; logs and terminal output carry only the location.
 */
export interface RejectRecord {
  stage: RejectStage;
  mapping: string;
  source: string;
  file: string;
  line?: number;
  record?: number;
  /** For `groupBy` mappings: the lines of every row of the group. */
  lines?: number[];
  key?: string;
  issues: Issue[];
  row?: unknown;
  raw?: string;
  /** Set when `row` could not be written as it was (see `serializeReject` in src/pipeline/rejects.ts): why, and a bounded rendering of it. */
  rowOmitted?: string;
  rowExcerpt?: string;
}

/** The reject of a mapped row that the loader (or its offline checks) refused: the row's place, its key, why. */
export function loadReject(
  mapping: string,
  item: { key: string; origin: { source: string; file: string; line?: number; record?: number }; lines?: number[] },
  issues: Issue[],
): RejectRecord {
  const { source, file, line, record } = item.origin;
  return { stage: 'load', mapping, source, file, line, record, lines: item.lines, key: item.key, issues };
}
