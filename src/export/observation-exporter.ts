/**
 * `exportObservations`: every Observation of the tenant → one row each (CSV or NDJSON), streamed page by page
 * with bounded memory; `since: 'last'` watermark with an overlap window and delivered-ids dedupe.
 * Design: docs/design/export.md.
 */
import { tmpdir } from 'node:os';
import type { Writable } from 'node:stream';
import type { CareClient, ListOptions } from '../api/client.js';
import type { Bundle, Resource } from '../api/types.js';
import { CareEtlError, ExitCode, issue } from '../core/issues.js';
import type { CompiledExport, ExportContext } from '../mapping/compile-mapping.js';
import { contentHash } from '../core/content-hash.js';
import { isStorableText } from '../core/state-text.js';
import type { LedgerScope } from '../state/ledger.js';
import { defaultExport, DEFAULT_COLUMN_TYPES, DEFAULT_EXPORT_NAME } from './default-columns.js';
import { ColumnTypes, DEFAULT_COLUMN_DOCS, WIDE_COLUMN_DOCS, wideInstrumentEntry, withValueFormats, type DictionaryEntry } from './dictionary.js';
import { pseudonymizeObservation, type Pseudonymizer } from './pseudonymize.js';
import { parseReference, SourceKeys } from './references.js';
import type { ColumnNameStyle } from './column-names.js';
import { openRowSink, type ExportFormat, type Sink } from './row-sink.js';
import { WIDE_COLUMN_TYPES, WIDE_EXPORT_NAME, WIDE_SCORE_TYPE, WideSpool } from './wide-layout.js';

export type ExportLayout = 'long' | 'wide';
export const EXPORT_LAYOUTS: readonly ExportLayout[] = ['long', 'wide'];

/** Where a custom column comes from (the data dictionary's `source`). */
export interface ColumnSource {
  expr: string;
  /** `file:line:column` of the expression. */
  at?: string;
}

export interface ExportProgress {
  pages: number;
  /** Observations read from the server. */
  scanned: number;
  /** Rows written (after the filters). */
  rows: number;
  /** Wide layout: observations spooled so far (the rows are written after the last page). */
  spooled?: number;
}

export interface ExportObservationsOptions {
  client: Pick<CareClient, 'pages'>;
  /** Source keys (`$sourceKey`, the `patient_source_key` column, `patients`) and the `since: 'last'` watermark. */
  scope?: LedgerScope;
  /** The columns (mapping `exports:` entry or `--columns` file); default: the built-in default columns. */
  columns?: CompiledExport;
  output: Writable;
  /** End `output` when done (default true; pass false for process.stdout). */
  endOutput?: boolean;
  format?: ExportFormat;
  /** CSV: UTF-8 BOM for Excel. */
  bom?: boolean;
  /** CSV: neutralise formula-like text cells (default true; never applied to other formats). */
  escapeFormulas?: boolean;
  /** Wide layout: instrument column names, `original` or `snake` (default `original`; long columns are renamed by the caller). */
  columnNames?: ColumnNameStyle;
  /** Lower bound on `meta.lastUpdated` (inclusive): an ISO date / date-time, a Date, or `'last'` (the watermark). */
  since?: string | Date;
  /** `since: 'last'`: how far before the previous export's start the next one starts again (default 60 000 ms). */
  overlapMs?: number;
  /** Watermark name in the ledger scope (default `export:<columns.name>`, plus the filters when there are some). */
  watermarkName?: string;
  /** Only observations whose subject has one of these source keys (e.g. MRNs). */
  patients?: readonly string[];
  /** Patient mappings of the mapping file: when given, every key of `patients` must be in the ledger. */
  patientMappings?: readonly string[];
  /** Query parameters of the first request. */
  query?: Record<string, string>;
  /** `_count` of the first request (server default when undefined). */
  pageSize?: number;
  retry?: ListOptions['retry'];
  /** `long` (default): one row per observation; `wide`: one row per patient and day (built-in columns only). */
  layout?: ExportLayout;
  /** Pseudonymise ids, source keys and references, drop free text (pseudonymize.ts). */
  pseudonymizer?: Pseudonymizer;
  /** With `pseudonymizer`: keep free-text fields (valueString, note, reference displays). */
  keepFreeText?: boolean;
  /** `layout: 'wide'`: folder for the private spool folder (default the OS temp folder). */
  tempDir?: string;
  /** Expressions of custom columns by name, for the data dictionary. */
  columnSources?: ReadonlyMap<string, ColumnSource>;
  /**
   * Called once the output is flushed, before the watermark moves (e.g. rename `<out>.partial` → `<out>`,
   * write the data dictionary, which it receives).
   */
  finalize?: (done: { dictionary: DictionaryEntry[]; report: Readonly<ExportReport> }) => Promise<void>;
  onProgress?: (p: ExportProgress) => void;
  signal?: AbortSignal;
  now?: () => Date;
}

