import { isUtf8 } from 'node:buffer';
import { isWellFormed } from '../core/well-formed.js';
import { Transform, type TransformCallback } from 'node:stream';
import { requiredWhenUsed } from '../core/lazy-require.js';

/** iconv-lite: loaded by the first source declaring a code page. */
const iconv = requiredWhenUsed<typeof import('iconv-lite')>('iconv-lite');

/**
 * Text decoding upstream of the parsers: UTF-8 passes through (checked), code pages and UTF-16 are re-encoded;
 * invalid bytes become U+FFFD plus an `InvalidBytes` entry the readers turn into a reject or a fatal error.
 * Design: docs/design/text-decoding.md.
 */

/** `csv.encoding` values (schemas/mapping.schema.json lists the same); matched case-insensitively. */
export const ACCEPTED_ENCODINGS = [
  'utf-8',
  'utf8',
  'utf-16',
  'utf-16le',
  'utf-16be',
  'windows-1252',
  'cp1252',
  'latin1',
  'iso-8859-1',
  'iso-8859-2',
  'iso-8859-3',
  'iso-8859-4',
  'iso-8859-5',
  'iso-8859-6',
  'iso-8859-7',
  'iso-8859-8',
  'iso-8859-9',
  'iso-8859-10',
  'iso-8859-11',
  'iso-8859-13',
  'iso-8859-14',
  'iso-8859-15',
] as const;

type EncodingKind = 'utf8' | 'utf16le' | 'utf16be' | 'utf16' | 'sbcs';

export interface TextEncoding {
  kind: EncodingKind;
  /** Name for messages: `UTF-8`, `Windows-1252`, `ISO-8859-15`, … */
  label: string;
  /** iconv-lite name of a single-byte code page. */
  codepage?: string;
}

const UTF8: TextEncoding = { kind: 'utf8', label: 'UTF-8' };
const UTF16LE: TextEncoding = { kind: 'utf16le', label: 'UTF-16LE' };
const UTF16BE: TextEncoding = { kind: 'utf16be', label: 'UTF-16BE' };

/** The encoding a `csv.encoding` value names (default UTF-8), or undefined for a name not in ACCEPTED_ENCODINGS. */
export function resolveEncoding(name: string | undefined): TextEncoding | undefined {
  if (name === undefined) return UTF8;
  const n = typeof name === 'string' ? name.toLowerCase() : '';
  if (!(ACCEPTED_ENCODINGS as readonly string[]).includes(n)) return undefined;
  switch (n) {
    case 'utf-8':
    case 'utf8':
      return UTF8;
    case 'utf-16':
      return { kind: 'utf16', label: 'UTF-16' };
    case 'utf-16le':
      return UTF16LE;
    case 'utf-16be':
      return UTF16BE;
    case 'windows-1252':
    case 'cp1252':
      return { kind: 'sbcs', label: 'Windows-1252', codepage: 'windows-1252' };
    case 'latin1':
      return { kind: 'sbcs', label: 'ISO-8859-1', codepage: 'iso-8859-1' };
    default:
      return { kind: 'sbcs', label: n.toUpperCase(), codepage: n };
  }
}

/** Bytes of the file not valid in its encoding. */
export interface InvalidBytes {
  /** 0-based byte offset in the file. */
  offset: number;
  /** 1-based line. */
  line: number;
  /** The offending bytes (one malformed sequence, one code unit, one byte). */
  bytes: Buffer;
  /** Why, after "… at offset N (line L): ", e.g. `not defined in Windows-1252`. */
  reason: string;
}

/** `byte 0x81 at offset 12 (line 3): not defined in Windows-1252` — the bytes in hex, never the text around them. */
function describeInvalid(inv: InvalidBytes): string {
  const hex = [...inv.bytes].map((b) => `0x${b.toString(16).toUpperCase().padStart(2, '0')}`).join(' ');
  return `${inv.bytes.length === 1 ? 'byte' : 'bytes'} ${hex} at offset ${inv.offset} (line ${inv.line}): ${inv.reason}`;
}

