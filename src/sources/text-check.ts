/**
 * A source must be text: a file of NUL bytes (a copy cut short and zero-filled, a binary file under a `.csv`
 * name) would otherwise parse as one empty header and no rows — "0 rows, exit 0" — and, with `onMissing`, look
 * like every patient gone. Checked on the first and last 64 KiB, before a run or `validate` goes on.
 */
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { notTextShape, resolveEncoding } from './decode-stream.js';
import { sourceFatal } from './source-errors.js';
import type { SourceConfig, SourceFormat } from './types.js';

/** How much of the start of a file is looked at. */
const TEXT_CHECK_BYTES = 64 * 1024;

/**
 * Why the file is not a text export (NUL bytes at its start or end: `notTextShape`), or undefined — also when it
 * cannot be read (the readers report that in their own words) and for a FIFO. Synchronous, for `validate`'s checks.
 */
export function notTextReason(cfg: SourceConfig, format: SourceFormat): string | undefined {
  let head: Buffer;
  let tail: Buffer;
  let size: number;
  try {
    const st = statSync(cfg.path);
    if (!st.isFile()) return undefined; // a FIFO: opening it would wait for a writer, reading consume it
    size = st.size;
    const fd = openSync(cfg.path, 'r');
    try {
      const buf = Buffer.alloc(TEXT_CHECK_BYTES);
      head = Buffer.from(buf.subarray(0, readSync(fd, buf, 0, buf.length, 0)));
      const from = Math.max(0, size - TEXT_CHECK_BYTES);
      tail = from === 0 ? head : buf.subarray(0, readSync(fd, buf, 0, buf.length, from));
    } finally {
      closeSync(fd);
    }
  } catch {
    return undefined;
  }
  // JSON and NDJSON are read as UTF-8 (or UTF-16 with a byte-order mark); CSV as `csv.encoding` says
  const declared = (format === 'csv' ? resolveEncoding(cfg.csv?.encoding) : undefined) ?? resolveEncoding(undefined)!;
  const what = notTextShape(head, tail, size, declared);
  return what === undefined ? undefined : `not a text file: ${what} (a ${format.toUpperCase()} export holds none)`;
}

/** What to do about it, for the hint. */
export function notTextHint(format: SourceFormat): string {
  const utf16 = format === 'csv' ? ' A UTF-16 export without a byte-order mark needs `csv.encoding: utf-16le` (or `utf-16be`).' : '';
  return `The file is binary or damaged (e.g. zero-filled by an interrupted copy): export it again.${utf16}`;
}

/** Throws the fatal error (exit 2, naming the file) when the source is not text. */
export function checkText(cfg: SourceConfig, format: SourceFormat): void {
  const reason = notTextReason(cfg, format);
  if (reason !== undefined) throw sourceFatal(cfg, reason, { code: 'source-not-text', hint: notTextHint(format) });
}
