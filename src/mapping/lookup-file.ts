/**
 * Reads one lookup file into a table: the records come through the source readers (`openSource`: CSV options,
 * encodings, record bounds and rejects as for any source), each record's code(s) from `key` and its value from
 * `value` (the whole record by default). `key` / `value` are a column or property name, or a JSONata expression
 * over the record. Files up to `memoryMaxBytes` are held in memory, larger ones (and FIFOs, whose size is not
 * known) are indexed on disk (lookup-index.ts). Problems name the file and the row / line / element; the caller
 * places them at the mapping's `path` / `key` / `value` node.
 */
import { stat } from 'node:fs/promises';
import type jsonata from 'jsonata';
import { jsonataExpression } from '../core/jsonata-package.js';
import { CareEtlError, type KnownIssueCode } from '../core/issues.js';
import { redactValues } from '../core/secret.js';
import { notTextHint, notTextReason, openSource, readHeader } from '../sources/open-source.js';
import type { CsvOptions, SourceConfig, SourceFormat, SourceItem } from '../sources/types.js';
import { registerFunctions, show } from './functions.js';
import { compilerEnabled, JSONATA_OPTIONS, mappingExpressionCompiler } from './expression-evaluator.js';
import { regexProblems } from './regex-check.js';
import { errorOffset } from './jsonata-ast.js';
import type { CompiledExpression } from './jsonata-compiler/index.js';
import { looksLikeNdjson, ndjsonInJsonMessage } from './lookup-format.js';
import { DiskLookup } from './lookup-index.js';
import { closestColumn } from './closest.js';
import { rowFieldReads } from './row-fields.js';
import { COLUMN_SAMPLE_RECORDS } from '../sources/source-columns.js';
import type { LookupTable } from './types.js';

/** Files up to this size are held in memory; larger ones are indexed on disk (SQLite). */
const LOOKUP_MEMORY_MAX_BYTES = 32 * 1024 * 1024;
/** Problems reported per lookup file before reading stops. */
const MAX_PROBLEMS = 10;
const PLAIN_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

interface LookupFileSpec {
  /** The lookup's name (`lookups:` key). */
  name: string;
  /** Absolute path. */
  path: string;
  /** The path as written in the mapping (after `${VAR}`), for messages. */
  shown: string;
  format: SourceFormat;
  /** True when `format:` is written in the mapping (problems about the format are placed there). */
  formatDeclared: boolean;
  records?: string;
  csv?: CsvOptions;
  key: string;
  /** Undefined: the whole record. */
  value?: string;
  many: boolean;
  /** Fields `key` / `value` may read that the file lacks (the column contract). */
  optional?: string[];
}

export interface LookupReadOptions {
  memoryMaxBytes?: number;
  /** Per-evaluation time limit of the key / value expressions (ms, 0 = none). */
  timeoutMs: number;
  /** Parent folder of on-disk indexes (default: the system temp dir). */
  tempDir?: string;
  /** Reads one lookup file instead of `readLookupFile` (the studio's keeps the tables of files that did not change). */
  reader?: LookupFileReader;
}

export type LookupFileReader = typeof readLookupFile;

interface LookupFileProblem {
  code: KnownIssueCode;
  message: string;
  /** The mapping node the problem belongs to. */
  at: 'path' | 'key' | 'value' | 'format';
  /** Character offset inside that node's expression. */
  offset?: number;
}

/** How a code or value is read from a record. */
type Reader =
  | { kind: 'name'; name: string; seen: boolean }
  | { kind: 'expr'; src: string; expr: jsonata.Expression; compiled: CompiledExpression | undefined; unseen: Map<string, number> };