/** Removes the entries up to line `end` from the front of `invalid` and returns those on lines `start`–`end`. */
export function takeInvalid(invalid: InvalidBytes[], start: number, end: number): InvalidBytes[] {
  let n = 0;
  while (n < invalid.length && invalid[n].line <= end) n++;
  return invalid.splice(0, n).filter((i) => i.line >= start);
}

const LF = 10;
const CR = 13;
const EMPTY = Buffer.alloc(0);
const REPLACEMENT = Buffer.from('\ufffd', 'utf8');
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** Line breaks in b[from, to) — LF, CRLF once, a lone CR; `afterCR`: the byte before `from` was a CR. */
function countLineBreaks(b: Buffer, from: number, to: number, afterCR: boolean): number {
  const s = b.subarray(from, to); // no copy; bounds the searches
  const end = s.length;
  let n = 0;
  for (let i = s.indexOf(LF); i !== -1; i = s.indexOf(LF, i + 1)) n++;
  for (let i = s.indexOf(CR); i !== -1; i = s.indexOf(CR, i + 1)) if (i + 1 >= end || s[i + 1] !== LF) n++;
  if (afterCR && end > 0 && s[0] === LF) n--;
  return n;
}

/**
 * The line of positions of one buffer, asked in increasing order: each byte is scanned once, however many
 * invalid bytes a chunk holds (a Windows-1252 export read as UTF-8 has one on most lines).
 */
class LineCursor {
  private pos = 0;
  private line: number;

  /** `line`: the line of b[0]; `afterCR`: the byte before b[0] was a CR. */
  constructor(
    private readonly b: Buffer,
    line: number,
    private readonly afterCR: boolean,
  ) {
    this.line = line;
  }

  lineAt(p: number): number {
    this.line += countLineBreaks(this.b, this.pos, p, this.pos === 0 ? this.afterCR : this.b[this.pos - 1] === CR);
    this.pos = p;
    return this.line;
  }
}

/**
 * The UTF-8 sequence at b[p]: its length when valid; 0 when it is a valid beginning cut by `to`; else minus the
 * length of the malformed part (Unicode's "maximal subpart": what a decoder replaces with one U+FFFD).
 */
function utf8SequenceAt(b: Buffer, p: number, to: number): number {
  const c = b[p];
  if (c < 0x80) return 1;
  let need: number;
  let lo = 0x80;
  let hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) need = 1;
  else if (c === 0xe0) [need, lo] = [2, 0xa0];
  else if (c === 0xed)
    [need, hi] = [2, 0x9f]; // no surrogates
  else if (c >= 0xe1 && c <= 0xef) need = 2;
  else if (c === 0xf0) [need, lo] = [3, 0x90];
  else if (c === 0xf4)
    [need, hi] = [3, 0x8f]; // ≤ U+10FFFF
  else if (c >= 0xf1 && c <= 0xf3) need = 3;
  else return -1;
  for (let k = 1; k <= need; k++) {
    if (p + k >= to) return 0;
    const x = b[p + k];
    if (x < lo || x > hi) return -k;
    lo = 0x80;
    hi = 0xbf;
  }
  return need + 1;
}

/** A Transform from the file's bytes to UTF-8 bytes; see the comment at the top of this file. */
export class DecodeToUtf8 extends Transform {
  /** Invalid bytes found so far, in file order; the reader takes them from the front. */
  readonly invalid: InvalidBytes[] = [];
  /** The encoding in use, once the first bytes were read (a byte-order mark overrides the declared one). */
  effective: TextEncoding | undefined;
  /** Whether a byte-order mark overrode the declared encoding (for the advice in messages). */
  bom = false;
  private head: Buffer | undefined;
  /** File offset of the first byte of the next chunk. */
  private offset = 0;
  /** Line breaks passed on so far, and whether the last byte passed on was a CR. */
  private lines = 0;
  private afterCR = false;
  /** Bytes of the last chunk still to be decoded or checked with the next one (< 4). */
  private carry: Buffer = EMPTY;
  private readonly sbcs: { write(b: Buffer): string } | undefined;

