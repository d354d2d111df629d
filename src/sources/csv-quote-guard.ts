import { Transform, type TransformCallback } from 'node:stream';
import { normalize_options, type Options as CsvParseOptions, type OptionsNormalized as NormalizedOptions } from 'csv-parse';
import { FifoQueue } from '../core/fifo-queue.js';
import { HeldBytes } from './byte-window.js';

/*
 * Bounded recovery from broken quotes, upstream of csv-parse: fs → DecodeToUtf8 → CsvQuoteGuard → ByteWindow → csv-parse.
 *
 * csv-parse, once inside a quoted field, stays there until a quote followed by a delimiter or a line break: a
 * stray quote (`"ab" ,2`, `"ab,2`) makes every later line part of one record, rejected as a whole (or, past the
 * record size limit, the end of the source). This guard mirrors csv-parse's lexical state machine byte for byte
 * (same normalised options: delimiters, quote, escape, record delimiters, comments, trim) and holds back the
 * bytes of the current record until it ends. A record is *cut* when
 *   - a quoted field is still open after `maxQuotedLines` lines, or at the end of the file            (quote)
 *   - a quoted field holds a closing quote followed by other text (`"ab" ,2`) and crosses a line break, or
 *     crosses a line break and then meets a quote followed by other text (`"ab,2` … `4,"x",y`)       (quote)
 *   - the record grows past `maxRecordBytes` (quote open: quote; else: size — a huge unquoted field)
 *   - with `trim`, a character follows a closing quote (csv-parse would silently drop the rest of its buffer)
 * A cut removes the record from its first byte up to the end of the line where the offending quote opened (or,
 * for the last two, of the current line) and puts as many CRLF line breaks in its place: csv-parse sees empty
 * lines (line numbers and byte offsets stay consistent for the reader) and reading resumes on the next line,
 * scanned again from a fresh state. The reader turns each cut (a span in `spans`, in file order) into one reject.
 *
 * The guard works on bytes like csv-parse, which only ever sees UTF-8 (decode-stream.ts transcodes every file
 * upstream), and needs no more memory than the current record (bounded by `maxRecordBytes`) plus a chunk: bytes
 * of an over-long line past that are discarded (a bounded excerpt is kept for the reject).
 */

export type CutReason = 'unclosed' | 'lines' | 'quoted-size' | 'stray' | 'runaway' | 'after-quote' | 'size';

export interface CsvCut {
  reason: CutReason;
  /** True line (1-based) where the cut record starts. */
  startLine: number;
  /** Last line of the cut (inclusive). */
  endLine: number;
  /** Line where the offending quote opened (quote reasons). */
  quoteLine?: number;
  /** `runaway`: the line where a quote followed by other text showed the quote was broken. */
  badLine?: number;
  /** 0-based index of the field where the quote opened / the problem is. */
  field: number;
  /** Line breaks removed (as many CRLF were put in their place). */
  breaks: number;
  /** The cut text without its final line break (at most `rawExcerptBytes`), decoded. */
  raw: string;
  truncated: boolean;
  /** The cut runs to the end of the file (no line after it). */
  atEnd: boolean;
}

/**
 * One record as csv-parse will see it, in file order (whole-line comments, and empty lines csv-parse skips, have
 * none), or a cut record. `start`/`end` are byte offsets in the guard's output — the stream csv-parse reads, whose
 * `info.bytes` after a record is its `end` — so the reader pairs csv-parse's records with spans by offset.
 */
export interface CsvSpan {
  /** True lines of the record's first and last character. */
  startLine: number;
  endLine: number;
  /** Output bytes [start, end): the record and its line break; for a cut, the empty lines put in its place. */
  start: number;
  end: number;
  /** Line of the first character csv-parse reports an error on (an invalid opening or closing quote). */
  errorLine?: number;
  /** Set on a cut record: its reject. */
  cut?: CsvCut;
}

