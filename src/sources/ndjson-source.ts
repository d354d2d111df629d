import { pipeline, Transform, type TransformCallback } from 'node:stream';
import { DecodeToUtf8, encodingAdvice, invalidBytesMessage, resolveEncoding, takeInvalid } from './decode-stream.js';
import { recordBoundsViolation } from './record-bounds.js';
import { rejectItem, wrapReadError } from './source-errors.js';
import { fileStream, openSourceFile } from './source-file.js';
import { CSV_RAW_EXCERPT_BYTES, NDJSON_MAX_LINE_BYTES, type ByteMeter, type SourceConfig, type SourceItem } from './types.js';

const LF = 10;
const CR = 13;

/** A line longer than the limit: only its first bytes were kept. */
class LongLine {
  constructor(
    readonly excerpt: string,
    readonly excerptBytes: number,
  ) {}
}

type Line = string | LongLine;

/**
 * Splits UTF-8 bytes into lines like `node:readline` with `crlfDelay: Infinity` (LF, CRLF — also across
 * chunks — and a lone CR end a line; a last line without a break counts), pushing one array of lines per chunk.
 * A line growing past `max` bytes is not kept: the rest of it is discarded up to its line break and it comes
 * out as a `LongLine` with an excerpt, so one over-long line costs memory `max`, not its size.
 */
class LineSplitter extends Transform {
  private parts: Buffer[] = [];
  private size = 0;
  private long: Buffer[] | undefined;
  private longSize = 0;
  private pendingCR = false;

  constructor(
    private readonly max: number,
    private readonly excerptMax: number,
  ) {
    super({ readableObjectMode: true });
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, callback: TransformCallback): void {
    const out: Line[] = [];
    const n = chunk.length;
    let i = 0;
    if (this.pendingCR) {
      this.pendingCR = false;
      if (n > 0 && chunk[0] === LF) i = 1;
    }
    let lf = -2;
    let cr = -2;
    while (i < n) {
      if (lf !== -1 && lf < i) lf = chunk.indexOf(LF, i);
      if (cr !== -1 && cr < i) cr = chunk.indexOf(CR, i);
      const j = lf === -1 ? cr : cr === -1 ? lf : Math.min(lf, cr);
      if (j === -1) {
        this.add(chunk.subarray(i));
        break;
      }
      this.add(chunk.subarray(i, j));
      out.push(this.takeLine());
      if (chunk[j] === CR) {
        if (j + 1 < n) i = chunk[j + 1] === LF ? j + 2 : j + 1;
        else {
          this.pendingCR = true;
          i = n;
        }
      } else i = j + 1;
    }
    if (out.length > 0) this.push(out);
    callback();
  }

  override _flush(callback: TransformCallback): void {
    if (this.size > 0 || this.long !== undefined) this.push([this.takeLine()]);
    callback();
  }

  private add(part: Buffer): void {
    if (part.length === 0) return;
    if (this.long === undefined && this.size + part.length <= this.max) {
      this.parts.push(part);
      this.size += part.length;
      return;
    }
    if (this.long === undefined) {
      // the line is too long: keep an excerpt from what it held so far
      this.long = [];
      this.longSize = 0;
      for (const p of this.parts) this.keepExcerpt(p);
      this.parts = [];
      this.size = 0;
    }
    this.keepExcerpt(part);
  }

  private keepExcerpt(part: Buffer): void {
    const room = this.excerptMax - this.longSize;
    if (room <= 0) return;
    const piece = Buffer.from(part.subarray(0, room));
    this.long!.push(piece);
    this.longSize += piece.length;
  }

  private takeLine(): Line {
    if (this.long !== undefined) {
      const line = new LongLine(Buffer.concat(this.long).toString('utf8'), this.longSize);
      this.long = undefined;
      this.longSize = 0;
      return line;
    }
    const parts = this.parts;
    const text = parts.length === 0 ? '' : parts.length === 1 ? parts[0]!.toString('utf8') : Buffer.concat(parts, this.size).toString('utf8');
    this.parts = [];
    this.size = 0;
    return text;
  }
}

/**
 * JSON.parse messages can quote the input (`Unexpected token 'a', "abc…" is not valid JSON`): keep
 * V8's fixed reason phrase and the position only.
 */
