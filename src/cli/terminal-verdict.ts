/**
 * The one verdict line at the end of `run`, `plan`, `export` and `test` (after Terraform's "Apply complete!" and
 * dbt's "Done. PASS=…"): what was done, how long it took, at what rate. Written to stderr, coloured by outcome.
 */
import { isoStamp } from './log-line.js';
import type { PlanDocument } from '../pipeline/plan.js';
import type { RunReport } from '../pipeline/run-report.js';
import type { TestReport } from '../mapping-tests/types.js';
import type { ExportSummary } from '../export/run-export.js';
import { colourOn, painter, terminalWidth, wrapLines, type TermStream } from './terminal.js';

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const rate = (n: number, ms: number, unit: string) => (ms > 0 && n > 0 ? ` (${Math.round((n * 1000) / ms).toLocaleString('en-US')} ${unit}/s)` : '');

type Tone = 'green' | 'yellow' | 'red';

export function runVerdict(r: RunReport): { text: string; tone: Tone } {
  const [t, ms] = [r.totals, r.durationMs];
  const what = r.interrupted ? 'Run cancelled' : r.stoppedEarly ? 'Run stopped early' : r.dryRun ? 'Dry run complete' : 'Run complete';
  const counts = [
    `${t.created} created`,
    `${t.updated} updated`,
    `${t.rejected} rejected`,
    `${t.unchanged} unchanged`,
    t.ended ? `${t.ended} ended` : '',
    r.dryRun ? `${t.written} written` : '',
  ].filter(Boolean);
  const tone: Tone = r.exitCode === 0 ? 'green' : r.exitCode === 1 ? 'yellow' : 'red';
  return { text: `${what}: ${counts.join(', ')} in ${seconds(ms)}${rate(t.read, ms, 'rows')}`, tone };
}

export function planVerdict(doc: PlanDocument): { text: string; tone: Tone } {
  const [t, ms] = [doc.totals, doc.durationMs];
  const text = `Plan: ${t.created} to create, ${t.updated} to update, ${t.ended} to end; ${t.adopted} adopted from the server, ${t.unchanged} unchanged, ${t.rejected} row(s) would be rejected${t.skipped ? `, ${t.skipped} skipped (where: or a map producing nothing)` : ''}. Nothing was written. Planned in ${seconds(ms)}${rate(t.read, ms, 'rows')}.`;
  return { text: doc.interrupted ? `${text} Interrupted: incomplete.` : text, tone: doc.interrupted ? 'red' : t.rejected ? 'yellow' : 'green' };
}

/** `Exported 35 rows … in 1.2 s (29 rows/s)`: the export's summary sentence with its rate. */
export function exportVerdict(s: ExportSummary): { text: string; tone: Tone } {
  const where = s.out === '-' ? 'stdout' : s.out;
  const since = s.since ? ` updated since ${s.since}` : s.sinceMode === 'last' ? ' (no watermark yet: everything)' : '';
  const n = (x: number) => x.toLocaleString('en-US');
  const wide = s.layout === 'wide' ? ` (wide: ${n(s.observations)} observations by patient and day)` : '';
  const pseudo = s.pseudonymized ? ', pseudonymised' : '';
  return {
    text: `Exported ${n(s.rows)} rows${wide}${since}${pseudo} from ${s.pages} pages (${n(s.scanned)} observations read) to ${where} in ${seconds(s.durationMs)}${rate(s.rows, s.durationMs, 'rows')}`,
    tone: 'green',
  };
}

export function testVerdict(r: TestReport): { text: string; tone: Tone } {
  const t = r.totals;
  const failed = t.failed + t.errors;
  const verdict = failed || t.brokenFiles || !t.files ? 'FAIL' : 'PASS';
  return {
    text: `${verdict}: PASS=${t.passed} FAIL=${t.failed} ERROR=${t.errors} SKIP=${t.skipped} (${t.cases} case${t.cases === 1 ? '' : 's'} in ${t.files} file${t.files === 1 ? '' : 's'}) in ${seconds(r.durationMs)}`,
    tone: verdict === 'PASS' ? 'green' : 'red',
  };
}

/** The verdict on `stream` (stderr): on a TTY coloured and wrapped at words to the width; plain otherwise. */
export function writeVerdict(v: { text: string; tone: Tone }, stream: TermStream = process.stderr): void {
  const paint = painter(colourOn(stream))[v.tone];
  // In a log every line starts with its timestamp, the verdict too (docs/terminal.md "In a log").
  const lines = stream.isTTY ? wrapLines(v.text, terminalWidth(stream), '  ') : [`${isoStamp()} ${v.text}`];
  stream.write(`${lines.map(paint).join('\n')}\n`);
}
