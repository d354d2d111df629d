import { mkdirSync, openSync, createWriteStream, type WriteStream } from 'node:fs';
import { dirname } from 'node:path';

/** Files that may hold patient data are created owner-only (0600), whatever the umask. */
export const PHI_FILE_MODE = 0o600;

export function ensureDir(path: string): void {
  mkdirSync(path, { recursive: true, mode: 0o700 });
}

/** Opens a write stream on a new/truncated file with mode 0600; the parent folder is created (0700). */
export function createPrivateWriteStream(path: string, opts: { append?: boolean } = {}): WriteStream {
  ensureDir(dirname(path));
  const fd = openSync(path, opts.append ? 'a' : 'w', PHI_FILE_MODE);
  return createWriteStream(path, { fd, flush: false });
}
