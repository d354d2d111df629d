/**
 * Rows → Apache Parquet (hyparquet-writer), one bounded row group at a time: rows are buffered column-wise up to
 * MAX_GROUP_ROWS rows or MAX_GROUP_BYTES, encoded, written to the output and forgotten, so memory stays flat in the number of rows.
 * Parquet is written front to back (the footer holds the offsets), so a pipe or a FIFO works as well as a file.
 * Column types come from the column definitions (never from the data); a value that does not fit its column's type
 * stops the export with an error naming the column and the row (the value itself is never shown: it may be PHI).
 * Design: docs/design/export.md.
 */
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import type { SchemaElement } from 'hyparquet';
import { CareEtlError, ExitCode } from '../core/issues.js';

/** What a column holds in a typed output; text for anything a column definition does not type. */
export type ColumnType = 'string' | 'integer' | 'timestamp' | 'date';

export interface TypedColumn {
  name: string;
  type: ColumnType;
}

/**
 * A row group ends at 64k rows or ~1 MB of buffered cells (text counted by length, a typed cell as 8 bytes), whichever
 * comes first. The encoder needs several times a group's size while it encodes (one byte array per text cell,
 * dictionaries, pages): bench/export-parquet.mjs measured 64k-row groups at 356 MB peak RSS for 200k observations,
 * ~2 MB groups at 205 MB for 1M, ~1 MB groups at 199 MB (CSV in the same run: 188 MB).
 */
export const MAX_GROUP_ROWS = 65_536;
export const MAX_GROUP_BYTES = 1_000_000;
const DAY_MS = 86_400_000;

/** Buffered size of one cell, for the byte bound. */
const cellBytes = (c: unknown): number => (typeof c === 'string' ? c.length + 8 : 8);

function schemaElement(name: string, type: ColumnType): SchemaElement {
  const optional = { name, repetition_type: 'OPTIONAL' } as const;
  switch (type) {
    case 'integer':
      return { ...optional, type: 'INT64', converted_type: 'INT_64', logical_type: { type: 'INTEGER', bitWidth: 64, isSigned: true } };
    case 'timestamp':
      return { ...optional, type: 'INT64', converted_type: 'TIMESTAMP_MILLIS', logical_type: { type: 'TIMESTAMP', isAdjustedToUTC: true, unit: 'MILLIS' } };
    case 'date':
      return { ...optional, type: 'INT32', converted_type: 'DATE', logical_type: { type: 'DATE' } };
    default:
      return { ...optional, type: 'BYTE_ARRAY', converted_type: 'UTF8', logical_type: { type: 'STRING' } };
  }
}

const FULL_DATE = /^\d{4}-\d{2}-\d{2}$/;
const WITH_ZONE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;

/** What kind of value did not fit (never the value: it may be PHI). */
function kindOf(v: unknown): string {
  if (typeof v === 'number') return Number.isInteger(v) ? 'an integer out of range' : 'a decimal number';
  if (typeof v === 'string') return /^\d{4}(-\d{2})?$/.test(v) ? 'a partial date' : /^\d{4}-\d{2}-\d{2}T/.test(v) ? 'a date-time without a zone' : 'a text';
  return `a ${typeof v}`;
}

/** One cell in its column's physical form; undefined when the value does not fit the type. */
function cell(type: ColumnType, v: unknown): unknown {
  if (v === undefined || v === null || v === '') return null;
  switch (type) {
    case 'integer':
      if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt(v);
      if (typeof v === 'string' && /^-?\d{1,15}$/.test(v)) return BigInt(v);
      return undefined;
    case 'timestamp':
      if (typeof v === 'string' && (WITH_ZONE.test(v) || FULL_DATE.test(v))) {
        const ms = Date.parse(v); // a date alone: UTC midnight
        return Number.isNaN(ms) ? undefined : BigInt(ms);
      }
      return undefined;
    case 'date':
      if (typeof v === 'string' && FULL_DATE.test(v)) {
        const ms = Date.parse(v);
        return Number.isNaN(ms) ? undefined : Math.floor(ms / DAY_MS);
      }
      return undefined;
    default:
      return typeof v === 'string' ? v : typeof v === 'object' ? JSON.stringify(v) : String(v);
  }
}

const TYPE_TEXT: Record<ColumnType, string> = { string: 'text', integer: 'integer', timestamp: 'timestamp (date-time with a zone)', date: 'date (YYYY-MM-DD)' };

