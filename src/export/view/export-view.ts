/**
 * `export --view`: every Observation of the tenant, page by page, through a compiled ViewDefinition → the rows it
 * defines, streamed to CSV or NDJSON (row-sink.ts) with bounded memory. The report has the shape of the long
 * export's (observation-exporter.ts) so the CLI and `--json` treat both alike.
 * Parquet (`openRowSink`): integer columns as INT64 (`viewParquetTypes`), everything else text.
 */
import type { Resource } from '../../api/types.js';
import { asExportFailure, newExportReport, type ExportObservationsOptions, type ExportReport } from '../observation-exporter.js';
import type { ColumnType } from '../parquet-sink.js';
import { openRowSink } from '../row-sink.js';
import type { CompiledView } from './view-definition.js';
import type { LoadedView } from './load-view.js';
import { viewRows } from './view-rows.js';

/** The long export's options this export uses (the others are refused with a view: run-export.ts); plus the view. */
type ExportViewOptions = Pick<
  ExportObservationsOptions,
  'client' | 'output' | 'endOutput' | 'format' | 'bom' | 'escapeFormulas' | 'query' | 'pageSize' | 'retry' | 'finalize' | 'onProgress' | 'signal'
> & { view: LoadedView };

/**
 * Parquet column types from the view's declared FHIR types: the integer types as INT64; the rest as text — a FHIR
 * `date`/`dateTime` may be partial (`2024-03`), which no Parquet date or timestamp holds, and a collection is a list.
 */
function viewParquetTypes(view: CompiledView): Map<string, ColumnType> {
  const integer = /^(integer|integer64|positiveInt|unsignedInt)$/;
  return new Map(view.columns.map((c) => [c.name, !c.collection && c.type !== undefined && integer.test(c.type) ? 'integer' : 'string']));
}

/** `view:<its name>` (else `view`), as the report's `export`. */
const exportNameOf = (v: LoadedView) => (v.view.name ? `view:${v.view.name}` : 'view');

function emptyReport(opts: ExportViewOptions, started: Date): ExportReport {
  const head = {
    export: exportNameOf(opts.view),
    format: opts.format ?? 'csv',
    layout: 'long',
    pseudonymized: false,
    columns: opts.view.view.root.names,
  } as const;
  return newExportReport({ ...head, since: null, sinceMode: 'none', watermarkName: '' }, opts.escapeFormulas, started);
}

export async function exportView(opts: ExportViewOptions): Promise<ExportReport> {
  const started = new Date();
  const t0 = performance.now();
  const report = emptyReport(opts, started);
  const { view, file } = opts.view;
  const sink = openRowSink(opts.output, {
    format: report.format,
    columns: report.columns,
    bom: opts.bom,
    escapeFormulas: opts.escapeFormulas,
    end: opts.endOutput,
    types: viewParquetTypes(view),
  });
  try {
    opts.signal?.throwIfAborted();
    for await (const bundle of opts.client.pages<Resource>('Observation', {
      query: opts.query,
      pageSize: opts.pageSize,
      signal: opts.signal,
      retry: opts.retry,
    })) {
      report.pages++;
      for (const entry of bundle.entry ?? []) {
        const obs = entry?.resource;
        if (!obs || typeof obs !== 'object' || obs.resourceType !== 'Observation') continue;
        report.scanned++;
        const rows = viewRows(view, obs as Record<string, unknown>, file);
        if (rows.length) report.observations++;
        for (const row of rows) {
          if (!sink.write(row)) await sink.drain(opts.signal);
          report.rows++;
        }
      }
      opts.onProgress?.({ pages: report.pages, scanned: report.scanned, rows: report.rows });
      opts.signal?.throwIfAborted();
    }
    await sink.end();
    await opts.finalize?.({ dictionary: [], report });
  } catch (err) {
    await sink.abort();
    throw asExportFailure(opts.signal?.aborted ? (opts.signal.reason ?? err) : err, report, 'Nothing was written to --out: export again.');
  }
  report.finishedAt = new Date().toISOString();
  report.durationMs = Math.round(performance.now() - t0);
  return report;
}
