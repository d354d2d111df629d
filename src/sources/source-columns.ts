/**
 * The columns of a source, for the column contract (src/mapping/column-contract.ts): a CSV file's header (or
 * `csv.columns`), exact; a JSON / NDJSON file's fields seen in its first COLUMN_SAMPLE_RECORDS records, streamed.
 */
import { stat } from 'node:fs/promises';
import { readCsvHeader } from './csv-source.js';
import { openSource, resolveFormat } from './open-source.js';
import type { SourceConfig } from './types.js';

/** JSON / NDJSON: the union of the fields of this many first records is the source's columns. */
export const COLUMN_SAMPLE_RECORDS = 1000;

export interface SourceColumns {
  columns: string[];
  /** True for a CSV header (every row has these columns); false for fields sampled from JSON records. */
  exact: boolean;
  /** JSON / NDJSON: records read (rejected ones included). */
  sampled?: number;
}

/**
 * The columns of `cfg`; undefined when they cannot be known without harm: a FIFO (reading it would consume it)
 * a missing file, or a JSON / NDJSON file without a readable record. Unreadable files throw the reader's
 * `CareEtlError` (the run's source check words it).
 */
export async function sourceColumns(cfg: SourceConfig, limit = COLUMN_SAMPLE_RECORDS): Promise<SourceColumns | undefined> {
  const format = resolveFormat(cfg);
  if (cfg.csv?.columns === undefined && (await stat(cfg.path).catch(() => undefined))?.isFIFO() !== false) return undefined;
  if (format === 'csv') return { columns: await readCsvHeader(cfg), exact: true };
  const fields = new Set<string>();
  let sampled = 0;
  let objects = 0;
  for await (const item of openSource(cfg)) {
    sampled++;
    if (item.ok) {
      objects++;
      for (const key of Object.keys(item.data)) fields.add(key);
    }
    if (sampled >= limit) break;
  }
  return objects > 0 ? { columns: [...fields], exact: false, sampled } : undefined;
}
