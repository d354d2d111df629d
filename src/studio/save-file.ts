/**
 * Writing a file the way an editor must: the whole text through a temporary sibling (same folder), flushed to
 * disk, then renamed over the file — a reader sees the old text or the new one, never half — keeping the file's
 * mode. `saveIfUnchanged` refuses when the file changed on disk since the page read it (someone else's edit).
 */
import { createHash, randomBytes } from 'node:crypto';
import { open, readFile, realpath, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

export function sha256(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Atomically replaces (or creates) `path` with `text`, with `mode` (default: the file's own, else 0600). */
export async function writeFileAtomic(path: string, text: string, mode?: number): Promise<void> {
  const target = await realpath(path).catch(() => path); // a symlinked mapping: its target is replaced, the link kept
  const keep =
    mode ??
    (await stat(target).then(
      (st) => st.mode & 0o7777,
      () => 0o600,
    ));
  const tmp = join(dirname(target), `.${basename(target)}.${randomBytes(6).toString('hex')}.tmp`);
  const fh = await open(tmp, 'wx', keep);
  try {
    await fh.chmod(keep); // the umask does not narrow it
    await fh.writeFile(text, 'utf8');
    await fh.sync();
  } catch (err) {
    await fh.close();
    await rm(tmp, { force: true });
    throw err;
  }
  await fh.close();
  try {
    await rename(tmp, target);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

export type SaveOutcome = { saved: true; hash: string } | { conflict: true; hash: string };

/** Saves `text` unless the file's bytes no longer hash to `baseHash`. */
export async function saveIfUnchanged(path: string, text: string, baseHash: string): Promise<SaveOutcome> {
  const current = sha256(await readFile(path));
  if (current !== baseHash) return { conflict: true, hash: current };
  await writeFileAtomic(path, text);
  return { saved: true, hash: sha256(Buffer.from(text, 'utf8')) };
}
