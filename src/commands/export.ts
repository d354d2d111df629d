import { Args } from '@oclif/core';
import { CareCommand } from '../cli/base-command.js';
import { flag } from '../cli/flags.js';
import { connectionFlags, connectionFromFlags } from '../cli/connection-flags.js';
import { stderrLine } from '../cli/log-line.js';
import type { ErrorJson } from '../cli/render.js';
import { CareEtlError, ExitCode } from '../core/issues.js';
import { registerSecret } from '../core/secret.js';
import { DEFAULT_EXPORT_NAME } from '../export/default-columns.js';
import type { ExportSummary } from '../export/run-export.js';

export type ExportResult = ExportSummary | ErrorJson;

export default class Export extends CareCommand<ExportResult> {
  static override summary = 'Export questionnaire Observations to CSV (or NDJSON) for analysts.';
  static override description = `Reads every Observation of the tenant, page after page, and writes one row per observation. The columns come from the mapping file's exports: section (header → JSONata over one Observation; $sourceKey(subject.reference) gives the patient's source key, e.g. the MRN, from the state ledger), from --columns, or, when none are declared, a default set (id, patient id and source key, questionnaire, LOINC code, category, status, effective date, value, unit, performer, last updated, version).

Formula injection: in CSV, text cells starting with = + - @ tab or CR are prefixed with ' (OWASP); JSON numbers such as -3 are written as they are. --no-escape-formulas turns this off (CSV read by code); NDJSON is never changed. The dictionary says which applied.
--column-names snake writes SQL-friendly names (PHQ-9 (44261-6) → phq_9_44261_6); the dictionary maps each back. A CSV file (--out obs.csv) gets a Frictionless Table Schema beside it, obs.datapackage.json, so pandas, R and frictionless type its columns (scores stay integers).
--since last exports what changed since the previous complete --since last export (a watermark in the state ledger, minus --overlap). What the previous export already delivered (same id and version) is skipped and counted, so an immediate repeat returns only what is new or changed.
--layout wide: one row per patient and UTC day, one column per instrument (e.g. "PHQ-9 (44261-6)", keyed by coding, else by code.text normalised for case and spaces; the latest result of a day wins, counted in superseded), spooled to a private SQLite file in .care-etl/ (bounded memory) and removed afterwards.
--pseudonymize: patient source keys and every server id become HMAC-SHA-256 pseudonyms (32 hex characters) under the key in CARE_PSEUDONYM_KEY or --pseudonym-key-file (never printed; same key → same pseudonyms); free text (value strings, notes, reference display names) is dropped unless --keep-free-text. Custom columns are evaluated on the pseudonymised observation.
--format parquet: typed Apache Parquet (scores INT64 with nulls, effective and last updated as UTC timestamps, the wide layout's date as DATE, the rest text; columns of your own exports are text), snake_case column names (phq_9_44261_6), no formula prefix, row groups of at most 64k rows (bounded memory). A value that does not fit its column's type (a decimal score, a partial date) stops the export (exit 2): export it as CSV or NDJSON.
--dictionary FILE writes what every column means (name, source expression, type, description): JSON for a .json file, else CSV.
A file is written as <out>.partial (mode 0600) and renamed when complete: a failed export leaves no <out>. A pipe or device (>(gzip > obs.csv.gz), a FIFO) is written in place as rows come (docs/output-files.md).
--view view.json: a SQL-on-FHIR v2 ViewDefinition over Observation (select, column, forEach, forEachOrNull, unionAll, where, constant; a FHIRPath subset) gives the rows and columns; a construct outside the subset is refused with its JSON path before anything is fetched (docs/export-views.md).
With no target configured (flags, CARE_* variables or the mapping's target:), the export reads the embedded sandbox kept in .care-etl/ beside the mapping (what \`care-etl run\` loaded); CARE_* variables, CI or a target: key without a base URL are refused (exit 2) unless --sandbox.

Exit codes: 0 exported (an empty export is a header-only CSV); 2 usage, mapping (a column failing on an observation), configuration or authentication error; 3 could not complete — server unreachable or failing, interrupted. On 2 and 3 nothing is written to an --out file.`;
  static override examples = [
    '<%= config.bin %> export examples/clinic/mapping.yaml > observations.csv',
    '<%= config.bin %> export mapping.yaml --out observations.csv --bom --since last',
    '<%= config.bin %> export mapping.yaml phq --patient 00123 --format ndjson --out -',
    '<%= config.bin %> export mapping.yaml --layout wide -o wide.csv --dictionary dict.csv',
    '<%= config.bin %> export mapping.yaml --format parquet -o obs.parquet',
    'CARE_PSEUDONYM_KEY=… <%= config.bin %> export mapping.yaml --pseudonymize -o a.csv',
    '<%= config.bin %> export mapping.yaml --view phq9.view.json -o phq9.csv',
    '<%= config.bin %> export mapping.yaml --out obs.csv --json',
  ];
  static override args = {
    mapping: Args.string({ description: 'mapping file (YAML)', required: true }),
    name: Args.string({ description: "export of the mapping's exports: section (needed only when it declares several)" }),
  };
  static override flags = {
    // `--json` prints the summary on stdout: the rows need a file.
    json: flag.json({
      description: 'Format output as json: the summary on stdout, so the rows need a file (--out FILE).',
      relationships: [
        { type: 'all', flags: ['out'] },
        { type: 'none', flags: [{ name: 'out', when: async (f) => f.out === '-' }] },
      ],
    }),
    out: flag.out({
      char: 'o',
      summary: 'output file, or - for stdout (the default)',
      description:
        'output file; a pipe or device (a FIFO, >(gzip > obs.csv.gz)) is written in place; - for stdout (the default; not with --json, which prints the summary there)',
    }),
    columns: flag.columns(),
    view: flag.view(),
    format: flag.format(),
    bom: flag.bom(),
    'escape-formulas': flag['escape-formulas'](),
    'column-names': flag['column-names'](),
    layout: flag.layout(),
    pseudonymize: flag.pseudonymize(),
    'pseudonym-key-file': flag['pseudonym-key-file'](),
    'keep-free-text': flag['keep-free-text'](),
    dictionary: flag.dictionary(),
    since: flag.since(),
    overlap: flag.overlap(),
    patient: flag.patient(),
    query: flag.query(),
    'page-size': flag['page-size']({ summary: 'page size asked of the server', description: 'page size asked of the server (_count on the first request)' }),
    state: flag.state(),
    progress: flag.progress(),
    ...connectionFlags,
    'max-retry-after': flag['max-retry-after'](),
  };