export interface ExportReport {
  export: string;
  format: ExportFormat;
  layout: ExportLayout;
  pseudonymized: boolean;
  columns: string[];
  /** Rows written: observations (long), patient-days (wide). */
  rows: number;
  /** Observations that went into the output (long: = rows; wide: merged into the rows). */
  observations: number;
  pages: number;
  scanned: number;
  /** `since: 'last'`: observations skipped because the previous export delivered the same id and version. */
  alreadyDelivered: number;
  /** `since: 'last'`: observations remembered (inside the next overlap window) so the next export can skip them. */
  remembered: number;
  /** Wide layout: observations left out (subject not a Patient, or neither a coding nor a `code.text`). */
  unplaced: number;
  /** Wide layout: columns keyed by `code.text` that merged several spellings (case, spaces, line breaks). */
  mergedTexts: number;
  /** Whether formula-like text cells were prefixed with `'` (CSV only). */
  escapeFormulas: boolean;
  /** Observations without a readable `meta.lastUpdated` (kept by the `since` filter). */
  undated: number;
  /** Effective lower bound on `meta.lastUpdated` (ISO), null when everything was exported. */
  since: string | null;
  /** `'last'` when the bound came from the watermark (`null` since = no watermark yet: full export). */
  sinceMode: 'none' | 'date' | 'last';
  watermarkName: string;
  /** Where the next `since: 'last'` export starts; saved only when `watermarkSaved`. */
  watermark: string;
  watermarkSaved: boolean;
  startedAt: string;
  finishedAt: string;
  durationMs: number;
}

export const DEFAULT_OVERLAP_MS = 60_000;

const ISO_DATE = /^\d{4}-\d{2}-\d{2}$/;
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;

/** An ISO date (midnight UTC) or date-time with a zone → epoch ms; a CareEtlError (exit 2) otherwise. */
export function parseSince(value: string, flag = '--since'): number {
  const ok = ISO_DATE.test(value) || ISO_DATE_TIME.test(value);
  const ms = ok ? Date.parse(ISO_DATE.test(value) ? `${value}T00:00:00Z` : value) : NaN;
  if (Number.isNaN(ms)) {
    const noZone = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(value);
    throw new CareEtlError(
      `Expected \`${flag}\` to be \`last\`, an ISO date (2024-05-01) or a date-time with a zone (2024-05-01T08:00:00Z), got \`${value}\`${noZone ? ' (add Z or an offset such as +02:00)' : ''}`,
      { exitCode: ExitCode.config },
    );
  }
  return ms;
}

/**
 * `export:<name>`, plus the filters: a filtered export has its own watermark (it did not see the rest); so has a
 * pseudonymised one (a different deliverable). The wide layout's name is `wide`.
 */
