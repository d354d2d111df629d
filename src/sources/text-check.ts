/**
 * A source must be text: a file of NUL bytes (a copy cut short and zero-filled, a binary file under a `.csv`
 * name) would otherwise parse as one empty header and no rows — "0 rows, exit 0" — and, with `onMissing`, look
 * like every patient gone. Checked on the first bytes only, before a run or `validate` goes on.
 */
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { firstNulCharacter, resolveEncoding } from './decode-stream.js';
import { sourceFatal } from './source-errors.js';
import type { SourceConfig, SourceFormat } from './types.js';

/** How much of the start of a file is looked at. */
const TEXT_CHECK_BYTES = 64 * 1024;

/**
 * Why the file is not a text export (a NUL in its first TEXT_CHECK_BYTES), or undefined — also when it cannot be
 * read (the readers report that in their own words) and for a FIFO. Synchronous, for `validate`'s source checks.
 */
export function notTextReason(cfg: SourceConfig, format: SourceFormat): string | undefined {
  let head: Buffer;
  try {
    if (!statSync(cfg.path).isFile()) return undefined; // a FIFO: opening it would wait for a writer, reading consume it
    const fd = openSync(cfg.path, 'r');
    try {
      const buf = Buffer.alloc(TEXT_CHECK_BYTES);
      head = buf.subarray(0, readSync(fd, buf, 0, buf.length, 0));
    } finally {
      closeSync(fd);
    }
  } catch {
    return undefined;
  }
  // JSON and NDJSON are read as UTF-8 (or UTF-16 with a byte-order mark); CSV as `csv.encoding` says
  const declared = (format === 'csv' ? resolveEncoding(cfg.csv?.encoding) : undefined) ?? resolveEncoding(undefined)!;
  const at = firstNulCharacter(head, declared);
  if (at < 0) return undefined;
  const all = head.length > 0 && head.every((b) => b === 0);
  const what = all ? `${head.length < TEXT_CHECK_BYTES ? `all its ${head.length} bytes are` : 'its first 64 KiB are all'} NUL bytes` : `a NUL character at byte ${at}`;
  return `not a text file: ${what} (a ${format.toUpperCase()} export holds none)`;
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
