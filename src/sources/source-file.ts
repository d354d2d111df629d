import { open, type FileHandle } from 'node:fs/promises';
import { extname } from 'node:path';
import { addAbortSignal, type Readable } from 'node:stream';
import { sourceFatal } from './source-errors.js';
import type { SourceConfig, SourceFormat } from './types.js';

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
    return { handle, size: st.size };
  } catch (err) {
    await handle.close().catch(() => undefined);
    throw err;
  }
}

/** A byte stream over the opened file (closes the handle when done or destroyed). */
export function fileStream(opened: OpenedSource, signal: AbortSignal | undefined): Readable {
  const stream = opened.handle.createReadStream({ highWaterMark: 64 * 1024 });
  if (signal) addAbortSignal(signal, stream);
  return stream;
}
