import { pipeline, type Readable, type Transform } from 'node:stream';
import { CsvError, Parser, type Options as CsvParseOptions } from 'csv-parse';
import { issue, type Issue, type KnownIssueCode } from '../core/issues.js';
import { ByteWindow } from './byte-window.js';
import {
  ACCEPTED_ENCODINGS,
  DecodeToUtf8,
  encodingAdvice,
  invalidBytesMessage,
  resolveEncoding,
  takeInvalid,
  type InvalidBytes,
  type TextEncoding,
} from './decode-stream.js';
import { CsvQuoteGuard, plainDialectOf, type CsvCut, type CsvSpan, type GuardLimits } from './csv-quote-guard.js';
import { CsvSpanParser, SkippedRecord, type CsvSkip, type ParsedItem, type ParsedRow } from './csv-span-parser.js';
import type { FifoQueue } from '../core/fifo-queue.js';
import { rejectItem, showText, sourceFatal, wrapReadError } from './source-errors.js';
import { fileStream, isTsv, openSourceFile } from './source-file.js';
import { CSV_DEFAULT_MAX_QUOTED_LINES, CSV_MAX_RECORD_CHARS, CSV_RAW_EXCERPT_BYTES, type ByteMeter, type SourceConfig, type SourceItem } from './types.js';

/*
 * CSV reader on csv-parse, streaming: fs → DecodeToUtf8 → CsvQuoteGuard → ByteWindow (tap) → CsvSpanParser → this reader.
 * `CsvSpanParser` (csv-span-parser.ts) parses the records from the guard's spans: in the common dialect it splits
 * them itself, in others csv-parse parses a chunk's clean records in one go; a record with an error is parsed by
 * csv-parse alone, up to its first error — csv-parse's output, in batches. (csv-parse reading the whole stream, the
 * `stream` path, is what the tests compare it to.)
 *
 * Everything after DecodeToUtf8 (decode-stream.ts) sees UTF-8, whatever `csv.encoding` is: csv-parse compares
 * bytes, so UTF-16 must not reach it. Invalid bytes in the file's encoding come from the decoder with their line;
 * the record whose lines hold them is rejected (`encoding-invalid`), a header row holding them is fatal.
 *
 * The guard (csv-quote-guard.ts) cuts records whose quote is broken beyond a bound (a quoted field open for
 * more than `csv.maxQuotedLines` lines or at the end of the file, a stray closing quote in a field that runs
 * past its line, a record over CSV_MAX_RECORD_CHARS bytes) and puts empty lines in their place; the reader
 * emits one reject per cut, in file order, before the next record csv-parse yields.
 *
 * csv-parse runs without `columns` (each record is an array, zipped with the header here), so that a
 * ragged row is still seen with its real field count; each record comes with the byte offset where it ends (on the
 * `stream` path `RecordEndParser` tags it: what csv-parse's `info` holds, without the copy of its whole state it
 * makes per record). Records csv-parse drops for a malformed quote (`skip_records_with_error`) come as
 * `SkippedRecord`s in the parser's own output: rejects stay in file order and share its backpressure.
 *
 * Where each record is. The guard scans every byte before csv-parse does and queues each record's span (true
 * first and last line, byte range in the stream csv-parse reads, line of its first syntax error) and each cut.
 * A record csv-parse yields is the span ending at its `info.bytes`; an error belongs to the first span ending
 * after the error's `bytes`. Spans passed on the way are cuts (their rejects, in file order). A rejected
 * record's text is its span's bytes, from the ByteWindow (the guard's output, kept from the first record not
 * yet handled).
 */

/** csv-parse with each record pushed as a `ParsedRow`: `info.bytes` is where the record ends when it is pushed. */
class RecordEndParser extends Parser {
  override push(chunk: unknown, encoding?: BufferEncoding): boolean {
    if (Array.isArray(chunk)) return super.push({ record: chunk as string[], bytes: this.info.bytes } satisfies ParsedRow);
    return super.push(chunk, encoding);
  }
}

/** A dropped record; its reject waits until csv-parse is past it (later errors of the same record, its text). */
interface PendingDrop {
  record: number;
  span: CsvSpan;
  error: CsvSkip;
  /** An error of the record said its quote is never closed (it runs to the end of the file). */
  unclosed: boolean;
}

