import { Transform, type TransformCallback } from 'node:stream';
import { type CsvError, type Options as CsvParseOptions } from 'csv-parse';
import { parse as parseSync } from 'csv-parse/sync';
import type { FifoQueue } from '../core/fifo-queue.js';
import type { CsvSpan, PlainDialect } from './csv-quote-guard.js';
import { HeldBytes } from './byte-window.js';

/*
 * The records of a CSV file in the common dialect (one ASCII delimiter, `"` quoting with `""` inside, no trim, no
 * comments), without csv-parse's byte-by-byte state machine in the way of every record: the quote guard has already
 * found where each record starts and ends (its spans mirror csv-parse's), so a record is split here — its text
 * decoded once, split on the delimiter (quoted fields unquoted). A record the guard saw an error in, or one this
 * split does not take as plain, is parsed by csv-parse itself, alone: csv-parse starts every record from the same
 * state, so its records, errors and byte offsets (moved to the file's) are the ones it gives reading the whole file.
 * The output is csv-parse's, in batches: `ParsedRow`s and `SkippedRecord`s, one array per chunk read.
 */

export interface ParsedRow {
  record: string[];
  /** Byte offset where the record ends, in the stream csv-parse reads. */
  bytes: number;
}

/** A record csv-parse skipped for a syntax error (pushed from `on_skip` into the parser's output). */
export class SkippedRecord {
  /** What the reader reads of csv-parse's error: a CsvError holds a stack and the parser's state (several KB; kept for a
   * batch of 10,000 rejected lines, 100,000 of them ran out of a 256 MB heap). `offset` moves its `bytes` to the file's. */
  readonly error: CsvSkip;

  constructor(err: CsvError, offset = 0) {
    this.error = { code: err.code, column: typeof err.column === 'number' ? err.column : undefined, bytes: Number(err.bytes) + offset };
  }
}

/** A csv-parse error as the reader reads it: its code, the field's index, the byte offset where it was raised. */
export interface CsvSkip {
  code: string;
  column: number | undefined;
  bytes: number;
}

export type ParsedItem = ParsedRow | SkippedRecord;

/**
 * The fields of one record's text (without its line break) as csv-parse gives them, or undefined when the text is
 * not plain: a quote inside an unquoted field, a closing quote followed by other text, a quote never closed.
 */
export function splitRecord(text: string, d: PlainDialect): string[] | undefined {
  const { delimiter, quote } = d;
  if (!text.includes(quote)) return text.split(delimiter);
  const q = quote.charCodeAt(0);
  const n = text.length;
  const fields: string[] = [];
  let i = 0;
  for (;;) {
    if (text.charCodeAt(i) === q) {
      let value = '';
      let from = i + 1;
      for (;;) {
        const k = text.indexOf(quote, from);
        if (k === -1) return undefined;
        if (text.charCodeAt(k + 1) === q) {
          value += text.slice(from, k + 1); // `""`: one quote
          from = k + 2;
          continue;
        }
        value += text.slice(from, k);
        i = k + 1;
        break;
      }
      fields.push(value);
      if (i === n) return fields;
      if (text[i] !== delimiter) return undefined;
      i++;
    } else {
      const k = text.indexOf(delimiter, i);
      const value = k === -1 ? text.slice(i) : text.slice(i, k);
      if (value.includes(quote)) return undefined;
      fields.push(value);
      if (k === -1) return fields;
      i = k + 1;
    }
  }
}

/** Length of the line break ending buf[.., end) (CRLF, LF or CR), 0 if none. */
function breakBefore(buf: Buffer, start: number, end: number): number {
  if (end <= start) return 0;
  const last = buf[end - 1];
  if (last === 0x0a) return end - 1 > start && buf[end - 2] === 0x0d ? 2 : 1;
  return last === 0x0d ? 1 : 0;
}

/**
 * Takes the guard's output bytes and its spans (its `parseSpans` queue), gives csv-parse's records and skips.
 * Bytes outside any span (empty lines csv-parse skips) are passed over. In the common dialect (`dialect` set) each
 * clean record is split here; in any other dialect the clean records of a chunk are parsed by csv-parse in one go
 * (`parseRun`). Either way a record the guard saw an error in is parsed alone, up to its first error (`parseAlone`).
 */
export class CsvSpanParser extends Transform {
  private held: Buffer = Buffer.alloc(0);
  private readonly growing = new HeldBytes();
  /** Stream offset of held[0]. */
  private base = 0;
  /** Clean spans of the current batch not yet parsed (other dialects: parsed together by `parseRun`). */
  private readonly run: CsvSpan[] = [];

  constructor(
    private readonly spans: FifoQueue<CsvSpan>,
    private readonly dialect: PlainDialect | undefined,
    private readonly options: CsvParseOptions,
    /** Where the next record can start at the earliest when no span is queued (the guard's `nextRecordFrom`). */
    private readonly nextRecordFrom: () => number,
  ) {
    super({ readableObjectMode: true });
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, callback: TransformCallback): void {
    this.held = this.growing.append(this.held, chunk);
    this.drain(callback);
  }

