import { join } from 'node:path';
import { createPrivateWriteStream, endPrivateStream, type PrivateWriteStream } from '../core/secure-fs.js';

/** Characters gathered per type before one write: a stream write per row cost ~0.5 µs of a row's ~30. */
const BATCH_CHARS = 64 * 1024;
/** Bytes queued on a file before the run waits for the disk (flat memory; more than one batch, so no stall per batch). */
const MAX_QUEUED = 1024 * 1024;

interface DryFile {
  stream: PrivateWriteStream;
  pending: string;
}

/** A dry run's `--out` folder: one NDJSON file per resource type (0600), its lines written in batches. */
export class DryRunFiles {
  readonly #files = new Map<string, DryFile>();

  constructor(readonly dir: string) {}

  /** Creates (empties) the type's file now: a type whose rows are all rejected leaves no stale output. */
  open(type: string): DryFile {
    let f = this.#files.get(type);
    if (f === undefined) this.#files.set(type, (f = { stream: createPrivateWriteStream(join(this.dir, `${type}.ndjson`)), pending: '' }));
    return f;
  }

  /** Adds one line; returns a promise to await when the file is behind (backpressure), else undefined. */
  write(type: string, line: string): Promise<void> | undefined {
    const f = this.open(type);
    f.pending += `${line}\n`;
    if (f.pending.length < BATCH_CHARS) return undefined;
    this.#flush(f);
    return f.stream.writableLength < MAX_QUEUED || f.stream.destroyed ? undefined : drained(f.stream);
  }

  /** Writes what is gathered and ends every file; rejects with a file's write failure (`write-failed`, naming it). */
  async end(): Promise<void> {
    for (const f of this.#files.values()) {
      this.#flush(f);
      await endPrivateStream(f.stream);
    }
  }

  /** Whatever happened: what is gathered written (an interrupted dry run keeps its rows), every file closed. */
  async close(): Promise<void> {
    await Promise.all(
      [...this.#files.values()].map((f) => {
        if (!f.stream.destroyed) this.#flush(f);
        return new Promise<void>((r) => f.stream.end(() => r()));
      }),
    );
  }

  #flush(f: DryFile): void {
    if (f.pending === '') return;
    const text = f.pending;
    f.pending = '';
    f.stream.write(text);
  }
}

/** Resolves when the stream drained, or closed (failed: `end()` reports the failure). */
function drained(stream: PrivateWriteStream): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      stream.off('drain', done).off('close', done);
      resolve();
    };
    stream.on('drain', done).on('close', done);
  });
}
