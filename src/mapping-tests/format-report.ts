/** Terminal rendering of `care-etl test` results. */
import { isAbsolute, relative } from 'node:path';
import { formatIssue, formatLocation, type Issue } from '../core/issues.js';
import { formatDiff } from './structural-diff.js';
import type { CaseResult, FileResult, TestReport } from './types.js';

export interface FormatOptions {
  cwd?: string;
  /** Colours (a TTY). */
  color?: boolean;
}

const paint = (on: boolean | undefined, code: number, s: string) => (on ? `\u001b[${code}m${s}\u001b[0m` : s);

function shortPath(p: string, cwd: string): string {
  const rel = relative(cwd, p);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : p;
}

function ms(n: number): string {
  return n >= 1000 ? `${(n / 1000).toFixed(1)} s` : `${n < 10 ? n.toFixed(1) : Math.round(n)} ms`;
}

function issueLines(issues: Issue[], cwd: string, indent: string): string[] {
  return issues.map(
    (i) => `${indent}${formatIssue({ ...i, location: i.location?.file ? { ...i.location, file: shortPath(i.location.file, cwd) } : i.location })}`,
  );
}

function formatCase(c: CaseResult, opts: FormatOptions = {}): string[] {
  const cwd = opts.cwd ?? process.cwd();
  const mark = c.status === 'passed' ? paint(opts.color, 32, '✓') : c.status === 'skipped' ? paint(opts.color, 33, '-') : paint(opts.color, 31, '✗');
  const label = `${c.resource ? `${c.resource} › ` : ''}${c.name}`;
  const lines = [`  ${mark} ${label}  ${paint(opts.color, 2, c.status === 'skipped' ? '(skipped)' : `(${ms(c.durationMs)})`)}`];
  if (c.status === 'failed' || c.status === 'error') {
    const where = formatLocation(c.location.file ? { ...c.location, file: shortPath(c.location.file, cwd) } : c.location);
    if (where) lines.push(`      ${paint(opts.color, 2, `at ${where}`)}`);
    for (const f of c.failures) {
      lines.push(`      ${f.message}`);
      if (f.diff?.length) {
        lines.push(`        ${paint(opts.color, 2, 'path: expected → got')}`);
        for (const d of formatDiff(f.diff)) lines.push(`        ${d}`);
      }
      if (f.issues?.length) lines.push(...issueLines(f.issues, cwd, '        '));
    }
  }
  return lines;
}

export function formatFile(r: FileResult, opts: FormatOptions = {}): string[] {
  const cwd = opts.cwd ?? process.cwd();
  const head = `${shortPath(r.file, cwd)}${r.mappingFile ? `  → ${shortPath(r.mappingFile, cwd)}` : ''}`;
  if (r.error) {
    return [
      `${paint(opts.color, 31, '✗')} ${head}`,
      `    ${r.error.message}`,
      ...issueLines(r.error.issues, cwd, '      '),
      ...(r.error.hint ? [`    Hint: ${r.error.hint}`] : []),
    ];
  }
  return [head, ...r.cases.flatMap((c) => formatCase(c, opts))];
}

export function formatSummary(report: TestReport, opts: FormatOptions = {}): string {
  const t = report.totals;
  if (t.files === 0) return 'No mapping test files (*.test.yaml) found.';
  const files = `${t.files} file${t.files === 1 ? '' : 's'}${t.brokenFiles ? paint(opts.color, 31, ` (${t.brokenFiles} broken)`) : ''}`;
  const failed = t.failed + t.errors;
  // The last line has the plain `N passed, N failed[, N skipped]` form that CI systems read.
  const closing = [`${t.passed} passed`, `${failed} failed`, ...(t.skipped ? [`${t.skipped} skipped`] : [])].join(', ');
  return [
    `${t.cases} case${t.cases === 1 ? '' : 's'} · ${files} · ${ms(report.durationMs)}${t.errors ? paint(opts.color, 31, ` · ${t.errors} broken`) : ''}`,
    `cases: ${paint(opts.color && failed > 0, 31, closing)}`,
  ].join('\n');
}