function outOfStep(pos: number): Error {
  return new Error(`CSV reader out of step with its quote guard at byte ${pos}`);
}

const noop = (): void => undefined;

interface ReaderOptions {
  parse: CsvParseOptions;
  limits: GuardLimits;
  encoding: TextEncoding;
}

/** csv-parse options and the guard's bounds for a source; throws a fatal error naming the source for invalid options. */
function parseOptions(cfg: SourceConfig): ReaderOptions {
  const o = cfg.csv ?? {};
  const delimiter = o.delimiter ?? (isTsv(cfg.path) ? '\t' : ',');
  const quote = o.quote ?? '"';
  const encoding = resolveEncoding(o.encoding);
  const bad: string[] = [];
  if (typeof delimiter !== 'string' || delimiter.length === 0) bad.push('`delimiter` must be a non-empty string');
  if (typeof quote !== 'string') bad.push('`quote` must be a string');
  if (o.escape !== undefined && (typeof o.escape !== 'string' || o.escape.length === 0)) bad.push('`escape` must be a non-empty string');
  if (o.comment !== undefined && (typeof o.comment !== 'string' || o.comment.length === 0)) bad.push('`comment` must be a non-empty string');
  if (encoding === undefined) {
    bad.push(
      `\`encoding\` ${JSON.stringify(o.encoding)} is not a Node.js encoding or code page care-etl reads (expected one of ${ACCEPTED_ENCODINGS.join(', ')})`,
    );
  }
  const maxQuotedLines = o.maxQuotedLines ?? CSV_DEFAULT_MAX_QUOTED_LINES;
  if (!Number.isInteger(maxQuotedLines) || maxQuotedLines < 1) bad.push('`maxQuotedLines` must be an integer ≥ 1');
  if (bad.length > 0) {
    throw sourceFatal(cfg, `invalid csv options: ${bad.join('; ')}`, { code: 'source-config' });
  }
  const opts: CsvParseOptions = {
    bom: true,
    delimiter,
    quote,
    escape: o.escape ?? quote,
    // the decoder upstream hands csv-parse UTF-8 whatever the file's encoding
    encoding: 'utf8',
    trim: o.trim ?? false,
    skip_empty_lines: o.skipEmptyLines ?? true,
    relax_column_count: true,
    skip_records_with_error: true,
    // Explicit (not auto-detected from the first line): a file mixing LF and CRLF lines must not leave
    // a trailing CR in the last field of some rows.
    record_delimiter: ['\r\n', '\n', '\r'],
    max_record_size: CSV_MAX_RECORD_CHARS,
  };
  if (o.comment !== undefined) {
    opts.comment = o.comment;
    // `Apt #5` must stay data: only whole lines starting with the comment character are comments.
    opts.comment_no_infix = true;
  }
  return {
    parse: opts,
    limits: { maxQuotedLines, maxRecordBytes: CSV_MAX_RECORD_CHARS, rawExcerptBytes: CSV_RAW_EXCERPT_BYTES },
    encoding: encoding!,
  };
}

/** Validates column names (header row or `csv.columns`); throws one fatal error listing every problem. */
function checkColumnNames(cfg: SourceConfig, names: readonly string[], line: number | undefined): void {
  const issues: Issue[] = [];
  const seen = new Map<string, number>();
  const where = line === undefined ? 'in `csv.columns`' : 'in the header row';
  const problem = (message: string): void => {
    issues.push(issue.fatal('csv-header', message, { location: { file: cfg.path, line } }));
  };
  for (let i = 0; i < names.length; i++) {
    const name = names[i];
    if (typeof name !== 'string' || name.trim() === '') {
      problem(`column ${i + 1} has an empty name ${where}`);
    } else if (name === '__proto__') {
      problem(`column ${i + 1} has the reserved name "__proto__" ${where}`);
    } else {
      const prev = seen.get(name);
      if (prev !== undefined) problem(`duplicate column name ${showText(name)} ${where} (columns ${prev + 1} and ${i + 1})`);
      else seen.set(name, i);
    }
  }
  if (issues.length > 0) {
    const summary = issues.length === 1 ? issues[0].message : `${issues.length} problems ${where}`;
    throw sourceFatal(cfg, `invalid column names: ${summary}`, {
      code: 'csv-header',
      line,
      issues,
      hint: 'Every column needs a unique, non-empty name: fix the header row of the export, or list the names in `csv.columns` for a file without a header row.',
    });
  }
}