/** Rows → Parquet bytes on `out`, with the same contract as RowSink (write → false: await drain()). */
export class ParquetSink {
  readonly format = 'parquet' as const;
  readonly #out: Writable;
  readonly #columns: readonly TypedColumn[];
  readonly #writer = new ByteWriter();
  readonly #parquet: ParquetWriter;
  readonly #end: boolean;
  #buffer: unknown[][];
  #rows = 0;
  #bytes = 0;
  #written = 0;
  #error: unknown;
  #ended = false;

  constructor(out: Writable, columns: readonly TypedColumn[], opts: { end?: boolean } = {}) {
    this.#out = out;
    this.#columns = columns;
    this.#end = opts.end ?? true;
    this.#buffer = columns.map(() => []);
    // Named as the export chose (`--column-names`: snake by default for Parquet, src/export/column-names.ts).
    const schema: SchemaElement[] = [{ name: 'root', num_children: columns.length }, ...columns.map((c) => schemaElement(c.name, c.type))];
    this.#parquet = new ParquetWriter({ writer: this.#writer, schema, createdBy: 'care-etl' });
    out.on('error', (err) => (this.#error ??= err));
  }

  /** Buffers one row (values by column name); a full row group is encoded and written. False: await `drain()`. */
  write(row: Record<string, unknown>): boolean {
    if (this.#error) throw this.#error;
    for (let i = 0; i < this.#columns.length; i++) {
      const { name, type } = this.#columns[i]!;
      const v = row[name];
      const c = cell(type, v);
      if (c === undefined) throw this.#misfit(name, type, v);
      this.#buffer[i]!.push(c);
      this.#bytes += cellBytes(c);
    }
    this.#rows++;
    return (this.#rows - this.#written < MAX_GROUP_ROWS && this.#bytes < MAX_GROUP_BYTES) || this.#flushGroup();
  }

  #misfit(name: string, type: ColumnType, v: unknown): CareEtlError {
    return new CareEtlError(`Parquet column \`${name}\` is typed ${TYPE_TEXT[type]}, but row ${this.#rows + 1} holds ${kindOf(v)}`, {
      exitCode: ExitCode.config,
      hint: 'Export this data with --format csv or ndjson, or name your own columns (a columns file: its columns are text in Parquet).',
    });
  }

  /** Encodes the buffered rows as one row group and hands the bytes to the output. */
  #flushGroup(): boolean {
    const n = this.#rows - this.#written;
    if (n === 0) return true;
    const columnData = this.#columns.map((c, i) => ({ name: c.name, data: this.#buffer[i]! }));
    void this.#parquet.write({ columnData, rowGroupSize: n });
    this.#buffer = this.#columns.map(() => []);
    this.#written = this.#rows;
    this.#bytes = 0;
    return this.#emit();
  }

  /** The bytes encoded so far → the output (copied: the encoder's buffer is reused). */
  #emit(): boolean {
    const w = this.#writer;
    if (w.index === 0) return true;
    const chunk = Buffer.from(new Uint8Array(w.buffer, 0, w.index));
    w.index = 0;
    return this.#out.write(chunk);
  }

  /** Resolves when the output has room again; rejects when it failed or `signal` aborts. */
  async drain(signal?: AbortSignal): Promise<void> {
    if (this.#error) throw this.#error;
    if (!this.#out.writableNeedDrain) return;
    const ac = new AbortController();
    try {
      await Promise.race([
        once(this.#out, 'drain', { signal: signal ? AbortSignal.any([signal, ac.signal]) : ac.signal }),
        once(this.#out, 'close', { signal: ac.signal }).then(() => {
          throw this.#error ?? new Error('the output closed before the export ended');
        }),
      ]);
    } finally {
      ac.abort();
    }
  }

  /** Writes the last row group and the footer; resolves once the output has them. */
  async end(): Promise<void> {
    if (this.#error) throw this.#error;
    this.#flushGroup();
    void this.#parquet.finish();
    this.#emit();
    this.#ended = true;
    if (this.#end) {
      this.#out.end();
      await finished(this.#out);
    } else if (this.#out.writableNeedDrain) await this.drain();
    if (this.#error) throw this.#error;
  }

  /** Stops after a failure: the output is destroyed (a file descriptor closed). */
  async abort(): Promise<void> {
    if (this.#ended && !this.#error) return;
    if (!this.#end) return;
    this.#out.destroy();
    await finished(this.#out).catch(() => {});
  }
}
