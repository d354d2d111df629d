import type { Issue } from '../core/issues.js';

export type SourceFormat = 'csv' | 'json' | 'ndjson';

export interface CsvOptions {
  /** Field delimiter; default `,` (tab for `.tsv` files). */
  delimiter?: string;
  /** Quote character; default `"`. */
  quote?: string;
  /** Escape character inside quoted fields; default: the quote character (`""` → `"`). */
  escape?: string;
  /**
   * Encoding of the file (one of ACCEPTED_ENCODINGS in decode-stream.ts: `utf-8`, `utf-16le`, `windows-1252`,
   * `iso-8859-15`, …); default UTF-8. A byte-order mark decides over it (UTF-8, UTF-16LE, UTF-16BE).
   */
  encoding?: string;
  /** Lines starting with this character are skipped (full-line comments only). */
  comment?: string;
  /** Trim whitespace around unquoted fields; default false. */
  trim?: boolean;
  /** Skip empty lines; default true. */
  skipEmptyLines?: boolean;
  /** Column names when the file has no header row. */
  columns?: string[];
  /**
   * Lines a quoted field may span (default 100). A quote still open after that many lines, or at the end of
   * the file, is broken: the record is rejected up to the end of the line where that quote opened and reading
   * resumes on the next line.
   */
  maxQuotedLines?: number;
}

export interface SourceConfig {
  /** Source name from the mapping file. */
  name: string;
  /** Absolute path of the export file. */
  path: string;
  /** Default from the extension: .csv/.tsv/.txt → csv, .json → json, .ndjson/.jsonl → ndjson. */
  format?: SourceFormat;
  /**
   * JSON only: where the array of records is. A plain path (`staff`, `data.patients`, `data[0].patients`)
   * is streamed; any other JSONata expression is evaluated on the whole document (files ≤ 256 MiB).
   */
  records?: string;
  csv?: CsvOptions;
  /** Fields some records may lack: the column contract does not require them (src/mapping/column-contract.ts). */
  optional?: string[];
}

/** Where a record came from. */
export interface Origin {
  source: string;
  file: string;
  /** 1-based line where the record starts (CSV, NDJSON); absent for JSON. */
  line?: number;
  /** 1-based data record number (rejected records are counted too). */
  record: number;
}

export interface SourceRecord {
  data: Record<string, unknown>;
  origin: Origin;
}

export interface SourceReject {
  origin: Origin;
  issues: Issue[];
  /** The raw text of the record (CSV line(s), NDJSON line, JSON element) for the rejects file. */
  raw?: string;
}

export type SourceItem = ({ ok: true } & SourceRecord) | ({ ok: false } & SourceReject);

export interface OpenSourceOptions {
  /** Aborting destroys the underlying file stream; iteration then rejects with an AbortError. */
  signal?: AbortSignal;
  /** Told of each file stream the reader opens, for progress by bytes (see `SourceBytes`). */
  bytes?: ByteMeter;
}

/**
 * Receives the byte stream a reader opened on the source file: its `bytesRead` (the stream's own counter, so
 * reading it costs nothing per row and no system call) and the file's size (undefined when not known: a FIFO).
 */
export interface ByteMeter {
  attach(stream: { readonly bytesRead: number }, totalBytes: number | undefined): void;
}

/**
 * CSV records longer than this (in bytes) are rejected (`value-too-large`, or `csv-quote` when a quote is open) and
 * reading resumes on the next line; a header row that long is fatal.
 */
export const CSV_MAX_RECORD_CHARS = 4 * 1024 * 1024;
/** Default of `csv.maxQuotedLines`: lines a quoted field may span. */
export const CSV_DEFAULT_MAX_QUOTED_LINES = 100;
/** Bytes of a cut CSV record / an over-long NDJSON line kept as the reject's `raw`. */
export const CSV_RAW_EXCERPT_BYTES = 64 * 1024;
/** NDJSON lines longer than this (in bytes) are rejected (`value-too-large`) without being read into memory whole. */
export const NDJSON_MAX_LINE_BYTES = 64 * 1024 * 1024;
/** JSON / NDJSON records: deepest nesting of objects and arrays (the record itself is level 1). */
export const RECORD_MAX_DEPTH = 64;
/** JSON / NDJSON records: most items of one array, or members of one object. */
export const RECORD_MAX_ITEMS = 100_000;
/** JSON / NDJSON records: longest text value or key, in characters. */
export const RECORD_MAX_TEXT_CHARS = 4 * 1024 * 1024;
/** A JSON file whose `records` is a JSONata expression (not a plain path) is read whole: up to this size. */
export const JSON_MAX_WHOLE_FILE_BYTES = 256 * 1024 * 1024;
/** `checkSource` reads JSON files up to this size whole (a syntax error anywhere in them is fatal); larger: the start. */
export const JSON_PRECHECK_MAX_BYTES = 64 * 1024 * 1024;
/** `readHeader` reports the union of keys of this many first JSON/NDJSON records. */
export const HEADER_SAMPLE_RECORDS = 50;