export function watermarkNameOf(
  exportName: string,
  filters: { patients?: readonly string[]; query?: Record<string, string>; pseudonymized?: boolean } = {},
): string {
  const parts: string[] = [];
  if (filters.patients?.length) parts.push(`patient=${[...new Set(filters.patients)].sort().join(',')}`);
  for (const k of Object.keys(filters.query ?? {}).sort()) parts.push(`${k}=${filters.query![k]}`);
  if (filters.pseudonymized) parts.push('pseudonymized');
  return `export:${exportName}${parts.length ? `?${parts.join('&')}` : ''}`;
}

/** Runs one page ahead of the consumer: page n+1 is requested while page n is written. */
async function* aheadByOne<T>(it: AsyncIterator<T>): AsyncGenerator<T> {
  let pending = it.next();
  pending.catch(() => {}); // observed below
  try {
    for (;;) {
      const r = await pending;
      if (r.done) return;
      pending = it.next();
      pending.catch(() => {});
      // Let the request leave before the page is processed: rows are evaluated in microtasks, which would
      // otherwise hold the socket write back until the whole page is written.
      await new Promise<void>((resolve) => setImmediate(resolve));
      yield r.value;
    }
  } finally {
    await it.return?.(undefined)?.catch(() => {});
  }
}

const observationId = (o: Resource): string => (typeof o.id === 'string' ? o.id : '(no id)');

/**
 * What "the same version" means for the delivered set: versionId + lastUpdated, else a content hash — also when they
 * make text the state cannot hold (a NUL, a megabyte: src/core/state-text.ts), which failed every `--since last`.
 */
export function versionFingerprint(o: Resource): string {
  const v = typeof o.meta?.versionId === 'string' ? o.meta.versionId : '';
  const u = typeof o.meta?.lastUpdated === 'string' ? o.meta.lastUpdated : '';
  const stamp = v || u ? `${v}|${u}` : undefined;
  return isStorableText(stamp) ? stamp : `sha256:${contentHash(o)}`;
}

/** One export in progress: its options resolved, its report, and where its rows go. */
interface ExportRun {
  opts: ExportObservationsOptions;
  report: ExportReport;
  started: Date;
  columns: CompiledExport;
  longColumns: string[];
  overlapMs: number;
  watermarkName: string;
  /** Lower bound on `meta.lastUpdated` (ms), when there is one. */
  sinceMs?: number;
  patients?: Set<string>;
  keys: SourceKeys;
  plainCtx: ExportContext;
  pseudo?: Pseudonymizer;
  keepFreeText: boolean;
  /** `since: 'last'`: the scope holding the delivered set. */
  dedupe?: LedgerScope;
  lookUpDelivered: boolean;
  /** Delivered observations of the current page, staged in the ledger at the end of the page. */
  staged: { id: string; version: string }[];
  sinkOptions: { format: ExportFormat; bom?: boolean; escapeFormulas?: boolean; end?: boolean };
  sink?: Sink;
  spool?: WideSpool;
  types: ColumnTypes;
  /** Aborts the page requested ahead when the export fails for another reason. */
  stop: AbortController;
  signal: AbortSignal;
}

