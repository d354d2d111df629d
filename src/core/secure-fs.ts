import { createWriteStream, fchmodSync, mkdirSync, openSync, renameSync, rmSync, writeFileSync, type WriteStream } from 'node:fs';
import { basename, dirname, join } from 'node:path';

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
