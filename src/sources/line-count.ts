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

/** Larger files are left to the byte count, whose 64 KiB steps are a small share of them. */
const LINE_COUNT_MAX_BYTES = 256 * 1024 * 1024;

export async function countSourceLines(cfg: SourceConfig, maxBytes = LINE_COUNT_MAX_BYTES): Promise<number | undefined> {
  if (resolveFormat(cfg) === 'json') return undefined;
  const st = await stat(cfg.path);
  if (!st.isFile() || st.size > maxBytes) return undefined;
  const fh = await open(cfg.path, 'r');
  try {
    const buf = Buffer.allocUnsafe(1 << 20);
    let lines = 0;
    let last = 0x0a;
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      const chunk = bytesRead === buf.length ? buf : buf.subarray(0, bytesRead);
      for (let i = chunk.indexOf(0x0a); i !== -1; i = chunk.indexOf(0x0a, i + 1)) lines++;
      last = chunk[bytesRead - 1]!;
    }
    return last === 0x0a ? lines : lines + 1;
  } finally {
    await fh.close();
  }
}
