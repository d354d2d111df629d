/**
 * `care-etl export`: mapping file → columns → target (flags > CARE_* > `target:`, else the embedded sandbox
 * on `.care-etl/sandbox.db`) → ledger (`.care-etl/state.db`, scoped by server + tenant) → exportObservations.
 *
 * A file output is written to `<out>.partial` (mode 0600) and renamed to `<out>` only after the last row
 * is flushed (fsync), so a failed or interrupted export never looks complete: the partial file is removed
 * and `<out>` keeps its previous content, if any. The watermark moves after the rename. `--dictionary FILE` is
 * written just before that rename (it holds no patient data: ordinary mode). The wide layout's spool lives in
 * the state folder (`.care-etl/` beside the mapping: already private) and is removed when the export ends.
 * A pipe or a device as `<out>` (`>(gzip > obs.csv.gz)`, a FIFO: `outputKindOf`) is written in place as rows come.
 */
import { createWriteStream, renameSync, rmSync, type WriteStream } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { CareClient, type ClientOptions } from '../api/client.js';
import type { ConnectionInput } from '../api/connection.js';
import { CareEtlError, ExitCode, configError as config } from '../core/issues.js';
import { openPrivateFile, openStreamOutput, outputKindOf } from '../core/secure-fs.js';
import { closest } from '../mapping/closest.js';
import { compileMapping, type CompiledExport } from '../mapping/compile-mapping.js';
import { loadMapping } from '../mapping/load-mapping.js';
import { openTarget, type Target } from '../target/open-target.js';
import { Ledger } from '../state/ledger.js';
import { displayStateLocation, isPostgresLocation, resolveStateLocation } from '../state/state-location.js';
import { COLUMN_NAME_STYLES, defaultColumnNames, renameExport, type ColumnNameStyle } from './column-names.js';
import { columnSourcesOf, loadColumnsFile } from './columns-file.js';
import { DEFAULT_EXPORT_NAME, defaultExport } from './default-columns.js';
import { writeDictionary, type DataDictionary } from './dictionary.js';
import {
  EXPORT_LAYOUTS,
  exportObservations,
  parseSince,
  type ColumnSource,
  type ExportLayout,
  type ExportObservationsOptions,
  type ExportProgress,
  type ExportReport,
} from './observation-exporter.js';
import { Pseudonymizer, resolvePseudonymKey } from './pseudonymize.js';
import { EXPORT_FORMATS, type ExportFormat } from './row-sink.js';
import { writeTablePackage } from './table-schema.js';
import { exportView } from './view/export-view.js';
import { loadView } from './view/load-view.js';

export interface RunExportOptions {
  mappingFile: string;
  /** Entry of the mapping's `exports:`; optional when it declares one (or none: default columns). */
  exportName?: string;
  /** A columns file instead of the mapping's `exports:`. */
  columnsFile?: string;
  /** A SQL-on-FHIR v2 ViewDefinition file (JSON) over Observation: its columns, its rows (docs/export-views.md). */
  view?: string;
  /** Output file, or `-` for stdout (default). */
  out?: string;
  format?: string;
  bom?: boolean;
  /** CSV: prefix formula-like text cells with `'` (default true for CSV; never for other formats). */
  escapeFormulas?: boolean;
  /** `original` or `snake` (default: snake for Parquet, original otherwise). */
  columnNames?: string;
  /** `long` (default) or `wide`. */
  layout?: string;
  /** Replace ids and source keys by keyed pseudonyms, drop free text (key: `pseudonymKeyFile` or CARE_PSEUDONYM_KEY). */
  pseudonymize?: boolean;
  pseudonymKeyFile?: string;
  /** With `pseudonymize`: keep free-text fields (valueString, notes, reference display names). */
  keepFreeText?: boolean;
  /** Data dictionary file (`.json` → JSON, else CSV). */
  dictionary?: string;
  /** `last`, an ISO date or a date-time with a zone. */
  since?: string;
  /** `since: 'last'`: seconds re-read before the previous export's start (default 60). */
  overlapSeconds?: number;
  /** Patient source keys. */
  patients?: string[];
  /** `k=v` query parameters of the first request. */
  query?: string[];
  pageSize?: number;
  /** Default `.care-etl/state.db` beside the mapping. */
  statePath?: string;
  /** From flags: they win over CARE_* variables, which win over the mapping's `target:`. */
  connection?: ConnectionInput;
  env?: NodeJS.ProcessEnv;
  sandboxDataFile?: string;
  /** Where `out: '-'` writes (default process.stdout). */
  stdout?: Writable;
  onTarget?: (t: ExportTargetInfo) => void;
  onProgress?: (p: ExportProgress) => void;
  signal?: AbortSignal;
  /** One call per HTTP attempt (the CLI's `--verbose` request log); never sees headers or bodies. */
  onRequest?: ClientOptions['onResponse'];
}

