/**
 * Rows → bytes with backpressure (`write()` false → await `drain()`): strict RFC 4180 CSV with formula
 * neutralising, NDJSON, or typed Parquet (parquet-sink.ts; `openRowSink` picks).
 * Design: docs/design/export.md.
 */
import { once } from 'node:events';
import { Transform, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { stringify } from 'csv-stringify';
import { csvCell, STRICT_CSV } from '../core/csv-cell.js';
import { ParquetSink, type ColumnType } from './parquet-sink.js';

export type ExportFormat = 'csv' | 'ndjson' | 'parquet';
export const EXPORT_FORMATS: readonly ExportFormat[] = ['csv', 'ndjson', 'parquet'];

export interface RowSinkOptions {
  format: ExportFormat;
  columns: readonly string[];
  /** CSV only: UTF-8 byte order mark, for Excel. */
  bom?: boolean;
  /** CSV only (default true). */
  escapeFormulas?: boolean;
  /** End the output when the rows are done (default true; false for process.stdout). */
  end?: boolean;
  /** Parquet only: each column's type, from its definition (default: text). */
  types?: ReadonlyMap<string, ColumnType>;
}

/** What the exporter writes rows through, whatever the format. */
export type Sink = Pick<RowSink, 'write' | 'drain' | 'end' | 'abort'> & { readonly format: ExportFormat };

/** The sink of a format: CSV/NDJSON through RowSink, Parquet through ParquetSink (no formula neutralising: typed cells). */
export function openRowSink(out: Writable, opts: RowSinkOptions): Sink {
  if (opts.format !== 'parquet') return new RowSink(out, opts);
  return new ParquetSink(
    out,
    opts.columns.map((name) => ({ name, type: opts.types?.get(name) ?? 'string' })),
    { end: opts.end },
  );
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
        ...STRICT_CSV,
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
