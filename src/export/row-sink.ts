/**
 * Rows → bytes, with backpressure: `write()` returns false when the output is behind, then the caller
 * awaits `drain()` before writing more, so memory stays bounded whatever the number of rows.
 *
 * CSV: csv-stringify, RFC 4180 (fields with a comma, quote, CR, LF — bare or paired — or any other control
 * character are quoted, quotes doubled, CRLF record separator), UTF-8, optional BOM, header row always
 * written (an empty export is header-only). csv-stringify alone quotes only fields holding the record
 * delimiter string (CRLF), so a bare LF went out unquoted: `quoted_match` closes that. What no spreadsheet can
 * hold is replaced by U+FFFD (shown as �): NUL, and lone UTF-16 surrogates (which UTF-8 cannot encode).
 * Formula injection (OWASP "CSV Injection"): with `escapeFormulas` (the default) a text cell starting with
 * `=`, `+`, `-`, `@`, tab or CR (or their full-width forms) is prefixed with `'` (csv-stringify's
 * `escape_formulas`). A cell that is a JSON *number* is written as is, even when negative: `-3` is the value
 * -3, not a formula, and analysts need it numeric; a *text* "-3" is neutralised like any text.
 *
 * NDJSON: one JSON object per row, keys = column names, values as JSON (no formula escaping: NDJSON is
 * not opened by spreadsheets).
 */
import { once } from 'node:events';
import { Transform, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { stringify } from 'csv-stringify';

export type ExportFormat = 'csv' | 'ndjson';
export const EXPORT_FORMATS: readonly ExportFormat[] = ['csv', 'ndjson'];

export interface RowSinkOptions {
  format: ExportFormat;
  columns: readonly string[];
  /** CSV only: UTF-8 byte order mark, for Excel. */
  bom?: boolean;
  /** CSV only (default true). */
  escapeFormulas?: boolean;
  /** End the output when the rows are done (default true; false for process.stdout). */
  end?: boolean;
}

const isScalar = (v: unknown): v is string | number | boolean => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';

/**
 * One CSV cell: text stays text, finite numbers stay numbers (csv-stringify exempts them from the `-`
 * formula rule), booleans are `true`/`false`, arrays of scalars are joined with `|`, other arrays and
 * objects are written as JSON; nothing (undefined, null, NaN) is an empty cell.
 */
export function csvCell(v: unknown): string | number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return spreadsheetSafe(v);
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined;
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (Array.isArray(v)) {
    if (v.every((x) => isScalar(x) || x === null || x === undefined)) {
      const parts = v.filter((x) => x !== null && x !== undefined && !(typeof x === 'number' && !Number.isFinite(x)));
      if (parts.length === 1 && typeof parts[0] === 'number') return parts[0];
      return parts.length ? spreadsheetSafe(parts.map((x) => (typeof x === 'boolean' ? (x ? 'true' : 'false') : String(x))).join('|')) : undefined;
    }
    return spreadsheetSafe(JSON.stringify(v));
  }
  if (typeof v === 'object') return spreadsheetSafe(JSON.stringify(v));
  return String(v);
}

const UNHOLDABLE = '\\u0000|[\\uD800-\\uDBFF](?![\\uDC00-\\uDFFF])|(?<![\\uD800-\\uDBFF])[\\uDC00-\\uDFFF]';
const HAS_UNHOLDABLE = new RegExp(UNHOLDABLE);
const ALL_UNHOLDABLE = new RegExp(UNHOLDABLE, 'g');

/** NUL and lone surrogates → U+FFFD: no reader keeps the first, UTF-8 cannot encode the second. */
function spreadsheetSafe(s: string): string {
  return HAS_UNHOLDABLE.test(s) ? s.replace(ALL_UNHOLDABLE, '\uFFFD') : s;
}

/** One NDJSON value: plain JSON, nothing → null (every key present in every line). */
function jsonValue(v: unknown): unknown {
  if (v === undefined || (typeof v === 'number' && !Number.isFinite(v))) return null;
  return v;
}

export class RowSink {
  readonly format: ExportFormat;
  readonly #columns: readonly string[];
  readonly #head: Transform;
  readonly #done: Promise<void>;
  #error: unknown;
  #settled = false;

  constructor(out: Writable, opts: RowSinkOptions) {
    this.format = opts.format;
    this.#columns = opts.columns;
    if (opts.format === 'csv') {
      this.#head = stringify({
        header: true,
        columns: [...opts.columns],
        bom: opts.bom ?? false,
        escape_formulas: opts.escapeFormulas ?? true,
        record_delimiter: 'windows',
        // Any control character (bare LF or CR, tab, NUL…) forces quotes: strict readers then keep the record whole.
        quoted_match: /[\u0000-\u001f\u007f]/,
      });
    } else {
      const cols = opts.columns;
      this.#head = new Transform({
        writableObjectMode: true,
        transform(row: unknown[], _enc, cb) {
          const o: Record<string, unknown> = {};
          for (let i = 0; i < cols.length; i++) o[cols[i]!] = jsonValue(row[i]);
          cb(null, `${JSON.stringify(o)}\n`);
        },
      });
    }
    this.#done = pipeline(this.#head, out, { end: opts.end ?? true }).then(
      () => {
        this.#settled = true;
      },
      (err: unknown) => {
        this.#settled = true;
        this.#error ??= err;
        throw err;
      },
    );
    this.#done.catch(() => {}); // observed through drain()/end()
  }

  /** Writes one row (values by column name). False: await `drain()` before the next write. */
  write(row: Record<string, unknown>): boolean {
    if (this.#error) throw this.#error;
    const cells = new Array<unknown>(this.#columns.length);
    for (let i = 0; i < this.#columns.length; i++) {
      const v = row[this.#columns[i]!];
      cells[i] = this.format === 'csv' ? csvCell(v) : v;
    }
    return this.#head.write(cells);
  }

  /** Resolves when the output has room again; rejects when it failed (disk full, closed pipe…) or `signal` aborts. */
  async drain(signal?: AbortSignal): Promise<void> {
    if (this.#error) throw this.#error;
    if (!this.#head.writableNeedDrain) return;
    const ac = new AbortController();
    try {
      await Promise.race([
        once(this.#head, 'drain', { signal: signal ? AbortSignal.any([signal, ac.signal]) : ac.signal }),
        this.#done.then(() => {
          throw new Error('the output closed before the export ended');
        }),
      ]);
    } finally {
      ac.abort();
    }
  }

  /** Flushes the last rows (and the header of an empty export); resolves once the output has them. */
  async end(): Promise<void> {
    if (this.#error) throw this.#error;
    this.#head.end();
    await this.#done;
  }

  /** Stops after a failure: resolves once the output is destroyed (a file descriptor closed). */
  async abort(): Promise<void> {
    if (this.#settled) return;
    this.#head.destroy();
    await this.#done.catch(() => {});
  }
}