function jsonSyntaxMessage(err: unknown): string {
  const text = err instanceof Error ? err.message : '';
  const m = /^([A-Za-z -]+?) in JSON at position (\d+)/.exec(text);
  if (m) return `invalid JSON: ${m[1].charAt(0).toLowerCase()}${m[1].slice(1)} at column ${Number(m[2]) + 1}`;
  if (text.startsWith('Unexpected end of JSON input')) return 'invalid JSON: unexpected end of line';
  return 'invalid JSON';
}

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

function isBlank(line: string): boolean {
  for (let i = 0; i < line.length; i++) {
    const c = line.charCodeAt(i);
    if (c !== 32 && c !== 9 && c !== 13 && c !== 0xfeff) return false;
  }
  return true;
}

/**
 * Streams an NDJSON / JSON Lines source: one JSON object per line; blank lines are skipped. A line that is not
 * a JSON object, that breaks the record bounds (nesting, items, text length: record-bounds.ts), that is longer
 * than NDJSON_MAX_LINE_BYTES or that holds bytes that are not valid UTF-8 is a reject with its line number;
 * reading goes on. The file is UTF-8, or UTF-16 with a byte-order mark (decode-stream.ts).
 */
export async function* readNdjson(cfg: SourceConfig, signal?: AbortSignal, bytes?: ByteMeter): AsyncGenerator<SourceItem, void, undefined> {
  const opened = await openSourceFile(cfg);
  const input = fileStream(opened, signal, bytes);
  const decoder = new DecodeToUtf8(resolveEncoding(undefined)!);
  const invalid = decoder.invalid;
  const lines = new LineSplitter(NDJSON_MAX_LINE_BYTES, CSV_RAW_EXCERPT_BYTES);
  pipeline(input, decoder, lines, () => undefined);
  const source = cfg.name;
  const file = cfg.path;
  let lineNo = 0;
  let recordNo = 0;
  try {
    for await (const batch of lines as AsyncIterable<Line[]>) {
      for (const line of batch) {
        lineNo++;
        const bad = invalid.length > 0 && invalid[0].line <= lineNo ? takeInvalid(invalid, lineNo, lineNo) : undefined;
        if (bad !== undefined && bad.length > 0 && !(line instanceof LongLine)) {
          const message = invalidBytesMessage(bad, encodingAdvice(decoder, undefined, undefined));
          yield rejectItem({ source, file, line: lineNo, record: ++recordNo }, 'encoding-invalid', message, line);
          continue;
        }
        if (line instanceof LongLine) {
          yield rejectItem(
            { source, file, line: lineNo, record: ++recordNo },
            'value-too-large',
            `line longer than ${NDJSON_MAX_LINE_BYTES} bytes — is this really NDJSON (one JSON object per line)? (raw: its first ${line.excerptBytes} bytes)`,
            line.excerpt,
          );
          continue;
        }
        const text = lineNo === 1 && line.charCodeAt(0) === 0xfeff ? line.slice(1) : line;
        // Fast path: a record line starts with `{`.
        if (text.charCodeAt(0) !== 123 && isBlank(text)) continue;
        const record = ++recordNo;
        let value: unknown;
        try {
          value = JSON.parse(text);
        } catch (err) {
          yield rejectItem({ source, file, line: lineNo, record }, 'json-syntax', jsonSyntaxMessage(err), text);
          continue;
        }
        if (value === null || typeof value !== 'object' || Array.isArray(value)) {
          yield rejectItem({ source, file, line: lineNo, record }, 'not-object', `expected a JSON object, got ${kindOf(value)}`, text);
          continue;
        }
        const outOfBounds = recordBoundsViolation(value);
        if (outOfBounds !== undefined) {
          yield rejectItem({ source, file, line: lineNo, record }, 'value-too-large', `record too large: ${outOfBounds}`, text);
          continue;
        }
        yield { ok: true, data: value as Record<string, unknown>, origin: { source, file, line: lineNo, record } };
      }
    }
  } catch (err) {
    throw wrapReadError(cfg, err, { line: lineNo + 1, what: 'NDJSON read error' });
  } finally {
    lines.destroy();
    input.destroy();
  }
}