export interface ExportTargetInfo {
  baseUrl: string;
  tenantId: string;
  embedded: boolean;
  dataFile?: string;
}

export interface ExportSummary extends ExportReport {
  mappingFile: string;
  /** Absolute path of the file written, or `-` (stdout). */
  out: string;
  statePath: string;
  target: ExportTargetInfo;
  /** Absolute path of the data dictionary written, if asked for. */
  dictionary?: string;
  /** Absolute path of the Table Schema (`<name>.datapackage.json`) written beside a CSV file. */
  tableSchema?: string;
  /** Absolute path of the ViewDefinition, when the rows came from one. */
  view?: string;
  warnings: string[];
}

/** `k=v` → { k: v }; a CareEtlError (exit 2) for anything else. */
function parseQuery(pairs: readonly string[] | undefined): Record<string, string> | undefined {
  if (!pairs?.length) return undefined;
  const out: Record<string, string> = {};
  for (const p of pairs) {
    const i = p.indexOf('=');
    if (i <= 0) throw config(`Expected \`query\` entries to be key=value, got \`${p}\``);
    out[p.slice(0, i)] = p.slice(i + 1);
  }
  return out;
}

/** The options checked by their own names (p-queue style), before anything is read; the CLI declares the same rules on its flags. */
interface CheckedOptions {
  outArg: string;
  toStdout: boolean;
  format: ExportFormat;
  layout: ExportLayout;
  columnNames: ColumnNameStyle;
  query?: Record<string, string>;
  patients?: string[];
  overlapSeconds: number;
  /** Absolute path of the data dictionary, if asked for. */
  dictionary?: string;
}

