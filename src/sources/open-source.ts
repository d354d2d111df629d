import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { readCsv, readCsvHeader } from './csv-source.js';
import { readJson } from './json-source.js';
import { readNdjson } from './ndjson-source.js';
import { sourceFatal } from './source-errors.js';
import { detectFormat, openSourceFile } from './source-file.js';
import { checkText } from './text-check.js';
import { HEADER_SAMPLE_RECORDS, JSON_PRECHECK_MAX_BYTES, type OpenSourceOptions, type SourceConfig, type SourceFormat, type SourceItem } from './types.js';

export type { CsvOptions, SourceConfig, SourceFormat, SourceItem } from './types.js';
export { CSV_MAX_RECORD_CHARS, NDJSON_MAX_LINE_BYTES, RECORD_MAX_DEPTH, RECORD_MAX_ITEMS } from './types.js';
export { detectFormat, SourceBytes } from './source-file.js';
export { notTextHint, notTextReason } from './text-check.js';

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
 * Each iteration opens the file anew; consume with `for await` (backpressure is respected). `opts.bytes` (a
 * `SourceBytes`) follows the bytes read of the file, for progress by percentage.
 */
export function openSource(cfg: SourceConfig, opts: OpenSourceOptions = {}): AsyncIterable<SourceItem> {
  const format = checkConfig(cfg);
  const { signal, bytes } = opts;
  return {
    [Symbol.asyncIterator](): AsyncIterator<SourceItem> {
      signal?.throwIfAborted();
      switch (format) {
        case 'csv':
          return readCsv(cfg, signal, bytes);
        case 'ndjson':
          return readNdjson(cfg, signal, bytes);
        case 'json':
          return readJson(cfg, signal, bytes);
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

/**
 * Checks, before anything is written, that a source can be read: its configuration (format, options), that the
 * file exists, is a regular file (or a FIFO) and is readable, that it is text (no NUL in its first 64 KiB), and that its format opens — the CSV header row
 * (names, quotes), the first bytes of an NDJSON file, and a whole JSON file up to JSON_PRECHECK_MAX_BYTES (a
 * JSON syntax error or a missing `records` path anywhere is fatal, so it is found now rather than after other
 * sources were loaded; larger files: their first bytes). A FIFO is only checked for access: reading it would
 * consume it. Throws the fatal `CareEtlError` (exit code 2) reading the source would throw; rows that would be
 * rejected are not errors here.
 */
export async function checkSource(cfg: SourceConfig, opts: OpenSourceOptions = {}): Promise<void> {
  const format = checkConfig(cfg);
  let st: Awaited<ReturnType<typeof stat>>;
  try {
    st = await stat(cfg.path);
  } catch {
    // openSourceFile reports a missing or unreadable file with the same words as a run would
    await (await openSourceFile(cfg)).handle.close();
    return;
  }
  if (st.isFIFO()) {
    try {
      await access(cfg.path, constants.R_OK);
    } catch (err) {
      throw sourceFatal(cfg, `cannot open ${cfg.path}: ${(err as Error).message}`, { code: 'source-read', cause: err });
    }
    return;
  }
  if (!st.isFile()) throw sourceFatal(cfg, `not a regular file: ${cfg.path}`, { code: 'source-read' });
  opts.signal?.throwIfAborted();
  checkText(cfg, format);
  switch (format) {
    case 'csv': {
      const opened = await openSourceFile(cfg);
      await opened.handle.close();
      await readCsvHeader(cfg);
      return;
    }
    case 'ndjson': {
      for await (const _ of readNdjson(cfg, opts.signal)) break;
      return;
    }
    case 'json': {
      if (st.size <= JSON_PRECHECK_MAX_BYTES) {
        for await (const _ of readJson(cfg, opts.signal)) {
          // elements are rejected or not later; only whole-file errors matter here
        }
        return;
      }
      await checkJsonStart(cfg);
      return;
    }
  }
}

/** The first significant character of a large JSON file opens an array or an object. */
async function checkJsonStart(cfg: SourceConfig): Promise<void> {
  const opened = await openSourceFile(cfg);
  try {
    const buf = Buffer.alloc(4096);
    const { bytesRead } = await opened.handle.read(buf, 0, buf.length, 0);
    // UTF-8, or UTF-16 with a byte-order mark (as the reader decodes it)
    const head = buf.subarray(0, bytesRead);
    const utf16 =
      head[0] === 0xff && head[1] === 0xfe ? head : head[0] === 0xfe && head[1] === 0xff ? Buffer.from(head.subarray(0, bytesRead & ~1)).swap16() : undefined;
    const text = (utf16 ? utf16.toString('utf16le') : head.toString('utf8')).replace(/^\ufeff/, '').trimStart();
    if (text.length === 0 || (text[0] !== '[' && text[0] !== '{')) {
      throw sourceFatal(cfg, 'invalid JSON: the file does not start with an array or an object', { code: 'json-syntax' });
    }
  } finally {
    await opened.handle.close().catch(() => undefined);
  }
}
