import { Transform, type TransformCallback } from 'node:stream';

/**
 * A pass-through tap that remembers the bytes from `floor` up to what it has passed on, so that the
 * text of a record csv-parse skipped (malformed quote) can be recovered for the rejects file.
 *
 * The reader moves `floor` to the end of each record it has finished with; chunks entirely below
 * the floor are released when the next chunk passes. Retention is therefore bounded by what sits
 * between the reader and the parser's input (a few 64 KiB chunks), plus at most one malformed record
 * (itself bounded by the parser's `max_record_size`).
 */
export class ByteWindow extends Transform {
  /** Bytes before this absolute offset may be released. */
  floor = 0;
  /** Absolute offset just past the last byte passed through. */
  total = 0;
  private readonly chunks: Buffer[] = [];
  private readonly starts: number[] = [];

  override _transform(chunk: Buffer, _enc: BufferEncoding, callback: TransformCallback): void {
    this.release();
    this.chunks.push(chunk);
    this.starts.push(this.total);
    this.total += chunk.length;
    callback(null, chunk);
  }

  private release(): void {
    let n = 0;
    while (n < this.chunks.length && this.starts[n] + this.chunks[n].length <= this.floor) n++;
    if (n > 0) {
      this.chunks.splice(0, n);
      this.starts.splice(0, n);
    }
  }

  /** Bytes [from, to) if still retained, else undefined. */
  slice(from: number, to: number = this.total): Buffer | undefined {
    if (to < from || this.chunks.length === 0 || from < this.starts[0] || to > this.total) return undefined;
    const parts: Buffer[] = [];
    for (let i = 0; i < this.chunks.length; i++) {
      const start = this.starts[i];
      const chunk = this.chunks[i];
      const stop = start + chunk.length;
      if (stop <= from) continue;
      if (start >= to) break;
      parts.push(chunk.subarray(Math.max(0, from - start), Math.min(chunk.length, to - start)));
    }
    return parts.length === 1 ? parts[0] : Buffer.concat(parts);
  }
}