export interface GuardLimits {
  /** Lines a quoted field may span (≥ 1). */
  maxQuotedLines: number;
  /** Bytes a record may hold (its delimiters and quotes included). */
  maxRecordBytes: number;
  /** Bytes of a cut record kept as its `raw`. */
  rawExcerptBytes: number;
}

interface Lex {
  encoding: BufferEncoding;
  quote: Buffer | null;
  escape: Buffer | null;
  escapeIsQuote: boolean;
  delimiters: Buffer[];
  rds: Buffer[];
  comment: Buffer | null;
  commentNoInfix: boolean;
  ltrim: boolean;
  rtrim: boolean;
  skipEmptyLines: boolean;
  timchars: Buffer[];
  timFirst: Uint8Array;
  cr: Buffer;
  lf: Buffer;
  /** Bytes of lookahead every decision may need. */
  look: number;
  /** First bytes that end a run of plain bytes: inside quotes / in an unquoted field / in a comment line. */
  stopQuoted: Uint8Array;
  stopUnquoted: Uint8Array;
  stopComment: Uint8Array;
  /** The delimiter byte when outside quotes it and plain bytes are all a step decides (one byte, no trim, no comments); else -1. */
  plainDelimiter: number;
}

const EMPTY = Buffer.alloc(0);
const BOM_UTF8 = Buffer.from([0xef, 0xbb, 0xbf]);

/**
 * The characters csv-parse trims with `trim` / `ltrim` / `rtrim` (csv-parse 7: ECMAScript WhiteSpace and
 * LineTerminator, as `String.prototype.trim`). Its own list is private state; test/sources/csv-guard-spans.test.ts
 * fails when csv-parse trims another set.
 */
export const CSV_TRIM_CODE_POINTS: readonly number[] = [
  0x20, 0x09, 0x0a, 0x0d, 0x0c, 0x0b, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029,
  0x202f, 0x205f, 0x3000, 0xfeff,
];

/** csv-parse's own normalisation of the options (public `normalize_options`; throws on invalid options, like the parser would). */
function lexOf(options: CsvParseOptions): Lex {
  const o = normalize_options(options);
  const encoding = (o.encoding ?? 'utf8') as BufferEncoding;
  const quote = o.quote && o.quote.length > 0 ? o.quote : null;
  const escape = o.escape && o.escape.length > 0 ? o.escape : null;
  // csv-parse normalises `comment` to a Buffer (its typings say string)
  const comment = (o.comment as unknown as Buffer | null) ?? null;
  const timchars = CSV_TRIM_CODE_POINTS.map((c) => Buffer.from(String.fromCharCode(c), encoding));
  const timFirst = new Uint8Array(256);
  for (const t of timchars) timFirst[t[0]!] = 1;
  const cr = Buffer.from('\r', encoding);
  const lf = Buffer.from('\n', encoding);
  const seqs = [...o.delimiter, ...o.record_delimiter, ...timchars, cr, lf, ...(comment ? [comment] : [])];
  const longest = Math.max(1, ...seqs.map((s) => s.length));
  const stop = (bufs: (Buffer | null | undefined)[]): Uint8Array => {
    const t = new Uint8Array(256);
    for (const b of bufs) if (b && b.length > 0) t[b[0]!] = 1;
    return t;
  };
  return {
    encoding,
    quote,
    escape,
    escapeIsQuote: quote !== null && escape !== null && quote.equals(escape),
    delimiters: o.delimiter,
    rds: o.record_delimiter,
    comment,
    commentNoInfix: o.comment_no_infix,
    ltrim: o.ltrim,
    rtrim: o.rtrim,
    skipEmptyLines: o.skip_empty_lines,
    timchars,
    timFirst,
    cr,
    lf,
    look: (quote?.length ?? 0) + (escape?.length ?? 0) + 2 * longest + 4,
    stopQuoted: stop([quote, escape, cr, lf]),
    stopUnquoted: stop([quote, ...o.delimiter, ...o.record_delimiter, cr, lf]),
    stopComment: stop([...o.record_delimiter, cr, lf]),
    plainDelimiter: plainDelimiterOf(o),
  };
}