function checkOptions(opts: RunExportOptions): CheckedOptions {
  const outArg = opts.out ?? '-';
  const toStdout = outArg === '-';
  const format = (opts.format ?? 'csv') as ExportFormat;
  if (!EXPORT_FORMATS.includes(format)) throw config(`Expected \`format\` to be one of ${EXPORT_FORMATS.join(', ')}, got \`${opts.format}\``);
  if (opts.bom && format !== 'csv') throw config(`Expected \`bom\` to be used with \`format: 'csv'\`, got \`format: '${format}'\``);
  if (opts.escapeFormulas === true && format !== 'csv')
    throw config(
      `Expected \`escapeFormulas\` to be used with \`format: 'csv'\`, got \`format: '${format}'\``,
      'Formula neutralisation is for spreadsheets: other formats are written as they are.',
    );
  const columnNames = (opts.columnNames ?? defaultColumnNames(format)) as ColumnNameStyle;
  if (!COLUMN_NAME_STYLES.includes(columnNames))
    throw config(`Expected \`columnNames\` to be one of ${COLUMN_NAME_STYLES.join(', ')}, got \`${opts.columnNames}\``);
  if (opts.exportName !== undefined && opts.columnsFile !== undefined) throw config('Expected `exportName` or `columnsFile`, got both');
  const layout = (opts.layout ?? 'long') as ExportLayout;
  if (!EXPORT_LAYOUTS.includes(layout)) throw config(`Expected \`layout\` to be one of ${EXPORT_LAYOUTS.join(', ')}, got \`${opts.layout}\``);
  const ownColumns =
    opts.columnsFile !== undefined ? 'columnsFile' : opts.exportName !== undefined && opts.exportName !== DEFAULT_EXPORT_NAME ? 'exportName' : undefined;
  if (layout === 'wide' && ownColumns) {
    throw config(
      `Expected no \`${ownColumns}\` with \`layout: 'wide'\`, got \`${ownColumns}: '${opts[ownColumns]}'\``,
      'The wide layout has its own columns (patient, date, one column per instrument).',
    );
  }
  const query = parseQuery(opts.query);
  if (opts.since !== undefined && opts.since !== 'last') parseSince(opts.since, 'since');
  const patients = opts.patients?.map((p) => p.trim());
  if (patients?.some((p) => p === '')) throw config('Expected `patients` to be patient source keys, got an empty value');
  const overlapSeconds = opts.overlapSeconds ?? 60;
  if (!Number.isFinite(overlapSeconds) || overlapSeconds < 0) throw config(`Expected \`overlapSeconds\` to be a number ≥ 0, got \`${opts.overlapSeconds}\``);
  if (!opts.pseudonymize && opts.pseudonymKeyFile !== undefined)
    throw config('Expected `pseudonymKeyFile` to be used with `pseudonymize: true`, got `pseudonymize: false`');
  if (!opts.pseudonymize && opts.keepFreeText) throw config('Expected `keepFreeText` to be used with `pseudonymize: true`, got `pseudonymize: false`');
  if (opts.dictionary === '-' || opts.dictionary === '') throw config(`Expected \`dictionary\` to be a file path, got \`${opts.dictionary}\``);
  const dictionary = opts.dictionary === undefined ? undefined : resolve(opts.dictionary);
  if (dictionary !== undefined && !toStdout && (dictionary === resolve(outArg) || dictionary === resolve(`${outArg}.partial`))) {
    throw config(`Expected \`dictionary\` to be another file than \`out\`, got \`${opts.dictionary}\` for both`);
  }
  if (opts.view !== undefined) checkViewOptions(opts, layout);
  return { outArg, toStdout, format, layout, columnNames, query, patients, overlapSeconds, dictionary };
}

/** `view`: the view defines the rows and columns; what it cannot combine with is refused by name (exit 2). */
function checkViewOptions(opts: RunExportOptions, layout: ExportLayout): void {
  const other: [string, boolean][] = [
    ['exportName', opts.exportName !== undefined],
    ['columnsFile', opts.columnsFile !== undefined],
    [`layout: '${layout}'`, layout !== 'long'],
    ['pseudonymize', opts.pseudonymize === true], // a view reads the observation as stored: refused, never silently not pseudonymised
    ['since', opts.since !== undefined],
    ['patients', opts.patients !== undefined && opts.patients.length > 0],
    ['dictionary', opts.dictionary !== undefined], // the ViewDefinition documents its own columns
  ];
  const used = other.filter(([, on]) => on).map(([name]) => `\`${name}\``);
  if (used.length) throw config(`Expected no ${used.join(', ')} with \`view\`: the ViewDefinition defines the rows and the columns`);
}

function selectColumns(compiled: ReturnType<typeof compileMapping>, name: string | undefined): CompiledExport & { sources?: Map<string, ColumnSource> } {
  const names = [...compiled.exports.keys()];
  if (name !== undefined) {
    const found = compiled.exports.get(name);
    if (found) return withSources(compiled, found);
    if (name === DEFAULT_EXPORT_NAME) return defaultExport();
    const guess = closest(name, names);
    throw config(
      `The mapping file has no export named \`${name}\`${names.length ? ` (exports: ${names.join(', ')})` : ' (it has no `exports:` section)'}${guess ? `; did you mean \`${guess}\`?` : ''}`,
      `Name one of the mapping's exports, or \`${DEFAULT_EXPORT_NAME}\` for the built-in default columns.`,
    );
  }
  if (names.length === 0) return defaultExport();
  if (names.length === 1) return withSources(compiled, compiled.exports.get(names[0]!)!);
  throw config(`The mapping file declares several exports (${names.join(', ')}): name one, e.g. \`care-etl export ${compiled.mapping.file} ${names[0]}\``);
}