/** `column "name"` (escaped: header names are source text), `field N` past the header, or `a field`. */
function columnLabel(index: number | undefined, header: readonly string[] | undefined): string {
  if (index === undefined) return 'a field';
  return header !== undefined && index < header.length ? `column ${showText(header[index])}` : `field ${index + 1}`;
}

function describeCsvError(err: CsvSkip, header: readonly string[] | undefined): string {
  const col = columnLabel(err.column, header);
  switch (err.code) {
    case 'INVALID_OPENING_QUOTE':
      return `quote character inside an unquoted field (${col})`;
    case 'CSV_INVALID_CLOSING_QUOTE':
      return `closing quote not followed by a delimiter or the end of the line (${col})`;
    case 'CSV_NON_TRIMABLE_CHAR_AFTER_CLOSING_QUOTE':
      return `unexpected character after a closing quote (${col})`;
    case 'CSV_QUOTE_NOT_CLOSED':
      return `quoted field never closed (${col})`;
    default:
      return `CSV syntax error ${err.code}`;
  }
}

interface Started {
  /** csv-parse (its records one by one), or the span parser (batches of them). */
  parser: Transform;
  window: ByteWindow;
  guard: CsvQuoteGuard;
  decoder: DecodeToUtf8;
}

/** Starts fs → DecodeToUtf8 → CsvQuoteGuard → ByteWindow → csv-parse; csv-parse's option errors become a configuration error naming the source. */
function startParseOrFail(cfg: SourceConfig, options: ReaderOptions, input: Readable, path: CsvParsePath = 'spans'): Started {
  try {
    return startParse(options, input, path);
  } catch (err) {
    throw sourceFatal(cfg, `invalid csv options: ${(err as Error).message}`, { code: 'source-config', cause: err });
  }
}

/**
 * How the guard's output is parsed: `spans` — by csv-span-parser.ts, record by record from the guard's spans (what the
 * reader does); `stream` — by csv-parse reading the stream (the oracle the tests compare `spans` to: it words an error
 * for every later stray quote of a record, quadratic in a field full of them).
 */
export type CsvParsePath = 'spans' | 'stream';

/** The caller iterates `parser` and destroys it when done. */
function startParse(options: ReaderOptions, input: Readable, path: CsvParsePath): Started {
  const decoder = new DecodeToUtf8(options.encoding);
  const guard = new CsvQuoteGuard(options.parse, options.limits, path === 'spans');
  const window = new ByteWindow();
  let parser: Transform;
  if (path === 'spans') {
    parser = new CsvSpanParser(guard.parseSpans!, plainDialectOf(options.parse), options.parse, () => guard.nextRecordFrom);
  } else {
    const csvParser: Parser = new RecordEndParser({
      ...options.parse,
      on_skip: (err: CsvError | undefined) => {
        if (err !== undefined) csvParser.push(new SkippedRecord(err));
      },
    });
    parser = csvParser;
  }
  pipeline(input, decoder, guard, window, parser, noop);
  return { parser, window, guard, decoder };
}

class CsvReadState {
  header: readonly string[] | undefined;
  width = 0;
  headerLine: number | undefined;
  /** Data records so far (rejected ones included). */
  recordNo = 0;
  /** True line after the last record handled (for a read error's message). */
  nextLine = 1;
  pending: PendingDrop | undefined;
  /** Items ready to be yielded, in file order. */
  readonly out: SourceItem[] = [];
  private readonly spans: FifoQueue<CsvSpan>;
  /** A cut whose reject is out while its empty lines are still read (skipEmptyLines off). */
  private shownCut: CsvCut | undefined;

  constructor(
    readonly cfg: SourceConfig,
    readonly window: ByteWindow,
    private readonly guard: CsvQuoteGuard,
    readonly limits: GuardLimits,
    readonly decoder: DecodeToUtf8,
  ) {
    this.spans = guard.spans;
    window.floorHint = () => this.keepFrom();
    const columns = cfg.csv?.columns;
    if (columns !== undefined) {
      checkColumnNames(cfg, columns, undefined);
      this.header = [...columns];
      this.width = columns.length;
    }
  }