export async function exportObservations(opts: ExportObservationsOptions): Promise<ExportReport> {
  const now = opts.now ?? (() => new Date());
  const started = now();
  const t0 = performance.now();
  const run = openExport(opts, started);
  const { report, overlapMs } = run;
  let listStart: number | undefined;
  try {
    opts.signal?.throwIfAborted();
    if (report.layout === 'wide') run.spool = WideSpool.open(opts.tempDir ?? tmpdir(), opts.columnNames);
    const pages = opts.client.pages<Resource>('Observation', { query: opts.query, pageSize: opts.pageSize, signal: run.signal, retry: opts.retry });
    for await (const bundle of aheadByOne<Bundle<Resource>>(pages)) {
      report.pages++;
      if (listStart === undefined) {
        const server = Date.parse(bundle.meta?.lastUpdated ?? '');
        listStart = Number.isNaN(server) ? started.getTime() : server;
      }
      const nextSince = listStart - overlapMs;
      for (const entry of bundle.entry ?? []) {
        const obs = entry?.resource;
        if (!obs || typeof obs !== 'object' || obs.resourceType !== 'Observation') continue;
        await exportOne(run, obs, nextSince);
      }
      run.spool?.flush();
      if (run.staged.length) {
        run.dedupe!.stageDelivered(run.watermarkName, run.staged);
        report.remembered += run.staged.length;
        run.staged = [];
      }
      opts.onProgress?.({ pages: report.pages, scanned: report.scanned, rows: report.rows, ...(run.spool ? { spooled: report.observations } : {}) });
      opts.signal?.throwIfAborted();
    }
    if (run.spool) await writeWideRows(run, run.spool);
    await run.sink!.end();
    await opts.finalize?.({
      dictionary: withValueFormats(dictionaryOf(report, run.types, run.spool, opts.columnSources, run.keepFreeText), run.types),
      report,
    });
  } catch (err) {
    run.stop.abort();
    if (run.sink) await run.sink.abort();
    else if (opts.endOutput !== false) opts.output.destroy(); // wide layout failing before its first row
    try {
      run.dedupe?.discardStagedDelivered(run.watermarkName);
    } catch {
      // the export's own error matters more
    }
    throw asExportFailure(opts.signal?.aborted ? (opts.signal.reason ?? err) : err, report);
  } finally {
    run.spool?.close();
  }

  report.watermark = new Date((listStart ?? started.getTime()) - overlapMs).toISOString();
  if (report.sinceMode === 'last' && opts.scope) {
    const scope = opts.scope;
    scope.transaction(() => {
      scope.commitDelivered(run.watermarkName);
      scope.setWatermark(run.watermarkName, report.watermark);
    });
    report.watermarkSaved = true;
  }
  const finished = now();
  report.finishedAt = finished.toISOString();
  report.durationMs = Math.round(performance.now() - t0);
  return report;
}

/** Checks the options (configuration errors before any request) and sets the export up. */
function openExport(opts: ExportObservationsOptions, started: Date): ExportRun {
  const layout = opts.layout ?? 'long';
  if (!EXPORT_LAYOUTS.includes(layout))
    throw new CareEtlError(`Expected the layout to be one of ${EXPORT_LAYOUTS.join(', ')}, got \`${String(layout)}\``, { exitCode: ExitCode.config });
  if (layout === 'wide' && opts.columns && opts.columns.name !== DEFAULT_EXPORT_NAME) {
    throw new CareEtlError('The wide layout has its own columns (patient, date, one column per instrument): it takes no export name or columns file', {
      exitCode: ExitCode.config,
      hint: "Drop the columns, or use `layout: 'long'`.",
    });
  }
  const columns = opts.columns ?? defaultExport();
  const exportName = layout === 'wide' ? WIDE_EXPORT_NAME : columns.name;
  const format = opts.format ?? 'csv';
  const overlapMs = opts.overlapMs ?? DEFAULT_OVERLAP_MS;
  const patients = opts.patients?.length ? new Set(opts.patients) : undefined;
  const pseudo = opts.pseudonymizer;
  const watermarkName = opts.watermarkName ?? watermarkNameOf(exportName, { patients: opts.patients, query: opts.query, pseudonymized: pseudo !== undefined });
  if (!Number.isFinite(overlapMs) || overlapMs < 0) {
    throw new CareEtlError(`Expected the overlap to be a number of milliseconds ≥ 0, got \`${opts.overlapMs}\``, { exitCode: ExitCode.config });
  }
  const { sinceMs, sinceMode } = lowerBound(opts, watermarkName);
  if (patients && opts.patientMappings) checkPatients(patients, opts.patientMappings, opts.scope);

  // The delivered set (since: 'last'); a staged one was left by an export that crashed.
  const dedupe = sinceMode === 'last' ? opts.scope : undefined;
  dedupe?.discardStagedDelivered(watermarkName);
  const keys = new SourceKeys(opts.scope);
  const longColumns = [...columns.columns];
  const report = newExportReport(
    {
      export: exportName,
      format,
      layout,
      pseudonymized: pseudo !== undefined,
      columns: layout === 'long' ? longColumns : [],
      since: sinceMs === undefined ? null : new Date(sinceMs).toISOString(),
      sinceMode,
      watermarkName,
    },
    opts.escapeFormulas,
    started,
  );
  const sinkOptions = { format, bom: opts.bom, escapeFormulas: opts.escapeFormulas, end: opts.endOutput };
  const stop = new AbortController();
  return {
    opts,
    report,
    started,
    columns,
    longColumns,
    overlapMs,
    watermarkName,
    sinceMs,
    patients,
    keys,
    plainCtx: { now: started, sourceKey: (reference) => keys.of(reference) },
    pseudo,
    keepFreeText: pseudo !== undefined && opts.keepFreeText === true,
    dedupe,
    lookUpDelivered: dedupe !== undefined && dedupe.deliveredCount(watermarkName) > 0,
    staged: [],
    sinkOptions,
    sink:
      layout === 'long'
        ? openRowSink(opts.output, { ...sinkOptions, columns: longColumns, types: columns.name === DEFAULT_EXPORT_NAME ? DEFAULT_COLUMN_TYPES : undefined })
        : undefined,
    types: new ColumnTypes(),
    stop,
    signal: opts.signal ? AbortSignal.any([opts.signal, stop.signal]) : stop.signal,
  };
}