/**
 * The delimiter byte when, outside quotes, a step decides only between it and plain bytes (the guard's fast path):
 * one one-byte delimiter that is not the quote or a line break, no trim, no comments; else -1.
 */
function plainDelimiterOf(o: NormalizedOptions): number {
  if (o.ltrim || o.rtrim || o.comment != null || o.delimiter.length !== 1 || o.delimiter[0]!.length !== 1) return -1;
  const d = o.delimiter[0]![0]!;
  return d === o.quote?.[0] || d === 0x0d || d === 0x0a ? -1 : d;
}

/** The delimiter and quote of the common dialect (csv-span-parser.ts splits its records itself). */
export interface PlainDialect {
  delimiter: string;
  quote: string;
}

/**
 * The common dialect, or undefined: the guard's plain delimiter (above), a one-byte quote doubled inside quoted fields
 * (the escape is the quote), UTF-8. The one definition of it: the guard's fast path and the span parser's split.
 */
export function plainDialectOf(options: CsvParseOptions): PlainDialect | undefined {
  const o = normalize_options(options);
  const d = plainDelimiterOf(o);
  const q = o.quote ?? null;
  if (d === -1 || q === null || q.length !== 1 || q[0]! >= 0x80 || q[0] === 0x0d || q[0] === 0x0a) return undefined;
  if (o.escape == null || !o.escape.equals(q) || (o.encoding ?? 'utf8') !== 'utf8') return undefined;
  return { delimiter: String.fromCharCode(d), quote: String.fromCharCode(q[0]!) };
}

function matchAt(b: Buffer, p: number, seq: Buffer): boolean {
  if (p + seq.length > b.length) return false;
  for (let i = 0; i < seq.length; i++) if (b[p + i] !== seq[i]) return false;
  return true;
}

interface Drop {
  reason: CutReason;
  startLine: number;
  quoteLine?: number;
  field: number;
  /** Line breaks of the cut before the line whose end is searched. */
  before: number;
  excerpt: Buffer[];
  excerptBytes: number;
  truncated: boolean;
}

export class CsvQuoteGuard extends Transform {
  /** Records and cuts, in file order; the reader takes them from the front (`head`). */
  readonly spans = new FifoQueue<CsvSpan>();
  /** The same spans for a second reader (csv-span-parser.ts, which splits the records), when asked for. */
  readonly parseSpans: FifoQueue<CsvSpan> | undefined;
  /** Bytes passed on so far: held[0] is the next byte out (except while dropping). */
  private outBytes = 0;
  /** Output offset where the current record starts, and its first csv-parse error line. */
  private recStart = 0;
  private recErrorLine: number | undefined;
  private lex: Lex | undefined;
  private held: Buffer = EMPTY;
  private readonly growing = new HeldBytes();
  /** Scan position in `held`. */
  private p = 0;
  /** Start of the current record in `held`: the bytes before it can be passed on. */
  private rec = 0;
  /** True line at `p`, and where the current record started. */
  private line = 1;
  private recLine = 1;
  /** Index in `held` just past the last CR visited (a CRLF is one line break). */
  private crEnd = -1;
  // csv-parse's lexical state
  private quoting = false;
  private wasQuoting = false;
  private fieldLen = 0;
  private fields = 0;
  private commenting = false;
  private escaping = false;
  // the open quote
  private qPos = 0;
  private qLine = 0;
  private qField = 0;
  private qBad = false;
  private dropping: Drop | undefined;