export async function readLookupFile(spec: LookupFileSpec, opts: LookupReadOptions): Promise<{ table?: LookupTable; problems: LookupFileProblem[] }> {
  const { shown } = spec;
  let st: Awaited<ReturnType<typeof stat>>;
  try {
    st = await stat(spec.path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return fail(
      'path',
      `cannot read \`${shown}\` (${code === 'ENOENT' || code === 'ENOTDIR' ? 'file not found' : (code ?? 'error')}; resolved to ${spec.path})`,
    );
  }
  if (!st.isFile() && !st.isFIFO()) return fail('path', `\`${shown}\` is not a file (resolved to ${spec.path})`);

  const cfg: SourceConfig = { name: `lookup ${spec.name}`, path: spec.path, format: spec.format };
  if (spec.records !== undefined) cfg.records = spec.records;
  if (spec.csv !== undefined) cfg.csv = spec.csv;
  const notText = st.isFile() ? notTextReason(cfg, spec.format) : undefined;
  if (notText !== undefined) return { problems: [{ code: 'source-not-text', message: `\`${shown}\` is ${notText}. ${notTextHint(spec.format)}`, at: 'path' }] };

  const problems: LookupFileProblem[] = [];
  let header: string[] | undefined;
  if (spec.format === 'csv') {
    try {
      header = await readHeader(cfg);
    } catch (err) {
      return { problems: [await fatalProblem(spec, err)] };
    }
  }
  const key = reader(spec, 'key', spec.key, header, opts.timeoutMs, problems);
  const value = spec.value === undefined ? undefined : reader(spec, 'value', spec.value, header, opts.timeoutMs, problems);
  if (problems.length > 0 || key === undefined || (spec.value !== undefined && value === undefined)) return { problems };

  const inMemory = st.isFile() && st.size <= (opts.memoryMaxBytes ?? LOOKUP_MEMORY_MAX_BYTES);
  const sink = inMemory ? new MemorySink(spec.many) : new DiskSink(DiskLookup.create({ many: spec.many, parent: opts.tempDir }));
  const found = new RecordProblems();
  let records = 0;
  let coded = 0;
  const fields = new Set<string>(); // of the first records, for "did you mean"
  const drain = async (c: SourceConfig) => {
    for await (const item of openSource(c)) {
      records++;
      if (item.ok) {
        markSeen(key, item.data);
        markSeen(value, item.data);
        if (records <= COLUMN_SAMPLE_RECORDS) for (const f of Object.keys(item.data)) fields.add(f);
      }
      if (await addRecord(spec, item, key, value, sink, found)) coded++;
      if (found.kinds >= MAX_PROBLEMS) break;
    }
  };
  try {
    try {
      await drain(cfg);
    } catch (err) {
      // The JSON reader streams a plain `records` path only through objects; JSONata's `entry.resource` also
      // steps through arrays (a FHIR Bundle's `entry`): evaluated as an expression, it finds them.
      if (!(records === 0 && spec.records !== undefined && isRecordsNotFound(err))) throw err;
      await drain({ ...cfg, records: `(${spec.records})` });
    }
  } catch (err) {
    try {
      problems.push(await fatalProblem(spec, err));
    } catch (unexpected) {
      sink.discard();
      throw unexpected;
    }
  }
  // a name no record has is one problem, not one per record
  if (key.kind === 'name' && !key.seen && records > 0)
    problems.push({ code: 'lookup-column', message: `no record of \`${shown}\` has the property \`${key.name}\``, at: 'key' });
  else if (value?.kind === 'name' && !value.seen && records > 0)
    problems.push({ code: 'lookup-column', message: `no record of \`${shown}\` has the property \`${value.name}\``, at: 'value' });
  if (records > 0 && problems.length === 0 && found.kinds < MAX_PROBLEMS)
    problems.push(...unseenProblems(spec, key, 'key', fields), ...unseenProblems(spec, value, 'value', fields));
  problems.push(...found.list());
  if (problems.length === 0) {
    if (records === 0) problems.push({ code: 'lookup-file', message: `\`${shown}\` has no rows`, at: 'path' });
    else if (coded === 0) {
      problems.push({
        code: 'lookup-file',
        message: `\`key\` gave no code for any of the ${records} records of \`${shown}\`; check the expression against a record of the file`,
        at: 'key',
      });
    }
  }
  if (problems.length > 0) {
    sink.discard();
    return { problems };
  }
  return { table: sink.finish(), problems };
}

/**
 * Problems found in records, one per kind (a missing value, a duplicate code, a reject reason…): the first
 * occurrence names its row / line, the others are counted, so one mistake repeated in every record of a large
 * file is one line of output.
 */
class RecordProblems {
  readonly #byKind = new Map<string, { problem: LookupFileProblem; noun: string; more: number }>();
  get kinds(): number {
    return this.#byKind.size;
  }
  add(kind: string, problem: LookupFileProblem, noun = 'records'): void {
    const seen = this.#byKind.get(kind);
    if (seen) seen.more++;
    else this.#byKind.set(kind, { problem, noun, more: 0 });
  }
  list(): LookupFileProblem[] {
    return [...this.#byKind.values()].map(({ problem, noun, more }) =>
      more === 0 ? problem : { ...problem, message: `${problem.message} (and ${more} more ${noun} like it)` },
    );
  }
}

function compiledFn(expr: jsonata.Expression): CompiledExpression | undefined {
  const r = compilerEnabled() ? mappingExpressionCompiler({ tableNames: new WeakMap(), lookups: {} })(expr) : undefined;
  return r?.ok ? r.fn : undefined;
}

function isRecordsNotFound(err: unknown): boolean {
  return err instanceof CareEtlError && err.issues.some((i) => i.code === 'json-records') && / not found in the document$/.test(err.message);
}

function fail(at: LookupFileProblem['at'], message: string): { problems: LookupFileProblem[] } {
  return { problems: [{ code: 'lookup-file', message, at }] };
}

/** A column / property name, or a compiled JSONata expression; undefined (with a problem) when it is neither. */
function reader(
  spec: LookupFileSpec,
  role: 'key' | 'value',
  src: string,
  header: string[] | undefined,
  timeoutMs: number,
  problems: LookupFileProblem[],
): Reader | undefined {
  if (header?.includes(src)) return { kind: 'name', name: src, seen: true };
  const columns = header ? ` (columns: ${header.slice(0, 12).join(', ')}${header.length > 12 ? ', …' : ''})` : '';
  if (PLAIN_NAME.test(src)) {
    if (header) {
      problems.push({ code: 'lookup-column', message: `\`${spec.shown}\` has no column \`${src}\`${columns}`, at: role });
      return undefined;
    }
    return { kind: 'name', name: src, seen: false };
  }
  try {
    const expr = jsonataExpression(src, timeoutMs > 0 ? { ...JSONATA_OPTIONS, timeout: timeoutMs } : { ...JSONATA_OPTIONS });
    const unsupported = regexProblems(src, expr.ast());
    if (unsupported.length) {
      for (const p of unsupported) problems.push({ code: p.code, message: `\`${role}\`: ${p.message}`, at: role, offset: p.offset });
      return undefined;
    }
    registerFunctions(expr, { tableNames: new WeakMap() });
    const unseen = unseenFields(spec, role, src, expr, header, problems);
    if (unseen === undefined) return undefined;
    // the common subset (paths, filters, built-ins) as a JS closure, as for the maps: ~4× faster on large files
    return {
      kind: 'expr',
      src,
      expr,
      compiled: compiledFn(expr),
      unseen,
    };
  } catch (err) {
    const e = err as { message?: string; code?: string };
    const what = header ? `is not a column of \`${spec.shown}\`${columns} nor a valid JSONata expression` : 'is not a valid JSONata expression';
    // `Role Code` in a JSON file: a name with spaces is a JSONata name only in backquotes
    const tip = !header && /^[\p{L}\p{N}_ ]+$/u.test(src) ? `; a property name with spaces is written in backquotes: ${role}: '\`${src}\`'` : '';
    problems.push({
      code: 'jsonata-syntax',
      message: `\`${role}\` ${what}: ${e.message ?? String(err)}${e.code ? ` [${e.code}]` : ''}${tip}`,
      at: role,
      offset: errorOffset(src, e as object),
    });
    return undefined;
  }
}

/**
 * The column contract of a `key` / `value` expression (row-fields.ts): a CSV lookup's fields must be columns of
 * its header (a problem each, undefined); a JSON / NDJSON lookup's fields (name → offset) must each be in some
 * record — checked as the file is read (`markSeen`, `unseenProblems`). `$exists(FIELD)` makes FIELD optional there.
 */
function unseenFields(
  spec: LookupFileSpec,
  role: 'key' | 'value',
  src: string,
  expr: jsonata.Expression,
  header: string[] | undefined,
  problems: LookupFileProblem[],
): Map<string, number> | undefined {
  const { reads, existsGuarded } = rowFieldReads(src, expr.ast());
  const unseen = new Map<string, number>();
  let missing = 0;
  for (const r of reads) {
    if (spec.optional?.includes(r.name)) continue;
    if (header) {
      if (header.includes(r.name)) continue;
      const near = closestColumn(r.name, header);
      problems.push({
        code: 'column-missing',
        message: `\`${role}\` reads \`${r.name}\`, but \`${spec.shown}\` has no such column; ${near ? `did you mean \`${near}\`?` : `its columns are ${header.slice(0, 12).join(', ')}${header.length > 12 ? ', …' : ''}`}`,
        at: role,
        offset: r.offset,
      });
      missing++;
    } else if (!existsGuarded.has(r.name) && !unseen.has(r.name)) unseen.set(r.name, r.offset);
  }
  return missing ? undefined : unseen;
}

function markSeen(r: Reader | undefined, data: Record<string, unknown>): void {
  if (r?.kind !== 'expr' || r.unseen.size === 0) return;
  for (const name of r.unseen.keys()) if (Object.prototype.hasOwnProperty.call(data, name)) r.unseen.delete(name);
}

function unseenProblems(spec: LookupFileSpec, r: Reader | undefined, role: 'key' | 'value', fields: Set<string>): LookupFileProblem[] {
  if (r?.kind !== 'expr') return [];
  return [...r.unseen].map(([name, offset]) => {
    const near = closestColumn(name, [...fields]);
    return {
      code: 'column-missing' as const,
      message: `\`${role}\` reads \`${name}\`, but no record of \`${spec.shown}\` has it${near ? `; did you mean \`${near}\`?` : ''}`,
      at: role,
      offset,
    };
  });
}

/** `row 4` (CSV: the line), `line 12` (NDJSON), `element 3` (JSON). */
function where(format: SourceFormat, origin: { line?: number; record: number }): string {
  if (format === 'json' || origin.line === undefined) return `element ${origin.record}`;
  return `${format === 'csv' ? 'row' : 'line'} ${origin.line}`;
}

async function read(r: Reader, data: Record<string, unknown>): Promise<unknown> {
  if (r.kind === 'name') {
    if (!Object.prototype.hasOwnProperty.call(data, r.name)) return undefined;
    r.seen = true;
    return data[r.name];
  }
  if (r.compiled) {
    try {
      return r.compiled(data);
    } catch {
      // the closure bailed on this record: the interpreter decides (and words any error)
    }
  }
  return r.expr.evaluate(data);
}

/** The codes a key gives: text, numbers and booleans as text, each element of an array; blank ones skipped. */
function codesOf(v: unknown): string[] | 'object' {
  if (v === undefined || v === null || v === '') return [];
  if (typeof v === 'string') return [v];
  if (typeof v === 'number' || typeof v === 'boolean') return [String(v)];
  if (Array.isArray(v)) {
    const out: string[] = [];
    for (const x of v) {
      const c = codesOf(x);
      if (c === 'object') return c;
      out.push(...c);
    }
    return out;
  }
  return 'object';
}

/** Adds one record; returns true when it gave at least one code. */
async function addRecord(spec: LookupFileSpec, item: SourceItem, key: Reader, value: Reader | undefined, sink: Sink, found: RecordProblems): Promise<boolean> {
  const at = where(spec.format, item.origin);
  if (!item.ok) {
    for (const i of item.issues)
      found.add(`reject ${i.code} ${i.message}`, { code: 'lookup-file', message: `\`${spec.shown}\` ${at}: ${i.message}`, at: 'path' });
    return false;
  }
  const evaluate = async (r: Reader, role: 'key' | 'value'): Promise<{ v?: unknown; failed?: true }> => {
    try {
      return { v: await read(r, item.data) };
    } catch (err) {
      const e = err as { message?: string; code?: string; value?: unknown; value2?: unknown };
      const src = r.kind === 'expr' ? r.src : '';
      // JSONata's messages quote the offending value (`Unable to cast value to a number: "Okafor"`): a cell of the file
      const reason = `${redactValues(e.message ?? String(err), [e.value, e.value2])}${e.code ? ` [${e.code}]` : ''}`;
      found.add(`${role} failed ${reason}`, {
        code: 'jsonata',
        message: `\`${spec.shown}\` ${at}: \`${role}\` failed: ${reason}`,
        at: role,
        offset: errorOffset(src, e as object),
      });
      return { failed: true };
    }
  };
  const k = await evaluate(key, 'key');
  if (k.failed) return false;
  const codes = codesOf(k.v);
  if (codes === 'object') {
    found.add('key-object', {
      code: 'key-invalid',
      message: `\`${spec.shown}\` ${at}: \`key\` gave an object; a code is text (or an array of texts)`,
      at: 'key',
    });
    return false;
  }
  if (codes.length === 0) return false;
  let v: unknown = item.data;
  if (value) {
    const r = await evaluate(value, 'value');
    if (r.failed) return false;
    v = r.v;
    // nothing (a property some records lack: a date of death) skips the record; a name no record has is an error
    if (v === undefined || v === null) return false;
    if (typeof v === 'number' || typeof v === 'boolean') v = String(v); // values are text, as codes are
  }
  for (const code of new Set(codes)) {
    const { duplicateOf } = sink.add(code, v, at);
    if (duplicateOf !== undefined) {
      found.add(
        'duplicate',
        {
          code: 'lookup-duplicate',
          message: `\`${spec.shown}\` ${at}: code \`${show(code)}\` appears twice with different values (first at ${duplicateOf}); keep one, or set \`many: true\` to collect every value of a code`,
          at: 'key',
        },
        'codes',
      );
    }
  }
  return true;
}