/** The lower bound on `meta.lastUpdated`: none, a date, or the watermark of the previous export (`'last'`). */
function lowerBound(opts: ExportObservationsOptions, watermarkName: string): { sinceMs?: number; sinceMode: ExportReport['sinceMode'] } {
  if (opts.since === 'last') {
    if (!opts.scope)
      throw new CareEtlError("Expected `scope` (the state ledger: it keeps the watermark) with `since: 'last'`, got none", { exitCode: ExitCode.config });
    const w = opts.scope.getWatermark(watermarkName);
    return { sinceMs: w === undefined ? undefined : parseSince(w, `the watermark ${watermarkName}`), sinceMode: 'last' };
  }
  if (opts.since instanceof Date) {
    const sinceMs = opts.since.getTime();
    if (Number.isNaN(sinceMs)) throw new CareEtlError('Expected `since` to be a valid date', { exitCode: ExitCode.config });
    return { sinceMs, sinceMode: 'date' };
  }
  if (typeof opts.since === 'string') return { sinceMs: parseSince(opts.since), sinceMode: 'date' };
  return { sinceMode: 'none' };
}

/** `--patient`: every key must be a patient the ledger knows (else the filter would silently export nothing of it). */
function checkPatients(patients: ReadonlySet<string>, mappings: readonly string[], scope: LedgerScope | undefined): void {
  if (!scope)
    throw new CareEtlError('Expected `scope` (the state ledger: it maps source keys to server ids) with `patients`, got none', { exitCode: ExitCode.config });
  if (mappings.length === 0) {
    throw new CareEtlError('`--patient` takes patient source keys, but the mapping file has no Patient mapping to resolve them', { exitCode: ExitCode.config });
  }
  const unknown = [...patients].filter((k) => !mappings.some((m) => scope.serverIdOf(m, k) !== undefined));
  if (unknown.length) {
    throw new CareEtlError(`No patient with source key ${unknown.map((k) => `\`${k}\``).join(', ')} in the state ledger`, {
      exitCode: ExitCode.config,
      hint: `--patient takes the source key (e.g. MRN) of a patient loaded by \`care-etl run\` into this server and tenant, with the same state file (mappings: ${mappings.join(', ')})`,
    });
  }
}