  constructor(
    private readonly options: CsvParseOptions,
    private readonly limits: GuardLimits,
    withParseSpans = false,
  ) {
    super();
    lexOf(options); // invalid options throw here, before any byte is read
    if (withParseSpans) this.parseSpans = new FifoQueue<CsvSpan>();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, callback: TransformCallback): void {
    this.held = this.growing.append(this.held, chunk);
    try {
      this.run(false);
    } catch (err) {
      callback(err as Error);
      return;
    }
    callback();
  }

  override _flush(callback: TransformCallback): void {
    try {
      this.run(true);
      if (this.held.length > 0) this.passOn(this.held);
      this.held = EMPTY;
    } catch (err) {
      callback(err as Error);
      return;
    }
    callback();
  }

  /**
   * Output offset before which no record still to come starts: the current record's start, or — in a whole-line
   * comment (no span) — the bytes passed on so far. Bytes before it that no queued span holds (comment and empty lines)
   * are needed by no later stage: the span parser and the reader's window drop them (a 100 MB comment line held nothing).
   */
  get nextRecordFrom(): number {
    return this.commenting && !this.hasData() ? this.outBytes + this.rec : this.recStart;
  }

  private passOn(b: Buffer): void {
    this.outBytes += b.length;
    this.push(b);
  }

  private run(eof: boolean): void {
    if (this.lex === undefined) {
      const b = this.held;
      if (b.length < 3 && !eof) return;
      // the decoder upstream hands on UTF-8 only, its byte-order mark kept (UTF-16's is gone): skipped like csv-parse does
      const bomLen = b.length >= 3 && BOM_UTF8.compare(b, 0, 3) === 0 ? 3 : 0;
      this.lex = lexOf(this.options);
      this.p = this.rec = this.recStart = bomLen;
    }
    this.scan(eof);
    if (eof && this.dropping === undefined && this.hasData()) this.pushSpan(this.line, this.outBytes + this.held.length);
    this.release();
  }

  /** Passes on the bytes before the current record. */
  private release(): void {
    const n = this.rec;
    if (n === 0) return;
    this.passOn(this.held.subarray(0, n));
    this.held = this.held.subarray(n);
    this.p -= n;
    this.rec = 0;
    this.qPos -= n;
    this.crEnd -= n;
  }

  private resetRecord(): void {
    this.quoting = false;
    this.wasQuoting = false;
    this.fieldLen = 0;
    this.fields = 0;
    this.commenting = false;
    this.escaping = false;
    this.qBad = false;
    this.recErrorLine = undefined;
  }

  /** csv-parse emits the current record (a record with nothing in it is an empty line or a whole-line comment). */
  private hasData(): boolean {
    return this.fields > 0 || this.fieldLen > 0 || this.wasQuoting;
  }

  private pushSpan(endLine: number, end: number): void {
    this.addSpan({ startLine: this.recLine, endLine, start: this.recStart, end, errorLine: this.recErrorLine });
  }

  private addSpan(span: CsvSpan): void {
    this.spans.push(span);
    this.parseSpans?.push(span);
  }

  /** The first csv-parse error in the record: its line. */
  private markError(): void {
    this.recErrorLine ??= this.line;
  }

  /**
   * Runs csv-parse's state machine over the held bytes, one decision per step, as far as it can decide without
   * more input. Each step helper returns true when it consumed bytes or cut a record (the loop goes on).
   */
  private scan(eof: boolean): void {
    const L = this.lex!;
    for (;;) {
      if (this.dropping !== undefined) {
        if (!this.continueDrop(eof)) return;
        continue;
      }
      const n = this.held.length;
      const p = this.p;
      if (p >= n) {
        if (eof && this.quoting) {
          this.cutAtLineEnd('unclosed', this.qPos, eof);
          continue;
        }
        return;
      }
      if (!eof && n - p < L.look) return;
      if (this.skipPlainRun(p, n)) continue;
      if (!this.commenting && p - this.rec >= this.limits.maxRecordBytes) {
        if (this.quoting) this.cutAtLineEnd('quoted-size', this.qPos, eof);
        else this.cutAtLineEnd('size', p, eof);
        continue;
      }
      if (this.countLineBreak(p, eof)) continue;
      if (this.escaping) {
        this.escaping = false;
        this.fieldLen++;
        this.p = p + 1;
        continue;
      }
      if (this.quoteStep(p, n, eof)) continue;
      if (!this.quoting && this.structureStep(p)) continue;
      this.fieldByte(p, eof);
    }
  }