  /** The window's floor beyond the records handled: the record pending, the next span, or the guard's next record. */
  keepFrom(): number {
    const next = this.spans.peek()?.start ?? this.guard.nextRecordFrom;
    return this.pending === undefined ? next : Math.min(this.pending.span.start, next);
  }

  /** The file text of a span without its final line break ('' if the window no longer holds it: should not happen). */
  private spanText(s: CsvSpan): string {
    const buf = this.window.slice(s.start, s.end);
    if (buf === undefined) return '';
    const text = buf.toString('utf8');
    const cut = text.endsWith('\r\n') ? 2 : text.endsWith('\n') || text.endsWith('\r') ? 1 : 0;
    return text.slice(0, text.length - cut);
  }

  /** Done with the bytes before `end`. */
  private release(end: number): void {
    if (end > this.window.floor) this.window.floor = end;
  }

  /**
   * Takes the spans ending before `pos` (a cut among them becomes its reject; a skipped record's span is never
   * before `pos`) and returns the first span left, not taken.
   */
  private spanFrom(pos: number, passCuts: boolean): CsvSpan | undefined {
    const spans = this.spans;
    for (;;) {
      const s = spans.peek();
      if (s === undefined || (s.end >= pos && !(passCuts && s.cut !== undefined))) return s;
      spans.shift();
      if (s.cut !== undefined) this.cutReject(s.cut);
      this.release(s.end);
      this.nextLine = s.endLine + 1;
    }
  }

  /** Handles what the parser gave: a record or a skipped record. */
  onItem(item: ParsedItem): void {
    if (item instanceof SkippedRecord) this.onSkip(item);
    else this.onRow(item);
  }

  /** Handles one parsed record: the header, a data record or a ragged-row reject (into `out`). */
  onRow(row: ParsedRow): void {
    if (this.pending !== undefined) this.resolvePending();
    const pos = row.bytes;
    const span = this.spanFrom(pos, false);
    if (span?.cut !== undefined) {
      // an empty line a cut left (a record when skipEmptyLines is off): the cut's reject, once
      this.cutReject(span.cut);
      if (span.end === pos) this.spans.shift();
      return;
    }
    if (span?.end !== pos) throw outOfStep(pos);
    this.spans.shift();
    this.nextLine = span.endLine + 1;
    this.onRecord(row.record, span);
    this.release(span.end);
  }

  private onRecord(fields: string[], span: CsvSpan): void {
    const start = span.startLine;
    // invalid bytes on lines before `start` were in rejected records or comment lines: dropped
    const invalid = this.decoder.invalid;
    if (invalid.length > 0 && invalid[0].line <= span.endLine) {
      const found = takeInvalid(invalid, start, span.endLine);
      if (found.length > 0) {
        this.encodingReject(span, found);
        return;
      }
    }
    const header = this.header;
    if (header === undefined) {
      checkColumnNames(this.cfg, fields, start);
      this.header = fields;
      this.width = fields.length;
      this.headerLine = start;
      return;
    }
    const record = ++this.recordNo;
    const width = this.width;
    if (fields.length !== width) {
      const expected = this.headerLine === undefined ? '`csv.columns`' : `header, line ${this.headerLine}`;
      const item = rejectItem(
        { source: this.cfg.name, file: this.cfg.path, line: start, record },
        'csv-ragged',
        `expected ${width} fields (${expected}), got ${fields.length}`,
        this.spanText(span),
      );
      // the whole row is off: its first and last columns name the span (hand-over: `columns MRN … ZIP`)
      if (!item.ok && width > 0) item.issues[0]!.columns = width > 1 ? [header[0]!, header[width - 1]!] : [header[0]!];
      this.out.push(item);
      return;
    }
    const data: Record<string, unknown> = {};
    for (let i = 0; i < width; i++) data[header[i]] = fields[i];
    this.out.push({ ok: true, data, origin: { source: this.cfg.name, file: this.cfg.path, line: start, record } });
  }

  /** A record (or the header row: fatal) holding bytes not valid in the file's encoding. */
  private encodingReject(span: CsvSpan, found: InvalidBytes[]): void {
    const advice = encodingAdvice(this.decoder, this.cfg.csv?.encoding, '`csv.encoding`');
    if (this.header === undefined) {
      throw sourceFatal(this.cfg, `cannot read the header row: ${invalidBytesMessage(found, advice)}`, { code: 'encoding-invalid', line: span.startLine });
    }
    const origin = { source: this.cfg.name, file: this.cfg.path, line: span.startLine, record: ++this.recordNo };
    this.out.push(rejectItem(origin, 'encoding-invalid', invalidBytesMessage(found, advice), this.spanText(span)));
  }

