import { createWriteStream, fchmodSync, mkdirSync, openSync, renameSync, rmSync, statSync, writeFileSync, type WriteStream } from 'node:fs';
import { open, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';

/** Files that may hold patient data are owner-only (0600), whatever the umask and whether or not they existed. */
export const PHI_FILE_MODE = 0o600;

export function ensureDir(path: string): void {
  mkdirSync(path, { recursive: true, mode: 0o700 });
}

/** Opens (creating or truncating/appending) a file owner-only; an existing file's wider mode is tightened. */
export function openPrivateFile(path: string, flags: 'w' | 'a' = 'w'): number {
  ensureDir(dirname(path));
  const fd = openSync(path, flags, PHI_FILE_MODE);
  fchmodSync(fd, PHI_FILE_MODE); // open() applies the mode only when it creates the file
  return fd;
}

/** A write stream on a new/truncated file with mode 0600; the parent folder is created (0700). */
export function createPrivateWriteStream(path: string, opts: { append?: boolean } = {}): WriteStream {
  const fd = openPrivateFile(path, opts.append ? 'a' : 'w');
  return createWriteStream(path, { fd, flush: false });
}

/** The temporary sibling a file is written to before it replaces the real one (same folder: rename is atomic). */
export function tempPathFor(path: string): string {
  return join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
}

/**
 * Writes a whole file owner-only through a temporary sibling and a rename: readers see the old file or the
 * new one, never half of one, and a failure leaves the old file as it was.
 */
export function writePrivateFileAtomic(path: string, text: string): void {
  const tmp = tempPathFor(path);
  try {
    const fd = openPrivateFile(tmp);
    writeFileSync(fd, text);
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

// ---------------------------------------------------------------- outputs that are not regular files (issue 26, pipes)

/**
 * How an output path given by the user is written: `file` (absent or a regular file: a temporary sibling, then a
 * rename; mode 0600) or `stream` (a FIFO, a character device, a socket, or any path under /dev or /proc — `/dev/null`,
 * `/dev/stdout`, `>(gzip > x.gz)` as `/dev/fd/63`): opened and written in place, never renamed onto, never
 * chmod-ed — a rename would replace the device node (as root: the system's /dev/null) and a FIFO's reader would
 * get nothing. Paths under /dev and /proc are streams whatever they point to (`/dev/stdout` redirected to a file
 * is that file: a rename would replace the /dev/stdout link).
 */
export type OutputKind = 'file' | 'stream';

export function outputKindOf(path: string): OutputKind {
  if (/^\/(dev|proc)\//.test(resolve(path))) return 'stream';
  try {
    const st = statSync(path);
    return st.isFIFO() || st.isCharacterDevice() || st.isSocket() ? 'stream' : 'file';
  } catch {
    return 'file'; // absent (or unreadable: the regular write reports why)
  }
}

/**
 * Opens a stream output in place for writing (`outputKindOf` = `stream`). The open is awaited off the main thread:
 * a FIFO with no reader yet waits for one (as `cat > fifo` does) without blocking the process. A path under /dev
 * that does not exist yet is created 0600.
 */
export async function openStreamOutput(path: string): Promise<WriteStream> {
  const handle = await open(path, 'w', PHI_FILE_MODE);
  return handle.createWriteStream();
}

/** `openStreamOutput` for a caller that cannot await: the open happens in the background, a failure is the stream's 'error' event. */
export function createStreamOutput(path: string): WriteStream {
  return createWriteStream(path, { flags: 'w', mode: PHI_FILE_MODE });
}

/** Writes a whole text to an output path: in place for a stream, else owner-only through a temporary sibling and a rename. */
export async function writeOutputFile(path: string, text: string): Promise<void> {
  if (outputKindOf(path) === 'stream') await writeFile(path, text, { mode: PHI_FILE_MODE });
  else writePrivateFileAtomic(path, text);
}
