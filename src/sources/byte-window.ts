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
  /** A floor the reader knows beyond `floor`: no record still to read starts before it (comment and empty lines). */
  floorHint: (() => number) | undefined;
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
    const floor = Math.max(this.floor, this.floorHint?.() ?? 0);
    let n = 0;
    while (n < this.chunks.length && this.starts[n] + this.chunks[n].length <= floor) n++;
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

/**
 * The bytes a stage holds while a record is open, with each chunk appended: `Buffer.concat` of all of them per chunk
 * copied a record arriving in n chunks n times (quadratic: a 4 MiB record in 64 KiB chunks, 128 MiB of copies and
 * as much garbage). Once the held bytes are as long as a chunk the room doubles, so a chunk is copied in once —
 * linear. The caller only ever drops held bytes from the front (`subarray`), so what it passed on is never rewritten.
 */
export class HeldBytes {
  private store = Buffer.alloc(0);
  /** End of the bytes written into `store`. */
  private fill = 0;

  /** `held` (the caller's bytes, the tail of what the last call returned, or a chunk) followed by `chunk`. */
  append(held: Buffer, chunk: Buffer): Buffer {
    if (held.length === 0) return chunk;
    const store = this.store;
    const length = held.length + chunk.length;
    const tailOfStore = held.buffer === store.buffer && held.byteOffset + held.length === store.byteOffset + this.fill;
    if (tailOfStore && this.fill + chunk.length <= store.length) {
      chunk.copy(store, this.fill);
      this.fill += chunk.length;
      return store.subarray(this.fill - length, this.fill);
    }
    // the usual case, a record's start held before a chunk: just that; else room to grow (never from the shared pool)
    const next = Buffer.allocUnsafeSlow(held.length < chunk.length ? length : 2 * length);
    held.copy(next, 0);
    chunk.copy(next, held.length);
    this.store = next;
    this.fill = length;
    return next.subarray(0, length);
  }
}
