import { open, type FileHandle } from 'node:fs/promises';
import { extname } from 'node:path';
import { addAbortSignal, type Readable } from 'node:stream';
import { sourceFatal } from './source-errors.js';
import type { ByteMeter, SourceConfig, SourceFormat } from './types.js';

const FORMAT_BY_EXTENSION: Readonly<Record<string, SourceFormat>> = {
  '.csv': 'csv',
  '.tsv': 'csv',
  '.txt': 'csv',
  '.json': 'json',
  '.ndjson': 'ndjson',
  '.jsonl': 'ndjson',
};

/** Format from the file extension (case-insensitive), or undefined when the extension is not known. */
export function detectFormat(path: string): SourceFormat | undefined {
  return FORMAT_BY_EXTENSION[extname(path).toLowerCase()];
}

/** `.tsv` files default to a tab delimiter. */
export function isTsv(path: string): boolean {
  return extname(path).toLowerCase() === '.tsv';
}

export interface OpenedSource {
  handle: FileHandle;
  size: number;
  /** A regular file (its size is known), not a FIFO. */
  isFile: boolean;
}

/** Opens the source file for reading; a missing/unreadable file or a directory is a fatal error. */
export async function openSourceFile(cfg: SourceConfig): Promise<OpenedSource> {
  let handle: FileHandle;
  try {
    handle = await open(cfg.path, 'r');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw sourceFatal(cfg, `file not found: ${cfg.path}`, {
        code: 'source-not-found',
        cause: err,
        hint: 'Check the `path` of this source in the mapping file (relative paths are resolved from the mapping file).',
      });
    }
    throw sourceFatal(cfg, `cannot open ${cfg.path}: ${(err as Error).message}`, { code: 'source-read', cause: err });
  }
  try {
    const st = await handle.stat();
    // A FIFO is accepted too: `--source patients=<(zcat export.csv.gz)` streams like a file.
    if (!st.isFile() && !st.isFIFO()) {
      throw sourceFatal(cfg, `not a regular file: ${cfg.path}`, { code: 'source-read' });
    }
    return { handle, size: st.size, isFile: st.isFile() };
  } catch (err) {
    await handle.close().catch(() => undefined);
    throw err;
  }
}

/**
 * A byte stream over the opened file (closes the handle when done or destroyed). `bytes` is attached to it: the
 * stream counts what it read (`fs.ReadStream#bytesRead`), nothing is added per chunk or per row.
 */
export function fileStream(opened: OpenedSource, signal: AbortSignal | undefined, bytes?: ByteMeter): Readable {
  const stream = opened.handle.createReadStream({ highWaterMark: 64 * 1024 });
  if (signal) addAbortSignal(signal, stream);
  bytes?.attach(stream, opened.isFile ? opened.size : undefined);
  return stream;
}

/**
 * How far the reading of a source is, for progress: bytes read so far of the file the reader opened last, and
 * the file's size (undefined for a FIFO). The count is the file stream's, so it runs ahead of the rows handed out
 * by what sits in the stream's and the parser's buffers (a few 64 KiB chunks) — nothing for a percentage of a
 * file worth an ETA. Before a file is opened: 0 of unknown.
 */
export class SourceBytes implements ByteMeter {
  #stream?: { readonly bytesRead: number };
  #total?: number;

  attach(stream: { readonly bytesRead: number }, totalBytes: number | undefined): void {
    this.#stream = stream;
    this.#total = totalBytes;
  }

  get read(): number {
    return this.#stream?.bytesRead ?? 0;
  }

  get total(): number | undefined {
    return this.#total;
  }

  /** `{ read, total }` once a file is open (total left out when unknown), else undefined. */
  snapshot(): { read: number; total?: number } | undefined {
    if (!this.#stream) return undefined;
    return this.#total === undefined ? { read: this.read } : { read: this.read, total: this.#total };
  }
}