function withSources(compiled: ReturnType<typeof compileMapping>, ex: CompiledExport): CompiledExport & { sources?: Map<string, ColumnSource> } {
  const cfg = compiled.mapping.exports?.[ex.name];
  return cfg ? { ...ex, sources: columnSourcesOf(cfg.columns) } : ex;
}

function openOutputFile(path: string, shown: string): WriteStream {
  try {
    return createWriteStream(path, { fd: openPrivateFile(path), flush: true });
  } catch (err) {
    throw outputError(err, shown);
  }
}

/** A pipe or a device as `--out` (`>(gzip > obs.csv.gz)`, a FIFO): rows stream into it, no `.partial`, no rename. */
async function openOutputInPlace(path: string, shown: string): Promise<WriteStream> {
  try {
    return await openStreamOutput(path);
  } catch (err) {
    throw outputError(err, shown);
  }
}

function outputError(err: unknown, shown: string): CareEtlError {
  const code = (err as NodeJS.ErrnoException).code;
  return new CareEtlError(`Cannot write the output file ${shown}${code ? ` (${code})` : ''}`, {
    exitCode: ExitCode.config,
    cause: err,
    hint: 'Choose a writable output path.',
  });
}

/**
 * Writes the data dictionary (if asked for), the Table Schema beside a CSV file, and renames the partial file: the
 * last step of a complete export.
 */
function finalizer(opts: RunExportOptions, checked: CheckedOptions, files: OutputFiles): NonNullable<ExportObservationsOptions['finalize']> {
  return async ({ dictionary: entries, report }) => {
    const dict: DataDictionary = {
      export: report.export,
      layout: report.layout,
      format: report.format,
      pseudonymized: report.pseudonymized,
      escapeFormulas: report.escapeFormulas,
      columnNames: checked.columnNames,
      keepFreeText: report.pseudonymized && opts.keepFreeText === true,
      rows: report.rows,
      generatedAt: new Date().toISOString(),
      columns: entries,
    };
    if (checked.dictionary !== undefined) {
      try {
        await writeDictionary(checked.dictionary, dict);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        throw new CareEtlError(`Cannot write the data dictionary ${opts.dictionary}${code ? ` (${code})` : ''}`, {
          exitCode: ExitCode.config,
          cause: err,
          hint: 'Choose a writable path for the data dictionary.',
        });
      }
    }
    // A CSV file gets its Table Schema (a pipe or stdout has no "beside"; a view's columns are its ViewDefinition's).
    if (files.partial && report.format === 'csv' && opts.view === undefined) files.tableSchema = await writeTablePackage(files.out, dict, opts.bom === true);
    if (files.partial) {
      renameSync(files.partial, files.out);
      files.renamed = true;
    }
  };
}

/** `<out>` and the `<out>.partial` written first (none for stdout); `renamed` once the export is complete. */
interface OutputFiles {
  out: string;
  partial?: string;
  renamed: boolean;
  /** The `<name>.datapackage.json` written beside a CSV file. */
  tableSchema?: string;
}

/** What is opened for one export, closed whatever happens (an open embedded sandbox would keep the process alive). */
interface OpenedResources {
  target?: Target;
  ledger?: Ledger;
  client?: CareClient;
}

async function closeAll(files: OutputFiles, opened: OpenedResources): Promise<void> {
  if (files.partial && !files.renamed) {
    try {
      rmSync(files.partial, { force: true });
    } catch {
      // never created (e.g. the folder is not writable)
    }
  }
  await opened.client?.close().catch(() => {});
  try {
    opened.ledger?.close();
  } catch {
    // the export's own error matters more
  }
  await opened.target?.close().catch(() => {});
}

