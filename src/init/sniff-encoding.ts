/**
 * Whether a CSV export is UTF-8, checked by the decoder the CSV reader uses (src/sources/decode-stream.ts), so
 * `init` proposes `csv.encoding` exactly when a run would reject rows as `encoding-invalid`. Only the first
 * ENCODING_SCAN_BYTES are read: an export that is not UTF-8 shows it on most lines with an accented letter.
 */
import { createReadStream } from 'node:fs';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { DecodeToUtf8, resolveEncoding, type InvalidBytes } from '../sources/decode-stream.js';

const ENCODING_SCAN_BYTES = 1024 * 1024;
/** The code page proposed for an export that is not UTF-8: Latin-1 as Windows writes it (ISO-8859-1 text reads the same). */
const PROPOSED_ENCODING = 'windows-1252';

export interface NotUtf8 {
  /** The first byte not valid in UTF-8 (its value only, never the text around it) and its 1-based line. */
  byte: number;
  line: number;
  /** PROPOSED_ENCODING when every scanned byte is defined in it; else the encoding is the author's choice. */
  proposed?: typeof PROPOSED_ENCODING;
}

/** Invalid bytes of the first ENCODING_SCAN_BYTES of `path` read in `encoding`; a character cut by the scan's end is not one. */
async function invalidBytes(path: string, encoding: string | undefined): Promise<InvalidBytes[]> {
  const decoder = new DecodeToUtf8(resolveEncoding(encoding)!);
  const sink = new Writable({ write: (_chunk, _enc, done) => done() });
  let size = 0;
  const input = createReadStream(path, { end: ENCODING_SCAN_BYTES - 1 }).on('data', (c) => (size += c.length));
  await pipeline(input, decoder, sink);
  const cut = size >= ENCODING_SCAN_BYTES ? size - 4 : Infinity;
  return decoder.invalid.filter((i) => i.offset < cut);
}

/** Undefined for a UTF-8 export (or one with a byte-order mark); else where it is not UTF-8 and what to read it as. */
export async function sniffNotUtf8(path: string): Promise<NotUtf8 | undefined> {
  const first = (await invalidBytes(path, undefined))[0];
  if (!first) return undefined;
  const fits = (await invalidBytes(path, PROPOSED_ENCODING)).length === 0;
  return { byte: first.bytes[0]!, line: first.line, ...(fits ? { proposed: PROPOSED_ENCODING } : {}) };
}
