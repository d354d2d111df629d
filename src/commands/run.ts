import { Args } from '@oclif/core';
import { CareCommand } from '../cli/base-command.js';
import { cancelledLine } from '../cli/run-summary.js';
import { flag } from '../cli/flags.js';
import { connectionFlags, connectionFromFlags } from '../cli/connection-flags.js';
import { JSON_FORMAT_VERSION, type ErrorJson } from '../cli/render.js';
import type { RunReport } from '../pipeline/run-report.js';
import type { ReconcilePolicy } from '../mapping/types.js';
import type { VerifyPolicy } from '../load/duplicate-check.js';

export type RunResult = RunReport | ErrorJson;

export default class Run extends CareCommand<RunResult> {
  static override summary = 'Load an EMR export into the service as described by a mapping file.';
  static override description = `Streams every source of the mapping through its JSONata mappings, validates each resource against the JSON Schemas, and loads Patients, Practitioners and CareTeams in dependency order. Re-runs are safe: the state ledger (.care-etl/state.db) makes every source key exist exactly once; unchanged rows send nothing.

Rows that fail are written to the rejects file (NDJSON, mode 0600, the rows kept for re-processing) and the run goes on; beside it, a redacted summary to hand to the clinic (rejects.summary.csv: file, line, record, mapping, key, stage, code, message — no row content; mode 0600). Both are replaced only when the run did its work: a run that fails (credentials, lock, unreachable server) leaves the previous ones as they were. A dry run writes its own (in --out).
--only-rejected re-processes, from the current source, just the rows the last run rejected: by source key when it was known, else (a row rejected before its key was known, or as a duplicate) by file and line. Every other row is read (keys for duplicates and $ref) but not sent ("not selected"); onMissing: end is skipped.
With no target configured (flags, CARE_* variables or the mapping's target:), the run loads into an embedded sandbox kept in .care-etl/ beside the mapping — unless CARE_* variables, CI, a connection flag or a target: key suggest a server without a base URL (exit 2); --sandbox uses the sandbox all the same.
Ctrl+C / SIGTERM: the run stops within 5 s — no further row is read, waits and requests in flight are abandoned (a create whose answer is lost stays pending, reconciled by the next run), then the state, the rejects file, the report and the run history are written (exit 3); a second one quits at once (exit 130, SIGTERM 143).

Exit codes: 0 every row loaded (or the rejects within --fail-on-rejects); 1 some rows rejected (above --fail-on-rejects; or --max-errors reached), the rest loaded; 2 usage, mapping, configuration or authentication error (nothing loaded); 3 could not complete (server unreachable or failing, wrong base path, interrupted); 5 the ending guard refused to end a mapping's resources (onMissing: end; too many keys gone from the export, or an empty source): nothing ended for it, the rows loaded — see --allow-ending.`;
  static override examples = ['<%= config.bin %> run examples/clinic/mapping.yaml', '<%= config.bin %> run mapping.yaml --only-rejected --report report.html'];
  static override args = { mapping: Args.string({ description: 'mapping file (YAML)', required: true }) };
  static override flags = {
    'dry-run': flag['dry-run'](),
    out: flag.out({ summary: 'dry run: output folder', description: 'dry run: output folder (default .care-etl/dry-run beside the mapping)' }),
    rejects: flag.rejects(),
    report: flag.report(),
    'include-rows': flag['include-rows'](),
    state: flag.state(),
    concurrency: flag.concurrency(),
    'max-concurrency': flag['max-concurrency'](),
    'max-errors': flag['max-errors'](),
    'fail-on-rejects': flag['fail-on-rejects'](),
    'only-rejected': flag['only-rejected'](),
    reconcile: flag.reconcile(),
    'verify-after-load': flag['verify-after-load'](),
    'index-page-size': flag['index-page-size'](),
    'allow-ending': flag['allow-ending'](),
    'wait-for-lock': flag['wait-for-lock'](),
    progress: flag.progress(),
    ...connectionFlags,
    'max-retry-after': flag['max-retry-after'](),
  };