  /** Runs of plain bytes (most of a file): no decision to make, no line break. */
  private skipPlainRun(p: number, n: number): boolean {
    if (this.escaping) return false;
    const L = this.lex!;
    // A quote opened right after a closed one (`"" "a"`) keeps csv-parse's `wasQuoting`: with rtrim each of its bytes is
    // a decision (`fieldByte`: the first one not trimmable is CSV_NON_TRIMABLE_CHAR_AFTER_CLOSING_QUOTE, a cut).
    if (this.quoting && this.wasQuoting && L.rtrim) return false;
    if (L.plainDelimiter !== -1 && !this.quoting && !this.commenting) return this.skipPlainFields(p, n, L.plainDelimiter);
    const table = this.quoting ? L.stopQuoted : this.commenting ? L.stopComment : this.fieldLen > 0 && !this.wasQuoting ? L.stopUnquoted : undefined;
    if (table === undefined) return false;
    const b = this.held;
    const limit = this.commenting ? n : Math.min(n, this.rec + this.limits.maxRecordBytes);
    let q = p;
    while (q < limit && table[b[q]!] === 0) q++;
    if (q === p) return false;
    if (!this.commenting) this.fieldLen += q - p;
    this.p = q;
    // A comment line can be passed on as it goes: it is never cut.
    if (this.commenting) this.rec = q;
    return true;
  }

  /**
   * Outside quotes with a one-byte delimiter, no trim and no comments: delimiters and plain bytes, up to a quote or a
   * line break (the steps `structureStep` and `fieldByte` would take, one byte each).
   */
  private skipPlainFields(p: number, n: number, delimiter: number): boolean {
    const b = this.held;
    const stop = this.lex!.stopUnquoted;
    const limit = Math.min(n, this.rec + this.limits.maxRecordBytes);
    let fields = this.fields;
    let fieldLen = this.fieldLen;
    let wasQuoting = this.wasQuoting;
    let q = p;
    for (; q < limit; q++) {
      const c = b[q]!;
      if (c === delimiter) {
        fields++;
        fieldLen = 0;
        wasQuoting = false;
      } else if (stop[c] !== 0) break;
      else fieldLen++;
    }
    if (q === p) return false;
    this.fields = fields;
    this.fieldLen = fieldLen;
    this.wasQuoting = wasQuoting;
    this.p = q;
    return true;
  }

  /** Line accounting for the byte at p (csv-parse counts differently; the reader corrects it); true: a quote was cut. */
  private countLineBreak(p: number, eof: boolean): boolean {
    const L = this.lex!;
    const b = this.held;
    const c = b[p]!;
    let isBreak = false;
    if (c === L.cr[0] && matchAt(b, p, L.cr)) {
      isBreak = true;
      this.line++;
      this.crEnd = p + L.cr.length;
    } else if (c === L.lf[0] && matchAt(b, p, L.lf)) {
      if (p !== this.crEnd) {
        isBreak = true;
        this.line++;
      }
    }
    if (!isBreak || !this.quoting) return false;
    if (this.qBad) {
      this.cutAtLineEnd('stray', this.qPos, eof);
      return true;
    }
    if (this.line - this.qLine >= this.limits.maxQuotedLines) {
      this.cutAtLineEnd('lines', this.qPos, eof);
      return true;
    }
    return false;
  }