  async run(): Promise<ExportResult> {
    const { args, flags } = await this.parse(Export);
    refuseNameWithOwnColumns(args.name, flags);
    // Known before anything can be printed (a .env file beside the mapping is loaded by parse).
    registerSecret(process.env.CARE_PSEUDONYM_KEY?.trim());
    const [{ runExport }, { createExportProgress }, { stampedWriter, terminalWidth, fitLine }, { exportVerdict, writeVerdict }] = await Promise.all([
      import('../export/run-export.js'),
      import('../export/progress.js'),
      import('../cli/terminal.js'),
      import('../cli/terminal-verdict.js'),
    ]);
    const json = this.jsonEnabled();
    const err = (line: string) => this.info(line);
    const mode = this.progressMode(flags.progress);
    const toStderr = (t: string) => process.stderr.write(t);
    // On a TTY one line rewritten in place, fitted to the width; in a log, timestamped lines.
    const stamped = stampedWriter(toStderr);
    const progress =
      mode === 'none'
        ? undefined
        : createExportProgress({
            tty: mode === 'bar',
            write: mode === 'bar' ? toStderr : (t) => stamped(t.replace(/\n$/, '')),
            fit: (l) => fitLine(l, terminalWidth(process.stderr)),
          });
    // Ctrl+C / SIGTERM (this.signal): stop, remove the partial file, leave the watermark where it was.
    let summary: ExportSummary;
    try {
      summary = await runExport({
        mappingFile: args.mapping,
        exportName: args.name,
        columnsFile: flags.columns,
        view: flags.view,
        out: flags.out,
        format: flags.format,
        bom: flags.bom,
        escapeFormulas: flags['escape-formulas'],
        columnNames: flags['column-names'],
        layout: flags.layout,
        pseudonymize: flags.pseudonymize,
        pseudonymKeyFile: flags['pseudonym-key-file'],
        keepFreeText: flags['keep-free-text'],
        dictionary: flags.dictionary,
        since: flags.since,
        overlapSeconds: flags.overlap,
        patients: flags.patient,
        query: flags.query,
        pageSize: flags['page-size'],
        statePath: flags.state,
        connection: { ...connectionFromFlags(flags), maxRetryAfterMs: flags['max-retry-after'] },
        onTarget: (t) => {
          // stderr whatever the mode (stdout may be the export itself): the sandbox is never used silently
          if (t.embedded)
            process.stderr.write(
              stderrLine(`No target configured: exporting from the embedded sandbox ${t.baseUrl} (tenant ${t.tenantId}, data in ${t.dataFile})`),
            );
          else if (!json) err(`Exporting from ${t.baseUrl} (tenant ${t.tenantId})`);
        },
        onProgress: progress?.onProgress,
        onRequest: this.requestLog,
        signal: this.signal,
      });
    } catch (error) {
      progress?.stop();
      return this.fail(error);
    }
    progress?.stop();
    if (!json) {
      for (const w of summary.warnings) err(`warning: ${w}`);
      const n = (x: number) => x.toLocaleString('en-US');
      if (summary.sinceMode === 'last' && summary.alreadyDelivered) {
        err(`Skipped ${n(summary.alreadyDelivered)} observations already delivered by the previous --since last export (same id and version)`);
      }
      if (summary.undated) err(`${summary.undated} observations without a readable meta.lastUpdated were included`);
      if (summary.dictionary) err(`Data dictionary written to ${summary.dictionary}`);
      if (summary.tableSchema) err(`Table Schema written to ${summary.tableSchema}`);
      if (summary.watermarkSaved) err(`Watermark saved: the next --since last export starts at ${summary.watermark}`);
      if (this.logLevel !== 'quiet') writeVerdict(exportVerdict(summary));
    }
    process.exitCode = 0;
    return summary;
  }
}

/** The export name is an argument: oclif declares rules between flags only, so its rules are checked here. */
function refuseNameWithOwnColumns(name: string | undefined, flags: { columns?: string; layout: string; view?: string }): void {
  if (name === undefined) return;
  if (flags.columns !== undefined) throw new CareEtlError('Give either an export name or `--columns`, not both', { exitCode: ExitCode.config });
  if (flags.view !== undefined) throw new CareEtlError('Give either an export name or `--view`, not both', { exitCode: ExitCode.config });
  if (flags.layout === 'wide' && name !== DEFAULT_EXPORT_NAME) {
    throw new CareEtlError('`--layout wide` has its own columns (patient, date, one column per instrument): it takes no export name or `--columns`', {
      exitCode: ExitCode.config,
      hint: 'Drop the export name, or use `--layout long` for custom columns.',
    });
  }
}