  async run(): Promise<RunResult> {
    const { args, flags } = await this.parse(Run);
    const [
      { runPipeline },
      { createRunProgress },
      { table },
      { writeOutputFile },
      { redactKnown },
      { describeConcurrency },
      { embeddedSandboxLine },
      { stampedWriter },
      { runVerdict, writeVerdict },
    ] = await Promise.all([
      import('../pipeline/run-pipeline.js'),
      import('../cli/run-progress.js'),
      import('../cli/render.js'),
      import('../core/secure-fs.js'),
      import('../core/secret.js'),
      import('../report/report-model.js'),
      import('../cli/run-summary.js'),
      import('../cli/terminal.js'),
      import('../cli/terminal-verdict.js'),
    ]);
    const mode = this.progressMode(flags.progress);
    // A log (not a TTY) gets timestamped lines; server listings only under --verbose (their cost is in --json and the report).
    const progress =
      mode === 'none'
        ? undefined
        : await createRunProgress({
            tty: mode === 'bar',
            write: stampedWriter((t) => process.stderr.write(t)),
            showIndexes: this.logLevel === 'verbose',
          });
    let report: RunReport;
    try {
      report = await runPipeline({
        mappingFile: args.mapping,
        // Its keep-alive sockets: runPipeline's default for the window (socketsForWindow).
        connection: { ...connectionFromFlags(flags), maxRetryAfterMs: flags['max-retry-after'] },
        dryRun: flags['dry-run'],
        outDir: flags.out,
        rejectsFile: flags.rejects,
        statePath: flags.state,
        concurrency: flags.concurrency,
        maxConcurrency: flags['max-concurrency'],
        maxErrors: flags['max-errors'],
        failOnRejects: flags['fail-on-rejects'],
        onlyRejected: flags['only-rejected'],
        reconcile: flags.reconcile as ReconcilePolicy | undefined,
        verifyAfterLoad: flags['verify-after-load'] as VerifyPolicy | undefined,
        indexPageSize: flags['index-page-size'],
        allowEnding: flags['allow-ending'],
        waitForLockMs: flags['wait-for-lock'],
        onLockNotice: (l) => (this.jsonLog ? this.jsonLog.write('info', 'message', { message: l }) : process.stderr.write(`${l}\n`)),
        onEvent: this.jsonLog?.onRunEvent ?? progress?.onEvent,
        onRequest: this.requestLog,
        signal: this.signal,
      });
    } catch (err) {
      progress?.stop();
      return this.fail(err);
    }
    progress?.stop();
    process.exitCode = report.exitCode;
    if (flags.report) await writeOutputFile(flags.report, await renderReportFile(flags.report, report, flags['include-rows'], redactKnown));
    if (this.jsonLog) {
      for (const w of report.warnings) this.jsonLog.write('warn', 'warning', { message: w });
      this.jsonLog.verdict((await import('../cli/json-log.js')).runVerdict(report));
    }
    if (!this.jsonEnabled()) {
      const { head, rows } = summaryTable(report);
      this.log(table(head, rows));
      if (this.logLevel === 'verbose')
        for (const b of report.indexes) this.log(`Listed ${b.resourceType} on the server: ${b.resources} resource(s), ${b.pages} page(s) — ${b.reason}`);
      if (report.verification?.length) this.log(verificationLine(report.verification));
      for (const w of report.warnings) this.log(`warning: ${w}`);
      for (const l of selectionLines(report)) this.log(l);
      if (report.dryRun) this.log(`Dry run: resources written to ${report.outDir}`);
      if (report.totals.rejected) {
        this.log(
          `${report.totals.rejected} rows rejected: see ${report.rejectsFile} (fix them and run again: only they are retried; --only-rejected sends just them)`,
        );
        if (report.rejectsSummaryFile) this.log(`Summary without row content, for the clinic: ${report.rejectsSummaryFile}`);
      }
      if (report.stoppedEarly) this.log(`Stopped early: ${report.stoppedEarly}`);
      if (report.concurrency) this.log(`Concurrency: ${describeConcurrency(report.concurrency)}`);
    }
    this.notice(embeddedSandboxLine(report.target));
    this.notice(cancelledLine(report));
    // A refused ending is never silent: the summary lists it among the warnings; --quiet and --json still get it on stderr.
    if (this.jsonEnabled() || this.logLevel === 'quiet') {
      for (const g of Object.values(report.endingGuard ?? {})) if (!g.allowed && g.message) this.notice(`warning: ${g.message}`);
    } else if (!this.jsonLog) writeVerdict(runVerdict(report));
    return report;
  }
}

