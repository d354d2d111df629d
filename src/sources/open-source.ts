import { readCsv, readCsvHeader } from './csv-source.js';
import { readJson } from './json-source.js';
import { readNdjson } from './ndjson-source.js';
import { sourceFatal } from './source-errors.js';
import { detectFormat } from './source-file.js';
import {
  HEADER_SAMPLE_RECORDS,
  type OpenSourceOptions,
  type SourceConfig,
  type SourceFormat,
  type SourceItem,
} from './types.js';

export type {
  CsvOptions,
  OpenSourceOptions,
  Origin,
  SourceConfig,
  SourceFormat,
  SourceItem,
  SourceRecord,
  SourceReject,
} from './types.js';
export { CSV_MAX_RECORD_CHARS, HEADER_SAMPLE_RECORDS, JSON_MAX_WHOLE_FILE_BYTES, NDJSON_MAX_LINE_BYTES } from './types.js';
export { detectFormat } from './source-file.js';

const FORMATS: readonly SourceFormat[] = ['csv', 'json', 'ndjson'];

/** The format of a source: explicit, else from the extension; a fatal error when neither is known. */
export function resolveFormat(cfg: SourceConfig): SourceFormat {
  if (cfg.format !== undefined) {
    if (!FORMATS.includes(cfg.format)) {
      throw sourceFatal(cfg, `unknown format ${JSON.stringify(cfg.format)} (expected csv, json or ndjson)`, { code: 'source-config' });
    }
    return cfg.format;
  }
  const format = detectFormat(cfg.path);
  if (format === undefined) {
    throw sourceFatal(cfg, 'cannot tell the format from the file extension', {
      code: 'source-config',
      hint: 'Use a .csv, .tsv, .txt, .json, .ndjson or .jsonl file, or set `format: csv | json | ndjson` on the source.',
    });
  }
  return format;
}

function checkConfig(cfg: SourceConfig): SourceFormat {
  const format = resolveFormat(cfg);
  if (cfg.records !== undefined && format !== 'json') {
    throw sourceFatal(cfg, '`records` applies to JSON sources only', { code: 'source-config' });
  }
  if (cfg.records !== undefined && cfg.records.trim() === '') {
    throw sourceFatal(cfg, '`records` is empty', { code: 'source-config' });
  }
  return format;
}

/**
 * Streams the records of a source file, each with its origin; row-level problems come as
 * `{ ok: false }` rejects and reading goes on; problems with the file as a whole throw a `CareEtlError`
 * (exit code 2) — configuration errors (format, options) synchronously, file errors while iterating.
 * Each iteration opens the file anew; consume with `for await` (backpressure is respected).
 */
export function openSource(cfg: SourceConfig, opts: OpenSourceOptions = {}): AsyncIterable<SourceItem> {
  const format = checkConfig(cfg);
  const signal = opts.signal;
  return {
    [Symbol.asyncIterator](): AsyncIterator<SourceItem> {
      signal?.throwIfAborted();
      switch (format) {
        case 'csv':
          return readCsv(cfg, signal);
        case 'ndjson':
          return readNdjson(cfg, signal);
        case 'json':
          return readJson(cfg, signal);
      }
    },
  };
}

/**
 * Reads just the beginning of a source for `care-etl init` and `validate --sample`: the CSV header
 * names (or `csv.columns`), or the union of the keys of the first 50 JSON/NDJSON records, in order of
 * first appearance.
 */
export async function readHeader(cfg: SourceConfig): Promise<string[]> {
  const format = checkConfig(cfg);
  if (format === 'csv') return readCsvHeader(cfg);
  const keys = new Set<string>();
  let seen = 0;
  for await (const item of openSource(cfg)) {
    if (item.ok) for (const key of Object.keys(item.data)) keys.add(key);
    if (++seen >= HEADER_SAMPLE_RECORDS) break;
  }
  return [...keys];
}