  override _flush(callback: TransformCallback): void {
    this.drain(callback);
  }

  /** Every span whose bytes are all here, in order; one batch pushed. */
  private drain(callback: TransformCallback): void {
    const out: ParsedItem[] = [];
    const held = this.held;
    const base = this.base;
    const limit = base + held.length;
    let done = base;
    try {
      for (let s = this.spans.peek(); s !== undefined && s.end <= limit; s = this.spans.peek()) {
        this.spans.shift();
        done = s.end;
        if (s.cut === undefined && s.errorLine === undefined && this.dialect === undefined) {
          this.run.push(s);
          continue;
        }
        if (this.run.length > 0) this.parseRun(held, base, out);
        if (s.cut !== undefined) this.cutLines(s, out);
        else this.record(s, held, base, out);
      }
      if (this.run.length > 0) this.parseRun(held, base, out);
    } catch (err) {
      callback(err as Error);
      return;
    }
    // bytes before the next span (comment and empty lines) are nobody's: not held
    const keep = Math.min(this.spans.peek()?.start ?? this.nextRecordFrom(), limit);
    if (keep > done) done = keep;
    this.held = held.subarray(done - base);
    this.base = done;
    if (out.length > 0) this.push(out);
    callback();
  }

  /** The empty lines a cut left: records of one empty field unless csv-parse skips empty lines. */
  private cutLines(s: CsvSpan, out: ParsedItem[]): void {
    if (this.options.skip_empty_lines !== false) return;
    for (let i = 1; i <= s.cut!.breaks; i++) out.push({ record: [''], bytes: s.start + 2 * i });
  }

  private record(s: CsvSpan, held: Buffer, base: number, out: ParsedItem[]): void {
    const start = s.start - base;
    const end = s.end - base;
    if (s.errorLine === undefined && this.dialect !== undefined) {
      const fields = splitRecord(held.toString('utf8', start, end - breakBefore(held, start, end)), this.dialect);
      if (fields !== undefined) {
        out.push({ record: fields, bytes: s.end });
        return;
      }
    }
    this.parseAlone(held.subarray(start, end), s.start, out);
  }

  /**
   * The clean records of `run` (consecutive spans, with the comment and empty lines between them) parsed by csv-parse
   * in one go; csv-parse starts every record from the same state, as for `parseAlone`. The guard saw no error in them:
   * csv-parse gives one record per span, each ending where its span ends. Should it say otherwise (a skip, another
   * count), the run is parsed again with each record's own end offset.
   */
  private parseRun(held: Buffer, base: number, out: ParsedItem[]): void {
    const run = this.run;
    const offset = run[0]!.start;
    const bytes = held.subarray(offset - base, run[run.length - 1]!.end - base);
    let skipped = false;
    const records = parseSync(bytes, {
      ...this.options,
      bom: false,
      on_skip: () => {
        skipped = true;
      },
    }) as string[][];
    if (!skipped && records.length === run.length) {
      for (let i = 0; i < run.length; i++) out.push({ record: records[i]!, bytes: run[i]!.end });
    } else {
      this.parseEach(bytes, offset, out, false);
    }
    run.length = 0;
  }

  /**
   * csv-parse on the record's bytes alone; its offsets moved by `offset`. It stops at the record's first error: csv-parse
   * words one more for every later quote of the field, each quoting the whole field so far — quadratic in a field full of
   * quotes (a 4 MiB record of `a"` ran out of memory) — and the reader reads only the first (a span is one record).
   */
  private parseAlone(bytes: Buffer, offset: number, out: ParsedItem[]): void {
    // csv-parse's error captures a stack the reader never reads: ~15 % of the CPU of a file of rejected lines
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      this.parseEach(bytes, offset, out, true);
    } catch (err) {
      if (err !== FIRST_ERROR_SEEN) throw err;
    } finally {
      Error.stackTraceLimit = stackTraceLimit;
    }
  }

  /**
   * csv-parse on `bytes`, each record and each skip pushed to `out` with its offsets moved by `offset`;
   * `stopAtFirstError`: the first skip throws FIRST_ERROR_SEEN (the caller catches it).
   */
  private parseEach(bytes: Buffer, offset: number, out: ParsedItem[], stopAtFirstError: boolean): void {
    parseSync(bytes, {
      ...this.options,
      bom: false,
      on_skip: (err: CsvError | undefined) => {
        if (err === undefined) return;
        out.push(new SkippedRecord(err, offset));
        if (stopAtFirstError) throw FIRST_ERROR_SEEN; // csv-parse returns it from its parse: nothing more of this record is read
      },
      on_record: (record: string[], context) => {
        out.push({ record, bytes: offset + context.bytes });
        return null;
      },
    });
  }
}

const FIRST_ERROR_SEEN = new Error('the record has an error: parse stopped');
