/**
 * The lines of a CSV or NDJSON source file, counted before its rows are all read: how many rows a phase has left,
 * to the row (issue 28: a phase's verification listing starts so as to end with its creates). The byte count the
 * reader keeps moves by 64 KiB reads and runs ahead of the rows by the parsers' buffers — thousands of rows of a
 * small file. Lines are at least the records (a header, blank lines and quoted line breaks add some): an estimate
 * that errs high. A JSON document (records are not lines), a FIFO (reading would consume it) or a file above
 * `maxBytes`: undefined.
 */
import { open, stat } from 'node:fs/promises';
import { resolveFormat } from './open-source.js';
import type { SourceConfig } from './types.js';

/** Larger files are left to the byte count, whose 64 KiB steps are a negligible share of them. */
const LINE_COUNT_MAX_BYTES = 16 * 1024 * 1024;

const LF = 0x0a;
const CR = 0x0d;

export async function countSourceLines(cfg: SourceConfig, maxBytes = LINE_COUNT_MAX_BYTES): Promise<number | undefined> {
  if (resolveFormat(cfg) === 'json') return undefined;
  const st = await stat(cfg.path);
  if (!st.isFile() || st.size > maxBytes) return undefined;
  const fh = await open(cfg.path, 'r');
  try {
    const buf = Buffer.allocUnsafe(1 << 20);
    // Line breaks: LF, CRLF, and a lone CR (the CSV reader accepts CR-only files) — LFs and CRs, less the CRLFs.
    let lines = 0;
    let last = LF;
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      const chunk = bytesRead === buf.length ? buf : buf.subarray(0, bytesRead);
      if (last === CR && chunk[0] === LF) lines--; // a CRLF across two reads
      for (let i = chunk.indexOf(LF); i !== -1; i = chunk.indexOf(LF, i + 1)) lines++;
      for (let i = chunk.indexOf(CR); i !== -1; i = chunk.indexOf(CR, i + 1)) if (chunk[i + 1] !== LF) lines++;
      last = chunk[bytesRead - 1]!;
    }
    return last === LF || last === CR ? lines : lines + 1;
  } finally {
    await fh.close();
  }
}