  /** Escape and quote characters: one step of csv-parse's state machine (api/index.js `parse`), errors included. */
  private quoteStep(p: number, n: number, eof: boolean): boolean {
    const L = this.lex!;
    const b = this.held;
    const quote = L.quote;
    const escape = L.escape;
    if (escape !== null && this.quoting && matchAt(b, p, escape) && p + escape.length < n) {
      if (!L.escapeIsQuote || (quote !== null && matchAt(b, p + escape.length, quote))) {
        this.escaping = true;
        this.p = p + escape.length;
        return true;
      }
    }
    if (this.commenting || quote === null || !matchAt(b, p, quote)) return false;
    if (this.quoting) {
      const q = p + quote.length;
      if (escape !== null && matchAt(b, p, escape) && matchAt(b, p + escape.length, quote)) {
        this.fieldLen++;
        this.p = p + escape.length;
        return true;
      }
      if (q >= n || b[q] === 0 || this.delimiterAt(q) || this.rdAt(q) || (L.comment !== null && matchAt(b, q, L.comment)) || (L.rtrim && this.trimAt(q))) {
        this.quoting = false;
        this.wasQuoting = true;
        this.p = q;
        return true;
      }
      // CSV_INVALID_CLOSING_QUOTE: csv-parse stays inside the quote.
      this.qBad = true;
      this.markError();
      if (this.line > this.qLine) {
        this.cutAtLineEnd('runaway', this.qPos, eof, this.line);
        return true;
      }
      return false;
    }
    if (this.fieldLen !== 0) {
      this.markError(); // INVALID_OPENING_QUOTE: the quote is a character of the field
      return false;
    }
    this.quoting = true;
    this.qPos = p;
    this.qLine = this.line;
    this.qField = this.fields;
    this.qBad = false;
    this.p = p + quote.length;
    return true;
  }

  /** Outside a quote: record delimiter, comment, field delimiter. */
  private structureStep(p: number): boolean {
    const L = this.lex!;
    const rdl = this.rdAt(p);
    if (rdl !== 0) {
      this.endRecord(p, rdl);
      return true;
    }
    if (this.commenting) {
      this.p = p + 1;
      return true;
    }
    if (L.comment !== null && (!L.commentNoInfix || (this.fields === 0 && this.fieldLen === 0)) && matchAt(this.held, p, L.comment)) {
      this.commenting = true;
      this.p = p + 1;
      return true;
    }
    const dl = this.delimiterAt(p);
    if (dl === 0) return false;
    this.fields++;
    this.fieldLen = 0;
    this.wasQuoting = false;
    this.p = p + dl;
    return true;
  }

  /** A record delimiter at p (its line break already counted): the record's span, unless csv-parse skips the line. */
  private endRecord(p: number, rdl: number): void {
    const L = this.lex!;
    if (this.hasData() || (!this.commenting && !L.skipEmptyLines)) {
      const b = this.held[p];
      const endLine = b === L.cr[0] || b === L.lf[0] ? this.line - 1 : this.line;
      this.pushSpan(endLine, this.outBytes + p + rdl);
    }
    this.resetRecord();
    this.p = this.rec = p + rdl;
    this.recStart = this.outBytes + this.p;
    this.recLine = this.line;
  }

  /** A byte of a field's value (trimmed or kept as csv-parse would). */
  private fieldByte(p: number, eof: boolean): void {
    const L = this.lex!;
    const trim = L.ltrim || L.rtrim ? this.trimAt(p) : 0;
    const lappend = !L.ltrim || this.quoting || this.fieldLen !== 0 || trim === 0;
    const rappend = !L.rtrim || !this.wasQuoting;
    if (lappend && rappend) {
      this.fieldLen++;
      this.p = p + 1;
    } else if (L.rtrim && trim === 0) {
      // CSV_NON_TRIMABLE_CHAR_AFTER_CLOSING_QUOTE: csv-parse would return without keeping the rest of its buffer.
      this.cutAtLineEnd('after-quote', p, eof);
    } else {
      this.p = p + (lappend ? 1 : trim);
    }
  }

