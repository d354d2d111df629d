import { isAbsolute, relative } from 'node:path';
import { createReadStream, renameSync, rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import type { Input, Options } from 'csv-stringify/sync';
import { CareEtlError, ExitCode, formatLocation } from '../core/issues.js';
import {
  createPrivateWriteStream,
  createStreamOutput,
  endPrivateStream,
  outputKindOf,
  tempPathFor,
  writeFailed,
  type PrivateWriteStream,
} from '../core/secure-fs.js';
import { redactKnown } from '../core/secret.js';
import { csvCell, STRICT_CSV } from '../core/csv-cell.js';
import type { RejectRecord } from '../transform/reject-record.js';
import { handOverIssue, type HandOverOptions } from './hand-over.js';
import { requiredWhenUsed } from '../core/lazy-require.js';

/** csv-stringify: loaded by a run's first rejects summary line (most runs write none). */
const csvStringify = requiredWhenUsed<{ stringify: (input: Input, options?: Options) => string }>('csv-stringify/sync');
const stringify = (input: Input, options?: Options): string => csvStringify().stringify(input, options);

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
    reason =
      err instanceof RangeError ? 'nested too deeply to be written as JSON' : `it cannot be written as JSON (${err instanceof Error ? err.name : 'error'})`;
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

/**
 * A reject for the terminal: where, mapping, key and the first issue's hand-over text (`handOverIssue`: the export's
 * column first), then on a second, indented line the mapping's jargon — the stage, the expression's position in
 * the mapping file, hints in its terms.
 */
export function describeReject(r: RejectRecord, rejectsFile?: string): string {
  const where = `${short(r.file)}${r.line !== undefined ? `:${r.line}` : r.record !== undefined ? `#${r.record}` : ''}`;
  const first = r.issues[0] && handOverIssue(r.issues[0], { rejectsFile });
  const more = r.issues.length > 1 ? ` (+${r.issues.length - 1} more)` : '';
  // Mapping-file positions (file:line:col of the expression) are worth more than the mapping's YAML path.
  const loc = first?.location;
  const inMapping = loc?.file && loc.file !== r.file && loc.column !== undefined ? `${formatLocation({ ...loc, file: short(loc.file) })}` : '';
  const detail = [r.stage, first?.detail?.replace(/(^|, )at [^,]*$/, '$1').replace(/, $/, ''), inMapping].filter(Boolean).join(', ');
  // Source text (keys, messages quoting header names) never reaches a terminal raw.
  return (
    escapeControls(`${where} [${r.mapping}${r.key !== undefined ? ` key ${r.key}` : ''}] ${first ? first.message : 'rejected'}${more}`) +
    `\n    ${escapeControls(detail)}`
  );
}

const causeKey = (mapping: string, key: string): string => JSON.stringify([mapping, key]);

/** Where a reject's row is, in words: `data/patients.csv line 33`, `data/staff.json record 7` (the file relative to `baseDir` when inside it). */
export function rejectPlace(r: Pick<RejectRecord, 'file' | 'line' | 'record'>, baseDir?: string): string {
  const rel = baseDir ? relative(baseDir, r.file) : '';
  const file = rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : short(r.file);
  return r.line !== undefined ? `${file} line ${r.line}` : r.record !== undefined ? `${file} record ${r.record}` : file;
}

/** The redacted summary beside a rejects file: `rejects.ndjson` → `rejects.summary.csv` (any other name: `+ .summary.csv`). */
export function summaryPathFor(rejectsFile: string): string {
  return `${rejectsFile.replace(/\.(ndjson|jsonl|json)$/i, '')}.summary.csv`;
}

/** Columns of the rejects summary (one row per issue of a rejected row; never the row's content). */
export const SUMMARY_COLUMNS = ['file', 'line', 'record', 'mapping', 'key', 'stage', 'code', 'message', 'detail'] as const;

const SUMMARY_OPTIONS = {
  ...STRICT_CSV,
  // `=`, `+`, `-`, `@`… at the start of a message get a `'`.
  escape_formulas: true,
} as const;

/**
 * The summary rows of one reject: where (the file relative to `baseDir` when inside it; the line — every line of a
 * `groupBy` group — or, for JSON, the record), which mapping and key, the stage, and per issue its code and its
 * hand-over text (`handOverIssue`: never a field value — a mapping's own `$error` text is named by its position, the
 * message itself stays in `rejectsFile`); the row and the raw text are not read.
 */
export function summaryRows(r: RejectRecord, baseDir?: string, rejectsFile?: string, causeOf?: HandOverOptions['causeOf']): (string | number | undefined)[][] {
  const rel = baseDir ? relative(baseDir, r.file) : '';
  const file = rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : r.file;
  const many = (one: number | undefined) => (r.lines?.length ? r.lines.join(' ') : one);
  const line = r.line !== undefined ? many(r.line) : undefined;
  const record = r.line === undefined ? many(r.record) : undefined;
  const issues = r.issues?.length ? r.issues : [undefined];
  return issues.map((i) => {
    const h = i && handOverIssue(i, { rejectsFile, causeOf });
    return [file, line, record, r.mapping, r.key, r.stage, i?.code, h?.message, h?.detail].map((v) => csvCell(typeof v === 'string' ? redactKnown(v) : v));
  });
}

export interface RejectsWriterOptions {
  /** The redacted CSV summary (default `summaryPathFor(path)`; false: none). */
  summary?: string | false;
  /** Summary `file` column: paths relative to this folder (the mapping's) when inside it. */
  baseDir?: string;
}

/**
 * Writes this run's rejects to a temporary sibling of the rejects file, and their redacted summary (CSV, no row
 * content: `summaryRows`) to a temporary sibling of the summary; `commit()` renames both over the old files once
 * the run has done its work, so a run that fails before (credentials, lock, unreachable server) leaves the
 * previous run's rejects and summary — the rows the user was told to fix — byte-identical. Both are 0600: the
 * NDJSON holds patient rows, the summary their identifiers. A pipe or a device (`outputKindOf`) is written in place,
 * without a summary.
 */
export class RejectsWriter {
  readonly #stream?: PrivateWriteStream;
  readonly #tmp?: string;
  readonly #summary?: PrivateWriteStream;
  readonly #summaryTmp?: string;
  readonly summaryPath?: string;
  readonly #baseDir?: string;
  #count = 0;
  readonly #causes = new Map<string, string>();
  readonly #causeOf = (mapping: string, key: string): string | undefined => this.#causes.get(causeKey(mapping, key));
  constructor(
    readonly path: string | undefined,
    opts: RejectsWriterOptions = {},
  ) {
    if (!path) return;
    if (outputKindOf(path) === 'stream') {
      this.#stream = openInPlace(path);
      return; // nothing beside a pipe or a device (`/dev/fd/63.summary.csv`): no summary, no renames
    }
    // Opened before the run sends anything: a folder that cannot be written is a configuration error (exit 2).
    const open = (file: string, tmp: string) => {
      try {
        return createPrivateWriteStream(tmp, { shownAs: file });
      } catch (err) {
        throw writeFailed((err as { cause?: unknown }).cause ?? err, file, ExitCode.config);
      }
    };
    this.#stream = open(path, (this.#tmp = tempPathFor(path)));
    if (opts.summary === false) return;
    this.summaryPath = opts.summary ?? summaryPathFor(path);
    this.#baseDir = opts.baseDir;
    this.#summary = open(this.summaryPath, (this.#summaryTmp = tempPathFor(this.summaryPath)));
    this.#summary.write(stringify([[...SUMMARY_COLUMNS]], SUMMARY_OPTIONS));
  }

  get count(): number {
    return this.#count;
  }

  /** Never throws on a pathological row (see `serializeReject`). */
  write(r: RejectRecord & { ok?: boolean }): void {
    this.#count++;
    const { ok: _ok, ...record } = r;
    // a row's reject precedes those of rows referring to it (load order): their summary points back at it
    if (this.#summary && record.key !== undefined) this.#causes.set(causeKey(record.mapping, record.key), rejectPlace(record, this.#baseDir));
    if (this.#stream) this.#stream.write(`${redactKnown(serializeReject(record))}\n`);
    if (this.#summary) {
      let text: string;
      try {
        text = stringify(summaryRows(record, this.#baseDir, this.path, this.#causeOf), SUMMARY_OPTIONS);
      } catch {
        // issues that are not plain text (never from the pipeline): the location, without them
        text = stringify(
          [[record.file, record.line, record.record, record.mapping, undefined, record.stage, undefined, 'issues not writable as text'].map(csvCell)],
          SUMMARY_OPTIONS,
        );
      }
      this.#summary.write(text);
    }
  }

  /** Rejects with the first write failure of either file (`write-failed`: disk full, I/O error). */
  async #close(): Promise<void> {
    const ended = await Promise.allSettled([this.#stream, this.#summary].map(async (s) => s && endPrivateStream(s)));
    for (const e of ended) if (e.status === 'rejected') throw e.reason;
  }

  /** The run did its work: this run's rejects (and summary) replace the previous ones. */
  async commit(): Promise<void> {
    await this.#close();
    const replace = (tmp: string | undefined, file: string | undefined) => {
      if (!tmp || !file) return;
      try {
        renameSync(tmp, file);
      } catch (err) {
        throw writeFailed(err, file);
      }
    };
    replace(this.#summaryTmp, this.summaryPath);
    replace(this.#tmp, this.path);
  }

  /**
   * The run failed: the previous rejects file and summary stay. Rows this run rejected before failing are kept
   * beside it (`<rejects>.incomplete`, NDJSON); returns that path, or undefined when there were none.
   */
  async discard(): Promise<string | undefined> {
    await this.#close().catch(() => {});
    if (this.#summaryTmp) rmSync(this.#summaryTmp, { force: true });
    if (!this.#tmp || !this.path) return undefined;
    if (this.#count === 0 || this.#stream?.failure) {
      rmSync(this.#tmp, { force: true });
      return undefined;
    }
    const kept = `${this.path}.incomplete`;
    try {
      renameSync(this.#tmp, kept);
    } catch {
      rmSync(this.#tmp, { force: true }); // the folder cannot be written: the run's own error says so
      return undefined;
    }
    return kept;
  }
}

/**
 * `--rejects` naming a pipe or a device (`>(gzip > rejects.ndjson.gz)`, a FIFO, /dev/null): the rejects stream there
 * as the run goes; a failed write (the reader went away) is reported by `commit()`/`discard()` through `end()`.
 */
function openInPlace(path: string): PrivateWriteStream {
  const stream: PrivateWriteStream = createStreamOutput(path);
  stream.on('error', (err) => (stream.failure ??= writeFailed(err, path))); // thrown by #close (a reader gone away)
  return stream;
}

/** Where a row is in its source file: its line, or its record number when it has no line (JSON). */
function placeOf(file: string, line: number | undefined, record: number | undefined): string | undefined {
  if (line !== undefined) return `${file}\u0000L${line}`;
  if (record !== undefined) return `${file}\u0000R${record}`;
  return undefined;
}

/**
 * `care-etl run --only-rejected`: the rows the previous rejects file names, per mapping. A row whose key was known
 * is selected **by key** in the current source (line numbers shift when the file is edited; keys do not); a row
 * rejected before its key was known (source stage: an unreadable record; transform: a missing key) — or as a
 * duplicate, whose key belongs to another, loaded row — **by file and line** (record number for JSON).
 */
export class RejectSelection {
  readonly #keys = new Map<string, Set<string>>();
  readonly #places = new Map<string, Set<string>>();
  /** Rejects read from the file. */
  rejects = 0;
  /** Lines of the file that are not a reject (not JSON, no mapping): ignored. */
  unreadable = 0;
  /** Keys added from the state ledger (`addKey` with `fromState`), not already selected by the file. */
  fromState = 0;

  addReject(r: Partial<RejectRecord>): void {
    if (typeof r.mapping !== 'string') {
      this.unreadable++;
      return;
    }
    this.rejects++;
    const duplicate = Array.isArray(r.issues) && r.issues.some((i) => i?.code === 'duplicate-key');
    if (typeof r.key === 'string' && !duplicate) {
      this.addKey(r.mapping, r.key);
      return;
    }
    const place = typeof r.file === 'string' ? placeOf(r.file, num(r.line), num(r.record)) : undefined;
    if (place === undefined) return;
    let s = this.#places.get(r.mapping);
    if (!s) this.#places.set(r.mapping, (s = new Set()));
    s.add(place);
  }

  addKey(mapping: string, key: string, fromState = false): void {
    let s = this.#keys.get(mapping);
    if (!s) this.#keys.set(mapping, (s = new Set()));
    if (fromState && !s.has(key)) this.fromState++;
    s.add(key);
  }

  /** Distinct keys selected (all mappings). */
  get keyCount(): number {
    let n = 0;
    for (const s of this.#keys.values()) n += s.size;
    return n;
  }

  /** Distinct file lines (or JSON records) selected (all mappings). */
  get placeCount(): number {
    let n = 0;
    for (const s of this.#places.values()) n += s.size;
    return n;
  }

  /** Is this row (or `groupBy` group: any of its `lines`) of `mapping` to be re-processed? */
  selects(mapping: string, row: { key?: string; file: string; line?: number; record?: number; lines?: number[] }): boolean {
    if (row.key !== undefined && this.#keys.get(mapping)?.has(row.key)) return true;
    const places = this.#places.get(mapping);
    if (!places?.size) return false;
    const { file, line, record } = row;
    if (row.lines?.length) return row.lines.some((n) => places.has(line !== undefined ? placeOf(file, n, undefined)! : placeOf(file, undefined, n)!));
    const p = placeOf(file, line, record);
    return p !== undefined && places.has(p);
  }
}

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isInteger(v) ? v : undefined);

/**
 * Streams a rejects file (NDJSON, as `RejectsWriter` writes it; lines may be long: rows are kept whole): each
 * line's object, or `undefined` for a line that is not one (counted by the caller). Undefined when the file does
 * not exist; other errors are thrown.
 */
export async function readRejectLines(path: string): Promise<AsyncGenerator<Partial<RejectRecord> | undefined> | undefined> {
  const input = createReadStream(path, { encoding: 'utf8' });
  try {
    await new Promise<void>((resolve, reject) => {
      input.once('open', () => resolve());
      input.once('error', reject);
    });
  } catch (err) {
    input.destroy();
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  return (async function* () {
    const lines = createInterface({ input, crlfDelay: Infinity });
    try {
      for await (const line of lines) {
        if (line.trim() === '') continue;
        let r: unknown;
        try {
          r = JSON.parse(line);
        } catch {
          yield undefined;
          continue;
        }
        yield r && typeof r === 'object' && !Array.isArray(r) ? (r as Partial<RejectRecord>) : undefined;
      }
    } finally {
      lines.close();
      input.destroy();
    }
  })();
}

/**
 * Reads a rejects file into a `RejectSelection` (only the location fields are kept, never the rows). A missing
 * file is a usage error: there is nothing to re-process before a run wrote one.
 */
export async function readRejectSelection(path: string): Promise<RejectSelection> {
  const sel = new RejectSelection();
  let lines: AsyncGenerator<Partial<RejectRecord> | undefined> | undefined;
  try {
    lines = await readRejectLines(path);
  } catch (err) {
    throw new CareEtlError(`--only-rejected: cannot read the rejects file ${path}: ${(err as Error).message}`, { exitCode: ExitCode.config });
  }
  if (!lines) {
    throw new CareEtlError(`--only-rejected: no rejects file at ${path}`, {
      exitCode: ExitCode.config,
      hint: 'Run without --only-rejected first (it writes the rejects file), or name the file with --rejects.',
    });
  }
  for await (const r of lines) {
    if (r) sel.addReject(r);
    else sel.unreadable++;
  }
  return sel;
}