  /** Handles an error csv-parse reports for a record it drops; the reject waits until csv-parse is past the record. */
  onSkip(item: SkippedRecord): void {
    const err = item.error;
    // csv-parse's `bytes` when it reports an error: at or after the end of the previous record, before this one's end
    const pos = Number(err.bytes);
    const p = this.pending;
    if (p !== undefined && pos < p.span.end) {
      if (err.code === 'CSV_MAX_RECORD_SIZE') throw this.tooLong(p.span.startLine);
      if (err.code === 'CSV_QUOTE_NOT_CLOSED') p.unclosed = true; // another error in the same record
      return;
    }
    if (p !== undefined) this.resolvePending();
    const span = this.spanFrom(pos + 1, true);
    if (span === undefined) throw outOfStep(pos);
    this.spans.shift();
    this.nextLine = span.endLine + 1;
    if (err.code === 'CSV_MAX_RECORD_SIZE') throw this.tooLong(span.startLine);
    if (this.header === undefined) {
      throw sourceFatal(this.cfg, `cannot read the header row: ${describeCsvError(err, undefined)}`, {
        code: 'csv-syntax',
        line: span.startLine,
      });
    }
    this.pending = { record: ++this.recordNo, span, error: err, unclosed: err.code === 'CSV_QUOTE_NOT_CLOSED' };
  }

  /** At the end of the file: the reject of a last dropped record and the cuts after it, if any. */
  finish(): void {
    if (this.pending !== undefined) this.resolvePending();
    this.spanFrom(Infinity, true);
  }

  private resolvePending(): void {
    const p = this.pending!;
    this.pending = undefined;
    this.out.push(this.syntaxReject(p, this.spanText(p.span)));
    this.release(p.span.end);
  }

  private syntaxReject(p: PendingDrop, raw: string): SourceItem {
    const { startLine, endLine } = p.span;
    const errorLine = p.span.errorLine ?? startLine;
    let message = describeCsvError(p.error, this.header);
    if (p.error.code === 'CSV_QUOTE_NOT_CLOSED') {
      message += `: lines ${startLine}–${endLine} (to the end of the file) were read as one record`;
    } else {
      if (errorLine !== startLine) message += ` at line ${errorLine}`;
      if (p.unclosed) message += `; a quote is then never closed: lines ${startLine}–${endLine} (to the end of the file) were read as one record`;
      else if (endLine > startLine) message += `; the record spans lines ${startLine}–${endLine}`;
    }
    return rejectItem({ source: this.cfg.name, file: this.cfg.path, line: startLine, record: p.record }, 'csv-syntax', message, raw);
  }

  /** The reject of a record the guard cut (before the header row: fatal). */
  private cutReject(c: CsvCut): void {
    if (c === this.shownCut) return;
    this.shownCut = c;
    if (this.header === undefined) {
      throw sourceFatal(this.cfg, `cannot read the header row: ${this.cutReason(c)}`, {
        code: cutCode(c),
        line: c.startLine,
        hint: c.reason === 'size' ? CUT_SIZE_HINT : CUT_QUOTE_HINT,
      });
    }
    const lines = c.endLine > c.startLine ? `lines ${c.startLine}–${c.endLine}` : `line ${c.startLine}`;
    let message = `${this.cutReason(c)}: ${lines} rejected${c.atEnd ? '' : `, reading resumed at line ${c.endLine + 1}`}`;
    if (c.truncated) message += ` (raw: its first ${this.limits.rawExcerptBytes} bytes)`;
    this.out.push(rejectItem({ source: this.cfg.name, file: this.cfg.path, line: c.startLine, record: ++this.recordNo }, cutCode(c), message, c.raw));
  }