  private delimiterAt(p: number): number {
    const b = this.held;
    for (const d of this.lex!.delimiters) if (b[p] === d[0] && matchAt(b, p, d)) return d.length;
    return 0;
  }

  private rdAt(p: number): number {
    const b = this.held;
    for (const r of this.lex!.rds) if (b[p] === r[0] && matchAt(b, p, r)) return r.length;
    return 0;
  }

  private trimAt(p: number): number {
    const L = this.lex!;
    const b = this.held;
    if (p >= b.length || L.timFirst[b[p]!] === 0) return 0;
    for (const t of L.timchars) if (matchAt(b, p, t)) return t.length;
    return 0;
  }

  /**
   * Index just past the first line break at or after `from` in `held` (a CRLF whole), -1 when there is none,
   * -2 when a CR ends the data and the next byte decides.
   */
  private lineEnd(from: number, eof: boolean): number {
    const L = this.lex!;
    const b = this.held;
    const n = b.length;
    for (let i = from; i < n; i++) {
      const c = b[i];
      if (c === L.cr[0] && matchAt(b, i, L.cr)) {
        const e = i + L.cr.length;
        if (e + L.lf.length > n && !eof) return -2;
        return matchAt(b, e, L.lf) ? e + L.lf.length : e;
      }
      if (c === L.lf[0] && matchAt(b, i, L.lf)) return i + L.lf.length;
    }
    return -1;
  }

  /** Line breaks in held[from, to) (a CRLF once). */
  private breaksIn(from: number, to: number): number {
    const L = this.lex!;
    const b = this.held;
    let n = 0;
    let crEnd = -1;
    for (let i = from; i < to; i++) {
      const c = b[i];
      if (c === L.cr[0] && matchAt(b, i, L.cr)) {
        n++;
        crEnd = i + L.cr.length;
      } else if (c === L.lf[0] && matchAt(b, i, L.lf) && i !== crEnd) n++;
    }
    return n;
  }

  /** Length of the line break ending held[.., to), 0 if none. */
  private terminatorBefore(to: number): number {
    const L = this.lex!;
    const b = this.held;
    const crlf = L.cr.length + L.lf.length;
    if (to >= crlf && matchAt(b, to - crlf, L.cr) && matchAt(b, to - L.lf.length, L.lf)) return crlf;
    if (to >= L.lf.length && matchAt(b, to - L.lf.length, L.lf)) return L.lf.length;
    if (to >= L.cr.length && matchAt(b, to - L.cr.length, L.cr)) return L.cr.length;
    return 0;
  }

  /** Cuts the current record up to the end of the line holding `at` (a quote's opening, or the current position). */
  private cutAtLineEnd(reason: CutReason, at: number, eof: boolean, badLine?: number): void {
    const quote = reason !== 'after-quote' && reason !== 'size';
    const field = quote ? this.qField : this.fields;
    const quoteLine = quote ? this.qLine : undefined;
    const e = this.lineEnd(at, eof);
    if (e === -1 && eof) {
      this.finishCut(reason, field, quoteLine, badLine, this.held.length, true);
      return;
    }
    if (e >= 0) {
      this.finishCut(reason, field, quoteLine, badLine, e, eof && e >= this.held.length);
      return;
    }
    // The end of that line is not here yet: pass on what came before, keep an excerpt, discard the rest.
    const b = this.held;
    const before = this.breaksIn(this.rec, at);
    const from = this.rec;
    const keep = Math.min(b.length - from, this.limits.rawExcerptBytes);
    const drop: Drop = {
      reason,
      startLine: this.recLine,
      quoteLine,
      field,
      before,
      excerpt: [Buffer.from(b.subarray(from, from + keep))],
      excerptBytes: keep,
      truncated: b.length - from > keep,
    };
    if (e === -2) {
      // keep the final CR: the next byte tells whether it is a CRLF
      const crAt = b.length - this.lex!.cr.length;
      drop.excerpt = [Buffer.from(b.subarray(from, Math.min(crAt, from + keep)))];
      drop.excerptBytes = drop.excerpt[0]!.length;
      if (from > 0) this.passOn(b.subarray(0, from));
      this.held = b.subarray(crAt);
    } else {
      if (from > 0) this.passOn(b.subarray(0, from));
      this.held = EMPTY;
    }
    this.p = this.rec = 0;
    this.crEnd = -1;
    this.dropping = drop;
  }