/** One observation of a page: filtered, remembered for the next `since: 'last'`, then written (long) or spooled (wide). */
async function exportOne(run: ExportRun, obs: Resource, nextSince: number): Promise<void> {
  const { report, sinceMs, patients, keys, dedupe } = run;
  report.scanned++;
  const updated = Date.parse(obs.meta?.lastUpdated ?? '');
  if (sinceMs !== undefined) {
    if (Number.isNaN(updated)) report.undated++;
    else if (updated < sinceMs) return;
  }
  if (patients) {
    const key = keys.of((obs.subject as { reference?: unknown } | undefined)?.reference);
    if (key === undefined || !patients.has(key)) return;
  }
  // Only an id the state can hold is remembered: the delivered set is keyed by it (PostgreSQL cannot store a NUL,
  // nor index a megabyte); another is exported again in the next overlap window.
  if (dedupe && isStorableText(obs.id)) {
    const version = versionFingerprint(obs);
    // Inside the next export's overlap window (or undated: always re-read): remember it.
    if (Number.isNaN(updated) || updated >= nextSince) run.staged.push({ id: obs.id, version });
    if (run.lookUpDelivered && dedupe.deliveredVersion(run.watermarkName, obs.id) === version) {
      report.alreadyDelivered++;
      return;
    }
  }
  const { input, ctx } = evaluationInput(run, obs);
  if (run.spool) {
    const subject = (input as { subject?: { reference?: unknown } }).subject?.reference;
    const ref = parseReference(subject);
    const patientId = ref?.type === 'Patient' ? ref.id : '';
    if (run.spool.add({ patientId, sourceKey: patientId ? ctx.sourceKey?.(subject as string) : undefined, observation: input as Record<string, unknown> }))
      report.observations++;
    return;
  }
  let row: Record<string, unknown>;
  try {
    row = await run.columns.evalRow(input, ctx);
  } catch (err) {
    // A MappingEvalError names the export, the column and its file:line:col in its issue.
    const e = err instanceof CareEtlError ? err : undefined;
    throw new CareEtlError(`Export \`${run.columns.name}\` failed at observation ${observationId(obs)} (after ${report.rows} rows)`, {
      issues: e?.issues.length ? e.issues : [issue.error('eval-failed', (err as Error)?.message ?? String(err))],
      exitCode: ExitCode.config,
      hint: 'Fix the column expression, e.g. guard odd values with a condition (`field ? … : ""`), then export again.',
      cause: err,
    });
  }
  run.types.see(row, run.longColumns);
  if (!run.sink!.write(row)) await run.sink!.drain(run.signal);
  report.rows++;
  report.observations++;
}

/** What the columns are evaluated on: the observation, or its pseudonymised copy (whose `$sourceKey` gives pseudonyms). */
function evaluationInput(run: ExportRun, obs: Resource): { input: unknown; ctx: ExportContext } {
  const { pseudo, keys } = run;
  if (!pseudo) return { input: obs, ctx: run.plainCtx };
  const p = pseudonymizeObservation(obs, pseudo, run.keepFreeText);
  return {
    input: p.observation,
    ctx: {
      now: run.started,
      sourceKey: (reference) => {
        const real = typeof reference === 'string' ? p.real.get(reference) : undefined;
        const key = real === undefined ? undefined : keys.of(real);
        return key === undefined ? undefined : pseudo.sourceKey(key);
      },
    },
  };
}

/** Wide layout, after the last page: one row per patient and day from the spool. */
async function writeWideRows(run: ExportRun, spool: WideSpool): Promise<void> {
  const { report, opts } = run;
  report.unplaced = spool.unplaced;
  report.mergedTexts = spool.mergedTexts();
  report.columns = spool.columns();
  const types = new Map(WIDE_COLUMN_TYPES);
  for (const i of spool.instruments()) types.set(i.name, WIDE_SCORE_TYPE);
  const sink = (run.sink = openRowSink(opts.output, { ...run.sinkOptions, columns: report.columns, types }));
  for (const row of spool.rows()) {
    run.types.see(row, report.columns);
    if (!sink.write(row)) await sink.drain(run.signal);
    report.rows++;
    if (report.rows % 10_000 === 0) opts.signal?.throwIfAborted();
  }
  opts.onProgress?.({ pages: report.pages, scanned: report.scanned, rows: report.rows, spooled: report.observations });
}