  constructor(private readonly declared: TextEncoding) {
    super();
    if (declared.kind === 'sbcs') this.sbcs = iconv().getDecoder(declared.codepage!);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, callback: TransformCallback): void {
    if (this.effective === undefined) {
      const b = this.head === undefined ? chunk : Buffer.concat([this.head, chunk]);
      // three bytes tell a UTF-8 byte-order mark
      if (b.length < 3) {
        this.head = b;
        callback();
        return;
      }
      this.head = undefined;
      chunk = this.begin(b);
    }
    this.decode(chunk);
    callback();
  }

  override _flush(callback: TransformCallback): void {
    if (this.effective === undefined) {
      const rest = this.begin(this.head ?? EMPTY);
      this.head = undefined;
      this.decode(rest);
    }
    this.finishText();
    callback();
  }

  private begin(b: Buffer): Buffer {
    const mark = byteOrderMark(b);
    const declared = this.declared;
    this.effective = mark ?? (declared.kind === 'utf16' ? guessUtf16(b) : declared);
    // a mark that contradicts the declared encoding (`utf-16` declares either byte order)
    this.bom = mark !== undefined && mark.kind !== declared.kind && !(declared.kind === 'utf16' && mark !== UTF8);
    // the UTF-8 mark stays (the parsers drop it as before), a UTF-16 one goes
    const skip = mark === UTF16LE || mark === UTF16BE ? 2 : 0;
    this.offset = skip;
    return b.subarray(skip);
  }

  private decode(chunk: Buffer): void {
    switch (this.effective!.kind) {
      case 'utf8':
        this.checkUtf8(chunk);
        return;
      case 'sbcs': {
        const text = this.sbcs!.write(chunk);
        this.emit8(text, this.offset, 1, chunk);
        this.offset += chunk.length;
        return;
      }
      default:
        this.decodeUtf16(chunk);
    }
  }

  private finishText(): void {
    const kind = this.effective!.kind;
    if (kind === 'utf8' && this.carry.length > 0) {
      this.mark(this.offset - this.carry.length, this.lines + 1, this.carry, 'the file ends inside a UTF-8 character');
      this.carry = EMPTY;
    } else if (kind === 'utf16le' || kind === 'utf16be') {
      const c = this.carry;
      this.carry = EMPTY;
      const even = c.length & ~1;
      if (even > 0) this.emitUtf16(c.subarray(0, even), this.offset - c.length);
      if (c.length > even) {
        this.mark(this.offset - 1, this.lines + 1, c.subarray(even), `an odd last byte (${this.effective!.label} text has an even number of bytes)`);
        this.push(REPLACEMENT);
      }
    }
  }

  /** UTF-8: the chunk passes on unchanged; only a malformed one is looked at byte by byte. */
  private checkUtf8(chunk: Buffer): void {
    const n = chunk.length;
    let from = 0;
    if (this.carry.length > 0) {
      const carried = this.carry.length;
      const joined = Buffer.concat([this.carry, chunk.subarray(0, 3)]);
      const r = utf8SequenceAt(joined, 0, joined.length);
      if (r === 0) {
        this.carry = joined; // still cut: the chunk was tiny
        from = n;
      } else {
        if (r < 0) this.mark(this.offset - carried, this.lines + 1, joined.subarray(0, -r), 'not valid UTF-8');
        from = Math.max(0, Math.abs(r) - carried);
        this.carry = EMPTY;
      }
    }
    let to = n;
    if (from < n && chunk[n - 1] >= 0x80) {
      // a character cut by the end of the chunk is checked with the next chunk
      for (let q = n - 1; q >= Math.max(from, n - 3); q--) {
        if ((chunk[q] & 0xc0) !== 0x80) {
          if (utf8SequenceAt(chunk, q, n) === 0) {
            to = q;
            this.carry = Buffer.from(chunk.subarray(q));
          }
          break;
        }
      }
    }
    if (from < to && !isUtf8(chunk.subarray(from, to))) {
      const cursor = new LineCursor(chunk, this.lines + 1, this.afterCR);
      for (let p = from; p < to;) {
        const r = utf8SequenceAt(chunk, p, to);
        if (r > 0) {
          p += r;
          continue;
        }
        const len = r === 0 ? to - p : -r;
        this.mark(this.offset + p, cursor.lineAt(p), chunk.subarray(p, p + len), 'not valid UTF-8');
        p += len;
      }
    }
    this.pass(chunk);
    this.offset += n;
  }

