import { createWriteStream, fchmodSync, mkdirSync, openSync, renameSync, rmSync, statSync, writeFileSync, type WriteStream } from 'node:fs';
import { open, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { CareEtlError, ExitCode, issue } from './issues.js';

/** Files that may hold patient data are owner-only (0600), whatever the umask and whether or not they existed. */
export const PHI_FILE_MODE = 0o600;

export function ensureDir(path: string): void {
  try {
    mkdirSync(path, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw writeFailed(err, path);
  }
}

/** Opens (creating or truncating/appending) a file owner-only; an existing file's wider mode is tightened. */
export function openPrivateFile(path: string, flags: 'w' | 'a' = 'w'): number {
  try {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    const fd = openSync(path, flags, PHI_FILE_MODE);
    fchmodSync(fd, PHI_FILE_MODE); // open() applies the mode only when it creates the file
    return fd;
  } catch (err) {
    throw writeFailed(err, path);
  }
}

/** A write stream whose first failure (disk full, I/O error) is kept as a `write-failed` error naming its file. */
export type PrivateWriteStream = WriteStream & { failure?: CareEtlError };

/**
 * A write stream on a new/truncated file with mode 0600; the parent folder is created (0700). A write that fails
 * does not crash the process: the stream keeps the error (`failure`) for `endPrivateStream` to throw.
 */
export function createPrivateWriteStream(path: string, opts: { append?: boolean; shownAs?: string } = {}): PrivateWriteStream {
  const fd = openPrivateFile(path, opts.append ? 'a' : 'w');
  const stream: PrivateWriteStream = createWriteStream(path, { fd, flush: false });
  // `shownAs`: the file a temporary sibling stands for (messages name the file the user asked for).
  stream.on('error', (err) => (stream.failure ??= writeFailed(err, opts.shownAs ?? path)));
  if (simulatedFull(path)) {
    stream._write = (_chunk, _encoding, callback) => callback(enospc());
    stream._writev = (_chunks, callback) => callback(enospc());
  }
  return stream;
}

/** Ends the stream; rejects with its first write failure (`write-failed`, naming the file), if it had one. */
export async function endPrivateStream(stream: PrivateWriteStream): Promise<void> {
  if (!stream.closed && !stream.destroyed) await new Promise<void>((done) => stream.end(() => done()));
  // a write that failed just before the end: its 'error' (which sets `failure`) comes with the close
  if (stream.errored && !stream.closed) await new Promise<void>((done) => stream.once('close', () => done()));
  if (stream.failure) throw stream.failure;
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
    if (simulatedFull(path)) throw enospc();
    writeFileSync(fd, text);
    renameSync(tmp, path);
  } catch (err) {
    try {
      rmSync(tmp, { force: true });
    } catch {
      // ENOTDIR / EACCES: there is no temporary file to remove
    }
    throw writeFailed(err, path);
  }
}

// ---------------------------------------------------------------- issue 25 (settings): a write that fails, cleanly
const WRITE_REASONS: Record<string, string> = {
  ENOSPC: 'the disk is full',
  EDQUOT: 'the disk quota is used up',
  EROFS: 'the file system is read-only',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ENOTDIR: 'a part of the path is a file, not a folder',
  EEXIST: 'a part of the path is a file, not a folder',
  EISDIR: 'it is a folder',
  EIO: 'an I/O error',
};

/**
 * The one wording of a file care-etl cannot write (issue 25): `cannot write <path>: <reason> (<code>)`, code
 * `write-failed`, exit 3 (the run stopped; what was loaded stays recorded) unless the caller knows nothing was sent
 * yet (`ExitCode.config`). A CareEtlError passes through unchanged.
 */
export function writeFailed(err: unknown, path: string, exitCode: number = ExitCode.incomplete): CareEtlError {
  if (err instanceof CareEtlError) {
    // named after a temporary sibling or a folder: name the file the caller writes instead
    if (!err.issues.some((i) => i.code === 'write-failed') || err.cause === undefined) return err;
    err = err.cause;
  }
  const code = (err as NodeJS.ErrnoException | null)?.code;
  const reason = (code && WRITE_REASONS[code]) ?? (err instanceof Error ? err.message : String(err));
  const message = `cannot write ${path}: ${reason}${code ? ` (${code})` : ''}`;
  return new CareEtlError(message, {
    issues: [issue.error('write-failed', message, { location: { file: path } })],
    hint: writeHint(code),
    exitCode,
    cause: err,
  });
}

/**
 * What to do about a file system or SQLite storage failure (`ENOSPC`, `EROFS`, `SQLITE_FULL`, `SQLITE_READONLY…`,
 * `SQLITE_IOERR…`, `SQLITE_CANTOPEN`); undefined for other errors.
 */
export function storageFailureHint(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return undefined;
  if (code === 'SQLITE_FULL') return writeHint('ENOSPC');
  if (/^SQLITE_(READONLY|IOERR|CANTOPEN)/.test(code)) return writeHint('EROFS');
  return code in WRITE_REASONS ? writeHint(code) : undefined;
}

function writeHint(code: string | undefined): string {
  return code === 'ENOSPC' || code === 'EDQUOT'
    ? 'Free some space (or point the option at another disk) and run again: re-runs are safe, what was loaded stays recorded.'
    : 'Choose a folder you can write to (--state, --rejects, --report, --out) or fix its permissions, and run again: re-runs are safe.';
}

/**
 * Test seam: `CARE_ETL_TEST_ENOSPC=<file>` makes every write of that file (or of its temporary sibling) fail with
 * ENOSPC, as on a full disk — which a test cannot otherwise arrange without mounting a small file system. The
 * ledger honours it for its state file by capping the database at its size when opened (SQLite's own SQLITE_FULL).
 */
export function simulatedFull(path: string): boolean {
  const full = process.env.CARE_ETL_TEST_ENOSPC;
  if (!full) return false;
  const target = resolve(full);
  return resolve(path) === target || resolve(path) === resolve(tempPathFor(target));
}

function enospc(): NodeJS.ErrnoException {
  return Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28, syscall: 'write' });
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
