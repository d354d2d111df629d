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
  /** Set when `row` could not be written as it was (see `serializeReject`): why, and a bounded rendering of it. */
  rowOmitted?: string;
  rowExcerpt?: string;
}

/** A reject line longer than this drops its `row` (keeping an excerpt): one pathological row must not bloat the file. */
export const REJECT_MAX_LINE_CHARS = 16 * 1024 * 1024;
/** Characters of `raw` / of the row's rendering kept when the row cannot be written whole. */
export const REJECT_EXCERPT_CHARS = 64 * 1024;
/** Nesting, and items per array or object, shown in a row's excerpt. */
const EXCERPT_DEPTH = 16;
const EXCERPT_ITEMS = 1000;

/** Control characters and bidirectional controls as `\u{..}`: terminal lines never carry source text raw. */
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const escapeControls = (s: string): string => s.replace(UNSAFE, (c) => `\\u{${c.charCodeAt(0).toString(16)}}`);

/**
 * A bounded, JSON-like rendering of any value, never recursing (so a 10,000-deep object cannot overflow the
 * stack) and never throwing (BigInt, cycles, getters): at most `max` characters, nesting below `depth` as `…`.
 */
export function excerptOf(value: unknown, max = REJECT_EXCERPT_CHARS, depth = EXCERPT_DEPTH): string {
  let out = '';
  const seen = new Set<object>();
  type Frame = { kind: 'value'; v: unknown; d: number } | { kind: 'text'; t: string };
  const stack: Frame[] = [{ kind: 'value', v: value, d: 0 }];
  while (stack.length > 0 && out.length < max) {
    const f = stack.pop()!;
    if (f.kind === 'text') {
      out += f.t;
      continue;
    }
    const v = f.v;
    if (v === null || v === undefined) out += 'null';
    else if (typeof v === 'string') out += JSON.stringify(v.length > max ? v.slice(0, max) : v);
    else if (typeof v === 'number' || typeof v === 'boolean') out += String(v);
    else if (typeof v === 'bigint') out += `"${v}n"`;
    else if (typeof v !== 'object') out += `"[${typeof v}]"`;
    else if (seen.has(v)) out += '"[cycle]"';
    else if (f.d >= depth) out += Array.isArray(v) ? '["…"]' : '{"…":"…"}';
    else {
      seen.add(v);
      const frames: Frame[] = [];
      try {
        // each item takes a character at least: more than `max` of them cannot be shown anyway
        const limit = Math.min(max, EXCERPT_ITEMS);
        if (Array.isArray(v)) {
          frames.push({ kind: 'text', t: '[' });
          const n = Math.min(v.length, limit);
          for (let i = 0; i < n; i++) {
            if (i > 0) frames.push({ kind: 'text', t: ',' });
            frames.push({ kind: 'value', v: v[i], d: f.d + 1 });
          }
          frames.push({ kind: 'text', t: v.length > n ? ',"…"]' : ']' });
        } else {
          frames.push({ kind: 'text', t: '{' });
          let i = 0;
          for (const k in v) {
            if (!Object.prototype.hasOwnProperty.call(v, k)) continue;
            if (i === limit) {
              frames.push({ kind: 'text', t: ',"…":"…"' });
              break;
            }
            frames.push({ kind: 'text', t: `${i > 0 ? ',' : ''}${JSON.stringify(k)}:` });
            frames.push({ kind: 'value', v: (v as Record<string, unknown>)[k], d: f.d + 1 });
            i++;
          }
          frames.push({ kind: 'text', t: '}' });
        }
      } catch {
        frames.length = 0;
        frames.push({ kind: 'text', t: '"[unreadable]"' });
      }
      for (let i = frames.length - 1; i >= 0; i--) stack.push(frames[i]!);
    }
  }
  return out.length > max || stack.length > 0 ? `${out.slice(0, max)}…` : out;
}

/**
 * One reject as a JSON line. Never throws: a `row` JSON.stringify cannot write (nested too deeply, a BigInt, a
 * cycle) or that makes the line longer than REJECT_MAX_LINE_CHARS is left out, with `rowOmitted` saying why and
 * `rowExcerpt` a bounded rendering of it; `raw` is then cut to REJECT_EXCERPT_CHARS.
 */
export function serializeReject(record: RejectRecord): string {
  let reason: string;
  try {
    const line = JSON.stringify(record);
    if (line.length <= REJECT_MAX_LINE_CHARS) return line;
    reason = `the reject would be longer than ${REJECT_MAX_LINE_CHARS} characters`;
  } catch (err) {
    reason = err instanceof RangeError ? 'nested too deeply to be written as JSON' : `it cannot be written as JSON (${err instanceof Error ? err.name : 'error'})`;
  }
  const { row, raw, ...rest } = record;
  const fallback: RejectRecord = { ...rest };
  if (raw !== undefined) fallback.raw = raw.length > REJECT_EXCERPT_CHARS ? raw.slice(0, REJECT_EXCERPT_CHARS) : raw;
  if (row !== undefined) {
    fallback.rowOmitted = `row not written: ${reason}`;
    fallback.rowExcerpt = excerptOf(row);
  } else {
    fallback.rowOmitted = `raw cut to ${REJECT_EXCERPT_CHARS} characters: ${reason}`;
  }
  try {
    return JSON.stringify(fallback);
  } catch {
    // the issues themselves: keep the location and the codes and messages as text
    return JSON.stringify({
      stage: rest.stage,
      mapping: String(rest.mapping),
      source: String(rest.source),
      file: String(rest.file),
      line: rest.line,
      record: rest.record,
      key: rest.key === undefined ? undefined : String(rest.key),
      issues: (rest.issues ?? []).map((i) => ({ severity: String(i?.severity), code: String(i?.code), message: String(i?.message) })),
      rowOmitted: `reject not written whole: ${reason}`,
    });
  }
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
  // Source text (keys, messages quoting header names) never reaches a terminal raw.
  return escapeControls(`${where} [${r.mapping}${r.key !== undefined ? ` key ${r.key}` : ''}] ${r.stage}: ${first ? `${path}${first.message}${inMapping}` : 'rejected'}${more}`);
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

  /** Never throws on a pathological row (see `serializeReject`). */
  write(r: RejectRecord & { ok?: boolean }): void {
    this.#count++;
    const { ok: _ok, ...record } = r;
    if (this.#stream) this.#stream.write(`${redactKnown(serializeReject(record))}\n`);
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