  private decodeUtf16(chunk: Buffer): void {
    const b = this.carry.length === 0 ? chunk : Buffer.concat([this.carry, chunk]);
    const base = this.offset - this.carry.length;
    let even = b.length & ~1;
    // a high surrogate at the end waits for its pair
    if (even >= 2) {
      const last = this.effective!.kind === 'utf16le' ? b.readUInt16LE(even - 2) : b.readUInt16BE(even - 2);
      if (last >= 0xd800 && last <= 0xdbff) even -= 2;
    }
    this.carry = Buffer.from(b.subarray(even));
    this.offset += chunk.length;
    if (even > 0) this.emitUtf16(b.subarray(0, even), base);
  }

  private emitUtf16(b: Buffer, base: number): void {
    const le = this.effective!.kind === 'utf16le' ? b : Buffer.from(b).swap16();
    this.emit8(le.toString('utf16le'), base, 2, b);
  }

  /**
   * Passes `text` on as UTF-8 and marks what it holds that was not valid: U+FFFD from a code page's undefined
   * byte (single-byte: the decoder's only source of U+FFFD), a lone surrogate (UTF-16). `unit`: bytes per UTF-16
   * code unit of `text` in the file (1: single-byte, 2: UTF-16); `src`: those bytes.
   */
  private emit8(text: string, base: number, unit: 1 | 2, src: Buffer): void {
    const out = Buffer.from(text, 'utf8');
    const bad = unit === 1 ? text.indexOf('\ufffd') !== -1 : !isWellFormed(text);
    if (bad) {
      const re = unit === 1 ? /\ufffd/g : LONE_SURROGATE;
      re.lastIndex = 0;
      const reason = unit === 1 ? `not defined in ${this.effective!.label}` : `a lone ${this.effective!.label} surrogate (half of a character)`;
      const cursor = new LineCursor(out, this.lines + 1, this.afterCR);
      let index = 0; // of `text`, at byte `at` of `out`
      let at = 0;
      for (let m = re.exec(text); m !== null; m = re.exec(text)) {
        at += Buffer.byteLength(text.slice(index, m.index), 'utf8');
        index = m.index;
        this.mark(base + m.index * unit, cursor.lineAt(at), src.subarray(m.index * unit, (m.index + 1) * unit), reason);
      }
    }
    this.pass(out);
  }

  private pass(b: Buffer): void {
    if (b.length === 0) return;
    this.lines += countLineBreaks(b, 0, b.length, this.afterCR);
    this.afterCR = b[b.length - 1] === CR;
    this.push(b);
  }

  private mark(offset: number, line: number, bytes: Buffer, reason: string): void {
    this.invalid.push({ offset, line, bytes: Buffer.from(bytes), reason });
  }
}

/** UTF-16 without a byte-order mark: big-endian when the first characters have their zero byte first. */
/** The encoding a byte-order mark at the start of `b` names, if any. */
function byteOrderMark(b: Buffer): TextEncoding | undefined {
  if (b.length >= 3 && b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf) return UTF8;
  if (b.length >= 2 && b[0] === 0xff && b[1] === 0xfe) return UTF16LE;
  if (b.length >= 2 && b[0] === 0xfe && b[1] === 0xff) return UTF16BE;
  return undefined;
}

/**
 * Why the start and end of a file read as `declared` are not text, or undefined. A stray NUL inside a cell is
 * data (the readers keep it, as they keep any control character); what is refused is what no export looks like:
 * a file that starts with NUL bytes or ends in a long run of them (a copy cut short and zero-filled), and — with
 * neither a byte-order mark nor a UTF-16 `csv.encoding` — the alternating zero bytes of UTF-16.
 */