  /** In a drop: looks for the end of the line; true when the cut is complete and scanning goes on. */
  private continueDrop(eof: boolean): boolean {
    const d = this.dropping!;
    const b = this.held;
    const e = this.lineEnd(0, eof);
    if (e === -2) return false;
    if (e === -1 && !eof) {
      const room = this.limits.rawExcerptBytes - d.excerptBytes;
      if (room > 0) {
        const part = Buffer.from(b.subarray(0, Math.min(room, b.length)));
        d.excerpt.push(part);
        d.excerptBytes += part.length;
      }
      if (b.length > room) d.truncated = true;
      this.held = EMPTY;
      return false;
    }
    const end = e === -1 ? b.length : e;
    const term = e === -1 ? 0 : this.terminatorBefore(e);
    const room = this.limits.rawExcerptBytes - d.excerptBytes;
    const text = end - term;
    if (room > 0 && text > 0) d.excerpt.push(Buffer.from(b.subarray(0, Math.min(room, text))));
    if (text > room) d.truncated = true;
    const breaks = d.before + (term > 0 ? 1 : 0);
    this.dropping = undefined;
    const cut: CsvCut = {
      reason: d.reason,
      startLine: d.startLine,
      endLine: d.startLine + d.before,
      quoteLine: d.quoteLine,
      field: d.field,
      breaks,
      raw: Buffer.concat(d.excerpt).toString(this.lex!.encoding),
      truncated: d.truncated,
      atEnd: eof && end >= b.length,
    };
    this.afterCut(end, d.startLine + breaks, cut);
    return true;
  }

  /** The current record, from `rec` to `end` (its last line break included, if any), is cut. */
  private finishCut(reason: CutReason, field: number, quoteLine: number | undefined, badLine: number | undefined, end: number, atEnd: boolean): void {
    const b = this.held;
    const from = this.rec;
    const breaks = this.breaksIn(from, end);
    const term = this.terminatorBefore(end);
    const textEnd = Math.max(from, end - term);
    const keep = Math.min(textEnd - from, this.limits.rawExcerptBytes);
    const cut: CsvCut = {
      reason,
      startLine: this.recLine,
      endLine: this.recLine + breaks - (term > 0 ? 1 : 0),
      quoteLine,
      badLine,
      field,
      breaks,
      raw: b.toString(this.lex!.encoding, from, from + keep),
      truncated: keep < textEnd - from,
      atEnd,
    };
    if (from > 0) this.passOn(b.subarray(0, from));
    this.held = b.subarray(from);
    this.afterCut(end - from, this.recLine + breaks, cut);
  }

  /** Drops held[0, end), puts the cut's `breaks` CRLFs in its place and scans on from a fresh state at `line`. */
  private afterCut(end: number, line: number, cut: CsvCut): void {
    const breaks = cut.breaks;
    const start = this.outBytes;
    if (breaks > 0) {
      const L = this.lex!;
      const crlf = Buffer.concat([L.cr, L.lf]);
      this.passOn(Buffer.concat(Array.from({ length: breaks }, () => crlf)));
    }
    this.addSpan({ startLine: cut.startLine, endLine: cut.endLine, start, end: this.outBytes, cut });
    this.held = this.held.subarray(end);
    this.p = this.rec = 0;
    this.recStart = this.outBytes;
    this.crEnd = -1;
    this.line = this.recLine = line;
    this.resetRecord();
  }
}