/** A fatal reader error as a problem; a JSON file that holds NDJSON says so. */
async function fatalProblem(spec: LookupFileSpec, err: unknown): Promise<LookupFileProblem> {
  if (spec.format === 'json' && (await looksLikeNdjson(spec.path))) {
    return { code: 'source-format', message: ndjsonInJsonMessage(spec.shown), at: spec.formatDeclared ? 'format' : 'path' };
  }
  if (err instanceof CareEtlError) {
    const issue = err.issues[0];
    const line = issue?.location?.line;
    const reason = issue?.message ?? err.message;
    return {
      code: 'lookup-file',
      message: `\`${spec.shown}\`${line !== undefined ? ` line ${line}` : ''}: ${reason}${err.hint ? ` (${err.hint.replace(/\.$/, '')})` : ''}`,
      at: 'path',
    };
  }
  throw err;
}

interface Sink {
  add(code: string, value: unknown, at: string): { duplicateOf?: string };
  finish(): LookupTable;
  discard(): void;
}

class MemorySink implements Sink {
  readonly #table: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  readonly #origins = new Map<string, string>();
  constructor(readonly many: boolean) {}

  add(code: string, value: unknown, at: string): { duplicateOf?: string } {
    const t = this.#table;
    if (this.many) {
      const list = t[code] as unknown[] | undefined;
      if (list) list.push(value);
      else t[code] = [value];
      return {};
    }
    if (!Object.prototype.hasOwnProperty.call(t, code)) {
      t[code] = value;
      this.#origins.set(code, at);
      return {};
    }
    const same = typeof value === 'string' ? t[code] === value : JSON.stringify(t[code]) === JSON.stringify(value);
    return same ? {} : { duplicateOf: this.#origins.get(code) };
  }

  finish(): LookupTable {
    return this.#table;
  }

  discard(): void {}
}

class DiskSink implements Sink {
  constructor(readonly index: DiskLookup) {}
  add(code: string, value: unknown, at: string): { duplicateOf?: string } {
    return this.index.add(code, JSON.stringify(value), at);
  }
  finish(): LookupTable {
    this.index.finish();
    return this.index;
  }
  discard(): void {
    this.index.close();
  }
}