export function notTextShape(head: Buffer, tail: Buffer, size: number, declared: TextEncoding): string | undefined {
  const mark = byteOrderMark(head);
  const body = head.subarray(mark === UTF8 ? 3 : mark ? 2 : 0);
  const lead = body.subarray(0, LEADING_NUL_BYTES);
  if (lead.length > 0 && isZero(lead))
    return isZero(body) && body.length === size - (head.length - body.length)
      ? `all its ${body.length} bytes are NUL bytes`
      : `it starts with ${zeroRunAt(body, 0)} NUL bytes`;
  const trailing = trailingZeros(tail);
  if (trailing >= TRAILING_NUL_BYTES || (trailing > 0 && trailing === tail.length && tail.length === size))
    return `it ends in ${trailing} NUL bytes (zero-filled)`;
  const kind = (mark ?? declared).kind;
  if (!kind.startsWith('utf16') && looksUtf16(body)) return 'every other byte is a NUL byte: UTF-16 without a byte-order mark';
  return undefined;
}

/** A file whose first bytes are all NUL is no export; 512 keeps a NUL-filled cell from ever tripping it. */
const LEADING_NUL_BYTES = 512;
/** A zero-filled tail: a cell of 4 KiB of NUL bytes at the very end of a file is not a plausible export either. */
const TRAILING_NUL_BYTES = 4096;

const isZero = (b: Buffer): boolean => b.every((x) => x === 0);

function zeroRunAt(b: Buffer, from: number): number {
  let i = from;
  while (i < b.length && b[i] === 0) i++;
  return i - from;
}

function trailingZeros(b: Buffer): number {
  let i = b.length;
  while (i > 0 && b[i - 1] === 0) i--;
  return b.length - i;
}

/** ASCII in UTF-16: a zero byte in (nearly) every even or every odd position of the first characters. */
function looksUtf16(b: Buffer): boolean {
  const pairs = Math.floor(Math.min(b.length, 256) / 2);
  if (pairs < 4) return false;
  let even = 0;
  let odd = 0;
  for (let i = 0; i < pairs * 2; i += 2) {
    if (b[i] === 0 && b[i + 1] !== 0) even++;
    if (b[i + 1] === 0 && b[i] !== 0) odd++;
  }
  return Math.max(even, odd) >= pairs * 0.9;
}

function guessUtf16(b: Buffer): TextEncoding {
  let evenZeros = 0;
  let oddZeros = 0;
  for (let i = 0; i + 1 < Math.min(b.length, 256); i += 2) {
    if (b[i] === 0) evenZeros++;
    if (b[i + 1] === 0) oddZeros++;
  }
  return evenZeros > oddZeros ? UTF16BE : UTF16LE;
}

/**
 * What to do about invalid bytes, for a message: `option` names the setting that chooses the encoding
 * (`` `csv.encoding` ``), undefined for formats read as UTF-8 only; `declared` is its value, if set.
 */
export function encodingAdvice(dec: DecodeToUtf8, declared: string | undefined, option: string | undefined): string {
  const label = dec.effective?.label ?? 'UTF-8';
  if (dec.bom) {
    return `the file starts with a ${label} byte-order mark${declared !== undefined ? `, which decides over ${option} \`${declared}\`` : ''}: it is damaged, or not ${label} throughout`;
  }
  if (option === undefined) return `this format is read as UTF-8 (or UTF-16 with a byte-order mark): convert the file to UTF-8`;
  if (declared === undefined) return `UTF-8 is the default: if the export was written in another encoding, set ${option} (e.g. \`windows-1252\`)`;
  const example = label === 'UTF-8' ? ' (e.g. `windows-1252`)' : label.startsWith('UTF-16') ? '' : ' (e.g. `utf-8`)';
  return `the file is damaged or not ${label} throughout: set ${option} to the encoding the export was written in${example}`;
}

/** One message for the invalid bytes of one record: the first named, the others counted, then `advice`. */
export function invalidBytesMessage(found: readonly InvalidBytes[], advice: string): string {
  const more = found.length > 1 ? ` (and ${found.length - 1} more in this record)` : '';
  return `${describeInvalid(found[0])}${more}; ${advice}`;
}