  /** What went wrong in a cut record (no field value: column names only, escaped). */
  private cutReason(c: CsvCut): string {
    const col = columnLabel(c.field, this.header);
    const opened = c.quoteLine !== undefined && c.quoteLine !== c.startLine ? `, opened on line ${c.quoteLine}` : '';
    switch (c.reason) {
      case 'unclosed':
        return `quoted field never closed (${col}${opened})`;
      case 'lines':
        return `quoted field not closed within ${this.limits.maxQuotedLines} line(s) (${col}${opened}; \`csv.maxQuotedLines\`)`;
      case 'quoted-size':
        return `quoted field not closed within ${this.limits.maxRecordBytes} bytes (${col}${opened})`;
      case 'stray':
        return `closing quote not followed by a delimiter or the end of the line (${col}${opened}), and the quoted field runs past the end of its line`;
      case 'runaway':
        return `quoted field not closed on its line (${col}${opened}): it runs on to line ${c.badLine}, where a quote is followed by other text`;
      case 'after-quote':
        return `unexpected character after a closing quote (${col})`;
      case 'size':
        return `record longer than ${this.limits.maxRecordBytes} bytes without a line break (${col}; no open quote: a huge unquoted field, or not CSV)`;
    }
  }

  private tooLong(startLine: number): Error {
    // The guard cuts longer records first; this is a safety net.
    return sourceFatal(this.cfg, `the record starting at line ${startLine} is longer than ${CSV_MAX_RECORD_CHARS} characters`, {
      code: 'csv-syntax',
      line: startLine,
      hint: CUT_SIZE_HINT,
    });
  }
}

const CUT_QUOTE_HINT =
  'Look for an unbalanced quote character on that line; set `csv.quote` if the export uses another quote character, or raise `csv.maxQuotedLines` if fields really span more lines.';
const CUT_SIZE_HINT = 'Check that the file is CSV with the expected line breaks and `csv.delimiter`.';

function cutCode(c: CsvCut): KnownIssueCode {
  return c.reason === 'size' ? 'value-too-large' : c.reason === 'after-quote' ? 'csv-syntax' : 'csv-quote';
}

/** Streams a CSV source (`path`: see `CsvParsePath`; `stream` only for tests, as their oracle). */
export async function* readCsv(
  cfg: SourceConfig,
  signal?: AbortSignal,
  bytes?: ByteMeter,
  path: CsvParsePath = 'spans',
): AsyncGenerator<SourceItem, void, undefined> {
  const options = parseOptions(cfg);
  const opened = await openSourceFile(cfg);
  const input = fileStream(opened, signal, bytes);
  let parser: Transform | undefined;
  let state: CsvReadState | undefined;
  try {
    const started = startParseOrFail(cfg, options, input, path);
    parser = started.parser;
    const st = (state = new CsvReadState(cfg, started.window, started.guard, options.limits, started.decoder));
    const out = st.out;
    for await (const item of parser as AsyncIterable<ParsedItem | ParsedItem[]>) {
      if (Array.isArray(item)) for (let i = 0; i < item.length; i++) st.onItem(item[i]);
      else st.onItem(item);
      for (let i = 0; i < out.length; i++) yield out[i];
      out.length = 0;
    }
    st.finish();
    for (const item of out) yield item;
    out.length = 0;
  } catch (err) {
    throw wrapReadError(cfg, err, { line: state?.nextLine, what: 'CSV read error' });
  } finally {
    parser?.destroy();
    input.destroy();
  }
}

/** The header names of a CSV source (or `csv.columns`), reading only the first record. */
export async function readCsvHeader(cfg: SourceConfig): Promise<string[]> {
  const columns = cfg.csv?.columns;
  const options = parseOptions(cfg);
  if (columns !== undefined) {
    checkColumnNames(cfg, columns, undefined);
    return [...columns];
  }
  const opened = await openSourceFile(cfg);
  const input = fileStream(opened, undefined);
  let parser: Transform | undefined;
  try {
    const started = startParseOrFail(cfg, options, input);
    parser = started.parser;
    const st = new CsvReadState(cfg, started.window, started.guard, options.limits, started.decoder);
    for await (const item of parser as AsyncIterable<ParsedItem | ParsedItem[]>) {
      for (const one of Array.isArray(item) ? item : [item]) {
        st.onItem(one); // a skip before the header: throws
        if (st.header !== undefined) return [...st.header];
      }
    }
    st.finish(); // a cut before any header row: throws
    return [];
  } catch (err) {
    throw wrapReadError(cfg, err, { what: 'CSV read error' });
  } finally {
    parser?.destroy();
    input.destroy();
  }
}
