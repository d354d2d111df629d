import { isAbsolute, relative } from 'node:path';
import { renameSync, rmSync, type WriteStream } from 'node:fs';
import { formatLocation, type Issue } from '../core/issues.js';
import { createPrivateWriteStream, tempPathFor } from '../core/secure-fs.js';
import { redactKnown } from '../core/secret.js';

export type RejectStage = 'source' | 'transform' | 'validate' | 'load';

/**
 * One rejected row (or group of rows) as written to the rejects file (NDJSON, mode 0600). It keeps the
 * source row so the row can be fixed and re-processed; logs and terminal output carry only the location.
 */
export interface RejectRecord {
  stage: RejectStage;
  mapping: string;
  source: string;
  file: string;
  line?: number;
  record?: number;
  /** For `groupBy` mappings: the lines of every row of the group. */
  lines?: number[];
  key?: string;
  issues: Issue[];
  row?: unknown;
  raw?: string;
}

/** Paths under the working directory are shown relative (shorter lines); the rejects file keeps them absolute. */
function short(file: string): string {
  const rel = relative(process.cwd(), file);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : file;
}

export function describeReject(r: RejectRecord): string {
  const where = `${short(r.file)}${r.line !== undefined ? `:${r.line}` : r.record !== undefined ? `#${r.record}` : ''}`;
  const first = r.issues[0];
  const more = r.issues.length > 1 ? ` (+${r.issues.length - 1} more)` : '';
  // Mapping-file positions (file:line:col of the expression) are worth more than the mapping's YAML path.
  const loc = first?.location;
  const inMapping = loc?.file && loc.file !== r.file ? ` (${formatLocation({ ...loc, file: short(loc.file) })})` : '';
  const path = first?.path && !inMapping ? `${first.path}: ` : '';
  return `${where} [${r.mapping}${r.key !== undefined ? ` key ${r.key}` : ''}] ${r.stage}: ${first ? `${path}${first.message}${inMapping}` : 'rejected'}${more}`;
}

/**
 * Writes this run's rejects to a temporary sibling of the rejects file; `commit()` renames it over the old
 * file once the run has done its work, so a run that fails before (credentials, lock, unreachable server)
 * leaves the previous run's rejects — the rows the user was told to fix — byte-identical.
 */
export class RejectsWriter {
  readonly #stream?: WriteStream;
  readonly #tmp?: string;
  #count = 0;
  constructor(readonly path: string | undefined) {
    if (path) this.#stream = createPrivateWriteStream((this.#tmp = tempPathFor(path)));
  }

  get count(): number {
    return this.#count;
  }

  write(r: RejectRecord & { ok?: boolean }): void {
    this.#count++;
    const { ok: _ok, ...record } = r;
    this.#stream?.write(`${redactKnown(JSON.stringify(record))}\n`);
  }

  async #close(): Promise<void> {
    const s = this.#stream;
    if (!s || s.closed) return;
    await new Promise<void>((resolve, reject) => s.end((err?: Error | null) => (err ? reject(err) : resolve())));
  }

  /** The run did its work: this run's rejects replace the previous ones. */
  async commit(): Promise<void> {
    await this.#close();
    if (this.#tmp && this.path) renameSync(this.#tmp, this.path);
  }

  /**
   * The run failed: the previous rejects file stays. Rows this run rejected before failing are kept beside it
   * (`<rejects>.incomplete`); returns that path, or undefined when there were none.
   */
  async discard(): Promise<string | undefined> {
    await this.#close().catch(() => {});
    if (!this.#tmp || !this.path) return undefined;
    if (this.#count === 0) {
      rmSync(this.#tmp, { force: true });
      return undefined;
    }
    const kept = `${this.path}.incomplete`;
    renameSync(this.#tmp, kept);
    return kept;
  }
}