/** `--only-rejected`: what the selection took from the rejects file, and what it left out. */
function selectionLines(report: RunReport): string[] {
  const sel = report.selection;
  if (!sel) return [];
  const how = [
    sel.keys ? `${sel.keys} key(s)${sel.fromState ? `, ${sel.fromState} of them refused by the server per the state` : ''}` : '',
    sel.lines ? `${sel.lines} file line(s)` : '',
  ]
    .filter(Boolean)
    .join('; ');
  return [
    `--only-rejected: ${sel.selected} row(s) selected by the ${sel.rejects} reject(s) in ${sel.rejectsFile}${how ? ` (${how})` : ''}; ${report.totals.notSelected ?? 0} other row(s) read but not selected, not sent`,
    ...(sel.unreadable ? [`warning: ${sel.unreadable} line(s) of ${sel.rejectsFile} are not rejects and were ignored`] : []),
  ];
}

/** The summary table: a `skipped`, `not selected` or `written` column only when the run has such rows. */
function summaryTable(report: RunReport): { head: string[]; rows: (string | number)[][] } {
  const sel = report.selection;
  const skips = report.totals.skipped > 0; // rows left out by where: or an empty map
  const rows = report.order.map((name) => {
    const c = report.mappings[name];
    return [
      name,
      c.read,
      ...(skips ? [c.skipped] : []),
      ...(sel ? [c.notSelected ?? 0] : []),
      c.created,
      c.updated,
      c.unchanged,
      c.adopted,
      c.rejected,
      c.ended,
      ...(report.dryRun ? [c.written] : []),
    ];
  });
  const head = [
    'mapping',
    'read',
    ...(skips ? ['skipped'] : []),
    ...(sel ? ['not selected'] : []),
    'created',
    'updated',
    'unchanged',
    'adopted',
    'rejected',
    'ended',
    ...(report.dryRun ? ['written'] : []),
  ];
  return { head, rows };
}

/** `--verify-after-load`: the listings after the creates in one line — what they cost, what they found. */
function verificationLine(checks: NonNullable<RunReport['verification']>): string {
  const sum = (f: (v: (typeof checks)[number]) => number) => checks.reduce((n, v) => n + f(v), 0);
  const [dup, missing, again] = [sum((v) => v.duplicateCount), sum((v) => v.missingCount), sum((v) => v.reread?.pages ?? 0)];
  return `Checked ${sum((v) => v.checked)} created key(s) for another writer's copies: ${checks.length} listing(s), ${sum((v) => v.pages)} page(s)${again ? ` + ${again} read again` : ''}, ${(sum((v) => v.durationMs) / 1000).toFixed(1)} s — ${dup} duplicated, ${missing} missing${dup || missing ? ' (see the warnings and the rejects)' : ''}`;
}

/** `--report FILE`: by extension, the page to hand over, Markdown for CI summaries, or the JSON report. */
async function renderReportFile(file: string, report: RunReport, includeRows: boolean, redact: (s: string) => string): Promise<string> {
  const ext = file.toLowerCase().split('.').pop();
  // The JSON report is the `--json` document: with its format version.
  if (ext !== 'html' && ext !== 'htm' && ext !== 'md') return `${redact(JSON.stringify({ ...report, formatVersion: JSON_FORMAT_VERSION }, null, 2))}\n`;
  const [{ readRejectsFile }, { outputKindOf }] = await Promise.all([import('../report/report-model.js'), import('../core/secure-fs.js')]);
  // Rejects sent to a pipe or a device cannot be read back (a FIFO would wait for a writer forever).
  const rejectsStreamed = report.rejectsFile !== undefined && outputKindOf(report.rejectsFile) === 'stream';
  const { rejects } = report.rejectsFile && !rejectsStreamed ? await readRejectsFile(report.rejectsFile, { keepRows: includeRows }) : { rejects: [] };
  const input = { report, rejects, includeRows, rejectsStreamed };
  if (ext === 'md') return (await import('../report/run-report-markdown.js')).renderRunReportMarkdown(input);
  return (await import('../report/run-report-html.js')).renderRunReportHtml(input);
}