export async function runExport(opts: RunExportOptions): Promise<ExportSummary> {
  const checked = checkOptions(opts); // nothing touched yet
  const { outArg, toStdout, format, layout } = checked;
  const env = opts.env ?? process.env;
  // Before anything is read or printed: the key is registered as a secret and checked (exit 2 when missing).
  const pseudonymizer = opts.pseudonymize ? new Pseudonymizer(resolvePseudonymKey({ keyFile: opts.pseudonymKeyFile, env })) : undefined;
  const view = opts.view === undefined ? undefined : loadView(opts.view); // refused here: nothing fetched

  const mappingFile = resolve(opts.mappingFile);
  const mapping = await loadMapping(mappingFile, { env });
  const compiled = compileMapping(mapping);
  // The wide layout (and a view) has its own columns: the mapping's exports: section describes long rows.
  const columns =
    layout === 'wide' || view
      ? defaultExport()
      : renameExport(
          opts.columnsFile !== undefined ? await loadColumnsFile(opts.columnsFile, mapping) : selectColumns(compiled, opts.exportName),
          checked.columnNames,
        );
  const patientMappings = mapping.resources.filter((r) => r.type === 'Patient').map((r) => r.name);

  const out = toStdout ? '-' : resolve(outArg);
  const inPlace = !toStdout && outputKindOf(out) === 'stream';
  const files: OutputFiles = { out, partial: toStdout || inPlace ? undefined : `${out}.partial`, renamed: false };
  const opened: OpenedResources = {};
  try {
    const target = (opened.target = await openTarget(mapping, { env: opts.env, connection: opts.connection, sandboxDataFile: opts.sandboxDataFile }));
    const info: ExportTargetInfo = {
      baseUrl: target.settings.baseUrl,
      tenantId: target.settings.tenantId,
      embedded: target.embedded,
      dataFile: target.dataFile,
    };
    opts.onTarget?.(info);
    const location = resolveStateLocation({ flag: opts.statePath, env, mappingState: mapping.state, mappingDir: mapping.dir });
    const statePath = displayStateLocation(location); // a URL without its password
    opened.ledger = Ledger.open(location);
    const client = (opened.client = new CareClient(target.settings, { onResponse: opts.onRequest }));
    const output = toStdout
      ? (opts.stdout ?? process.stdout)
      : files.partial
        ? openOutputFile(files.partial, `${outArg}.partial`)
        : await openOutputInPlace(out, outArg);
    // --view: the ViewDefinition's rows (the options it cannot use were refused by checkViewOptions).
    const exportRows = view ? (o: ExportObservationsOptions) => exportView({ ...o, view }) : exportObservations;
    const report = await exportRows({
      client,
      scope: opened.ledger.scope(target.scopeUrl, target.settings.tenantId),
      columns,
      output,
      endOutput: !toStdout,
      format,
      bom: opts.bom,
      escapeFormulas: opts.escapeFormulas,
      columnNames: checked.columnNames,
      layout,
      pseudonymizer,
      keepFreeText: opts.keepFreeText,
      tempDir: isPostgresLocation(location) ? join(mapping.dir, '.care-etl') : dirname(location),
      columnSources: (columns as { sources?: Map<string, ColumnSource> }).sources,
      since: opts.since,
      overlapMs: checked.overlapSeconds * 1000,
      patients: checked.patients,
      patientMappings,
      query: checked.query,
      pageSize: opts.pageSize,
      onProgress: opts.onProgress,
      signal: opts.signal,
      finalize: finalizer(opts, checked, files),
    });
    const warnings = mapping.warnings.map((w) => w.message);
    if (report.unplaced)
      warnings.push(
        `${report.unplaced} observation${report.unplaced === 1 ? '' : 's'} left out of the wide layout (subject not a Patient, or no coding and no code.text); the long layout has them`,
      );
    if (report.mergedTexts)
      warnings.push(
        `${report.mergedTexts} wide column${report.mergedTexts === 1 ? '' : 's'} keyed by code.text merged spellings that differ only in case or spaces (the dictionary lists them)`,
      );
    const viewFile = opts.view !== undefined ? { view: resolve(opts.view) } : {};
    return {
      ...report,
      mappingFile,
      out,
      statePath,
      target: info,
      ...(checked.dictionary !== undefined ? { dictionary: checked.dictionary } : {}),
      ...(files.tableSchema ? { tableSchema: files.tableSchema } : {}),
      ...viewFile,
      warnings,
    };
  } finally {
    await closeAll(files, opened);
  }
}
