/**
 * One studio: a mapping file, its sample of each source and the last compiled text. What does not change between
 * two edits is kept — the source rows (sample-cache.ts), the schema validators (compiled once per process), the
 * compiled text while it is the same (paging, search) — so an edit costs one compile and one pass over the sample.
 */
import { readFile } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { closeLookups } from '../mapping/load-mapping.js';
import { issue } from '../core/issues.js';
import { compileText, offlineEnv, type CompiledText } from './compile-text.js';
import { diagsOf } from './diagnostics.js';
import { evaluateRows, type EvaluatedRow, type RowEvaluation, type RowInContext } from './row-results.js';
import { createSampleCache, filesStamp } from './sample-cache.js';
import { sha256 } from './save-file.js';
import { testFileFor } from './test-case.js';
import type { Diag, EvaluateRequest, EvaluateResponse, MappingDoc, RowResult } from './types.js';

export const DEFAULT_SAMPLE_SIZE = 1000;
const MAX_SAMPLE_SIZE = 100_000;
const DEFAULT_PAGE = 50;
const MAX_PAGE = 1000;

export interface StudioOptions {
  /** The mapping file, as given (relative to `cwd`). */
  mappingFile: string;
  cwd?: string;
  /** Rows sampled from each source (default 1,000). */
  sampleSize?: number;
  /** Variables for `${VAR}` (default `process.env`); connection variables are always replaced by placeholders. */
  env?: NodeJS.ProcessEnv;
  /** `$now()` of every evaluation (default: when the studio started), so a refresh never changes a resource by itself. */
  now?: Date;
}

export interface StudioSession {
  readonly file: string;
  readonly shownPath: string;
  readonly sampleSize: number;
  readonly now: Date;
  readMapping(): Promise<MappingDoc>;
  evaluate(req: EvaluateRequest): Promise<EvaluateResponse>;
  /** The evaluated row `index` of `resource` for `text`; undefined with the reason when there is none. */
  rowOf(text: string, resource: string, index: number): Promise<RowInContext | { problem: string }>;
  /** The path shown for a file: relative to the working folder when inside it. */
  shown(path: string): string;
  close(): void;
}

interface Evaluated {
  compiledText: CompiledText;
  resource: string | null;
  rows: readonly EvaluatedRow[];
  totals: RowEvaluation['totals'];
  /** Problems reading the chosen resource's source. */
  sourceErrors: Diag[];
}

/** Text → its evaluation, keeping the last compiled text, the last evaluation and the samples between calls. */
function createEvaluator(mappingFile: string, env: NodeJS.ProcessEnv, now: Date) {
  const samples = createSampleCache();
  let lastCompile: { text: string; result: Promise<CompiledText> } | undefined;
  let lastEval: { id: string; items: unknown; compiled: CompiledText; result: Evaluated } | undefined;
  const closeCompiled = (p: Promise<CompiledText> | undefined) => void p?.then((c) => c.compiled && closeLookups(c.compiled.mapping.lookups));

  // The same text compiles to the same result while its sources and lookup files stay the same.
  const compiledFor = async (text: string): Promise<CompiledText> => {
    if (lastCompile?.text === text) {
      const same = await lastCompile.result.then(
        async (c) => (await filesStamp(c.files)) === c.stamp,
        () => false,
      );
      if (same) return lastCompile.result;
    }
    closeCompiled(lastCompile?.result); // the lookups of the text before (an on-disk index): closed once it is replaced
    const result = compileText(mappingFile, text, env, samples);
    lastCompile = { text, result };
    return result;
  };

  const evaluated = async (text: string, wanted: string | undefined, size: number): Promise<Evaluated> => {
    const compiledText = await compiledFor(text);
    const { compiled } = compiledText;
    const empty = { sampled: 0, loaded: 0, rejected: 0, skipped: 0 };
    if (!compiled) return { compiledText, resource: null, rows: [], totals: empty, sourceErrors: [] };
    const names = compiled.mapping.resources.map((r) => r.name);
    const resource = wanted !== undefined && names.includes(wanted) ? wanted : (names[0] ?? null);
    if (resource === null) return { compiledText, resource, rows: [], totals: empty, sourceErrors: [] };
    const def = compiled.resources.get(resource)!.def;
    const source = compiled.mapping.sources[def.from]!;
    let items;
    try {
      items = await samples.sample(source, size);
    } catch (err) {
      const message = `source \`${def.from}\`: cannot read ${source.path}: ${(err as Error).message}`;
      const at = compiled.mapping.positionOf(['sources', def.from, 'path']);
      return { compiledText, resource, rows: [], totals: empty, sourceErrors: diagsOf([issue.error('source-missing', message, { location: at })], text) };
    }
    const id = JSON.stringify([text, resource, size]);
    if (lastEval?.id === id && lastEval.items === items && lastEval.compiled === compiledText) return lastEval.result;
    const { rows, totals } = await evaluateRows(compiled, resource, items, now);
    const result = { compiledText, resource, rows, totals, sourceErrors: [] };
    lastEval = { id, items, compiled: compiledText, result };
    return result;
  };

  return {
    samples,
    evaluated,
    close() {
      closeCompiled(lastCompile?.result);
      lastCompile = undefined;
      lastEval = undefined;
    },
  };
}

