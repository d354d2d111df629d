import { isAbsolute, relative } from 'node:path';
import type { WriteStream } from 'node:fs';
import { formatLocation, type Issue } from '../core/issues.js';
import { createPrivateWriteStream } from '../core/secure-fs.js';

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

export class RejectsWriter {
  readonly #stream?: WriteStream;
  count = 0;
  /** The file is truncated at once, so that it always holds exactly this run's rejects. */
  constructor(readonly path: string | undefined) {
    if (path) this.#stream = createPrivateWriteStream(path);
  }

  write(r: RejectRecord & { ok?: boolean }): void {
    this.count++;
    const { ok: _ok, ...record } = r;
    this.#stream?.write(`${JSON.stringify(record)}\n`);
  }

  async close(): Promise<void> {
    const s = this.#stream;
    if (!s) return;
    await new Promise<void>((resolve, reject) => s.end((err?: Error | null) => (err ? reject(err) : resolve())));
  }
}