/** The data dictionary of what was written (dictionary.ts). */
function dictionaryOf(
  report: ExportReport,
  types: ColumnTypes,
  spool: WideSpool | undefined,
  sources: ReadonlyMap<string, ColumnSource> | undefined,
  keepFreeText: boolean,
): DictionaryEntry[] {
  const pseudo = report.pseudonymized;
  const note = pseudo ? ` (evaluated on the pseudonymised observation${keepFreeText ? ', free text kept' : ''})` : '';
  if (spool) {
    const instruments = new Map(spool.instruments().map((i) => [i.name, i]));
    return report.columns.map((name) => {
      const i = instruments.get(name);
      if (i) return wideInstrumentEntry(i, types.typeOf(name));
      const d = WIDE_COLUMN_DOCS[name]!;
      return { name, source: d.source, type: d.type, description: pseudo && d.pseudonymized ? d.pseudonymized : d.description };
    });
  }
  return report.columns.map((name) => {
    const custom = sources?.get(name);
    if (custom)
      return {
        name,
        source: custom.expr,
        type: types.typeOf(name),
        description: `column of export \`${report.export}\`${custom.at ? ` (${custom.at})` : ''}${note}`,
      };
    const d = report.export === DEFAULT_EXPORT_NAME ? DEFAULT_COLUMN_DOCS[name] : undefined;
    if (!d) return { name, source: '(expression not known)', type: types.typeOf(name), description: `column of export \`${report.export}\`${note}` };
    return { name, source: d.source, type: d.type ?? types.typeOf(name), description: pseudo && d.pseudonymized ? d.pseudonymized : d.description };
  });
}

/**
 * Configuration/authentication errors keep their exit code 2; everything else mid-export could not complete (3).
 * Shared with `export --view`, which has no watermark: `interruptedHint` says what a cancel left.
 */
export function asExportFailure(
  err: unknown,
  at: ExportReport,
  interruptedHint = 'Nothing was written to --out and the watermark did not move: export again.',
): CareEtlError {
  const where = `after ${at.rows} rows from ${at.pages} pages`;
  if ((err as { name?: string })?.name === 'AbortError') {
    return new CareEtlError(`Export interrupted ${where}`, { exitCode: ExitCode.incomplete, cause: err, hint: interruptedHint });
  }
  if (err instanceof CareEtlError) return err;
  const code = (err as { code?: unknown })?.code;
  const message = (err as Error)?.message ?? String(err);
  return new CareEtlError(`Export failed ${where}: ${message}${typeof code === 'string' && !message.includes(code) ? ` (${code})` : ''}`, {
    exitCode: ExitCode.incomplete,
    cause: err,
  });
}

/** A report before the first page: the export's identity, every count at zero. */
export function newExportReport(
  head: Pick<ExportReport, 'export' | 'format' | 'layout' | 'pseudonymized' | 'columns' | 'since' | 'sinceMode' | 'watermarkName'>,
  escapeFormulas: boolean | undefined,
  started: Date,
): ExportReport {
  return {
    ...head,
    rows: 0,
    observations: 0,
    pages: 0,
    scanned: 0,
    alreadyDelivered: 0,
    remembered: 0,
    unplaced: 0,
    mergedTexts: 0,
    escapeFormulas: head.format === 'csv' && escapeFormulas !== false,
    undated: 0,
    watermark: '',
    watermarkSaved: false,
    startedAt: started.toISOString(),
    finishedAt: '',
    durationMs: 0,
  };
}