export function createStudioSession(opts: StudioOptions): StudioSession {
  const cwd = opts.cwd ?? process.cwd();
  const file = resolve(cwd, opts.mappingFile);
  const sampleSize = opts.sampleSize ?? DEFAULT_SAMPLE_SIZE;
  const now = opts.now ?? new Date();
  const { samples, evaluated, close } = createEvaluator(opts.mappingFile, offlineEnv(opts.env), now);
  const shown = (p: string) => {
    const rel = relative(cwd, p);
    return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : p;
  };

  return {
    file,
    shownPath: opts.mappingFile,
    sampleSize,
    now,
    shown,
    async readMapping() {
      const bytes = await readFile(file);
      return { path: opts.mappingFile, text: bytes.toString('utf8'), hash: sha256(bytes), testFile: shown(await testFileFor(file)), sampleSize };
    },
    async evaluate(req) {
      const started = performance.now();
      const size = clampInt(req.sampleSize, 1, MAX_SAMPLE_SIZE, sampleSize);
      const ev = await evaluated(req.text, req.resource, size);
      const { compiled } = ev.compiledText;
      const resources = ev.compiledText.resources.map((r) => {
        const src = compiled?.mapping.sources[r.source];
        const rows = src ? samples.sampled(src, size) : undefined;
        return rows === undefined ? r : { ...r, rows };
      });
      const limit = clampInt(req.limit, 1, MAX_PAGE, DEFAULT_PAGE);
      const { rows, offset, total } = pageOf(ev.rows, {
        search: req.search,
        line: req.line,
        offset: clampInt(req.offset, 0, Number.MAX_SAFE_INTEGER, 0),
        limit,
      });
      return {
        errors: [...ev.compiledText.errors, ...ev.sourceErrors],
        resources,
        resource: ev.resource,
        totals: ev.totals,
        rows: rows.map(publicRow),
        page: { offset, limit, total },
        elapsedMs: Math.round((performance.now() - started) * 10) / 10,
      };
    },
    async rowOf(text, resource, index) {
      // The page may have asked for a larger sample: rows are the same from the start of the file, only more.
      const ev = await evaluated(text, resource, clampInt(index + 1, sampleSize, MAX_SAMPLE_SIZE, sampleSize));
      const compiled = ev.compiledText.compiled;
      if (!compiled) return { problem: 'the mapping has errors: fix them first' };
      if (ev.resource !== resource) return { problem: `\`${resource}\` is not a resource mapping of this text` };
      const row = ev.rows[index];
      if (!row) return { problem: `no row ${index} in the sample of \`${resource}\` (${ev.rows.length} rows)` };
      return { row, rows: ev.rows, compiled, resource };
    },
    close,
  };
}

function clampInt(v: unknown, min: number, max: number, fallback: number): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) return fallback;
  return Math.min(max, Math.max(min, Math.trunc(v)));
}

/** Without the studio's own bookkeeping. */
function publicRow(r: EvaluatedRow): RowResult {
  const { group: _group, rejectedBy: _rejectedBy, ...row } = r;
  return row;
}

/** `search` (key, else any cell, case-insensitive), then the page: from the row at `line` (or the first after it), else `offset`. */
export function pageOf(
  all: readonly EvaluatedRow[],
  q: { search?: string; line?: number; offset: number; limit: number },
): { rows: EvaluatedRow[]; offset: number; total: number } {
  const needle = typeof q.search === 'string' ? q.search.trim().toLowerCase() : '';
  const kept = needle ? all.filter((r) => r.key.toLowerCase().includes(needle) || cellsContain(r.input, needle)) : all;
  let offset = q.offset;
  if (typeof q.line === 'number' && Number.isFinite(q.line)) {
    const at = kept.findIndex((r) => r.line >= q.line!);
    offset = at === -1 ? Math.max(0, kept.length - 1) : at;
  }
  offset = Math.min(offset, Math.max(0, kept.length - 1));
  return { rows: kept.slice(offset, offset + q.limit), offset, total: kept.length };
}

function cellsContain(v: unknown, needle: string): boolean {
  if (v === null || v === undefined) return false;
  if (typeof v === 'object') return Object.values(v).some((x) => cellsContain(x, needle));
  return String(v).toLowerCase().includes(needle);
}
