/**
 * `care-etl test --reporter junit`: the cases as JUnit XML, the format CI systems show test results from (GitLab's
 * `artifacts:reports:junit`, Jenkins, GitHub test-report actions). One `<testsuite>` per test file; a file that
 * cannot be loaded is one `<testcase>` in `<error>`. Text is escaped, and characters XML 1.0 forbids are dropped.
 */
import { isAbsolute, relative } from 'node:path';
import { formatIssue, formatLocation } from '../core/issues.js';
import { formatDiff } from './structural-diff.js';
import type { CaseResult, FileResult, TestReport } from './types.js';

// Control characters, lone surrogates and U+FFFE/U+FFFF: not allowed in an XML 1.0 document, even escaped.
const NOT_XML = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' };

/** Text for an attribute value or element content. */
function xmlText(s: string): string {
  return s.replace(NOT_XML, '').replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

const attrs = (a: Record<string, string | number | undefined>) =>
  Object.entries(a)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => ` ${k}="${xmlText(String(v))}"`)
    .join('');
const seconds = (ms: number) => (ms / 1000).toFixed(3);

function shown(p: string, cwd: string): string {
  const rel = relative(cwd, p);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : p;
}

/** The failure's body: each failure's message, its diff lines and its issues (with their mapping positions). */
function failureText(c: CaseResult, cwd: string): string {
  const where = formatLocation(c.location.file ? { ...c.location, file: shown(c.location.file, cwd) } : c.location);
  const lines = where ? [`at ${where}`] : [];
  for (const f of c.failures) lines.push(f.message, ...formatDiff(f.diff ?? []).map((d) => `  ${d}`), ...(f.issues ?? []).map((i) => `  ${formatIssue(i)}`));
  return lines.join('\n');
}

function testcase(c: CaseResult, suite: string, cwd: string): string {
  const head = `    <testcase${attrs({ name: `${c.resource ? `${c.resource} › ` : ''}${c.name}`, classname: suite, file: suite, line: c.location.line, time: seconds(c.durationMs) })}`;
  if (c.status === 'passed') return `${head}/>`;
  if (c.status === 'skipped') return `${head}>\n      <skipped/>\n    </testcase>`;
  const tag = c.status === 'failed' ? 'failure' : 'error';
  return `${head}>\n      <${tag}${attrs({ message: c.failures[0]?.message ?? c.status })}>${xmlText(failureText(c, cwd))}</${tag}>\n    </testcase>`;
}

function testsuite(f: FileResult, cwd: string): string {
  const name = shown(f.file, cwd);
  const count = (s: CaseResult['status']) => f.cases.filter((c) => c.status === s).length;
  if (f.error) {
    const text = [f.error.message, ...f.error.issues.map((i) => formatIssue(i)), ...(f.error.hint ? [`Hint: ${f.error.hint}`] : [])].join('\n');
    return [
      `  <testsuite${attrs({ name, tests: 1, failures: 0, errors: 1, skipped: 0, time: seconds(f.durationMs), file: name })}>`,
      `    <testcase${attrs({ name: '(test file)', classname: name, file: name, time: seconds(f.durationMs) })}>`,
      `      <error${attrs({ message: f.error.message })}>${xmlText(text)}</error>`,
      '    </testcase>',
      '  </testsuite>',
    ].join('\n');
  }
  const counts = { tests: f.cases.length, failures: count('failed'), errors: count('error'), skipped: count('skipped') };
  return [
    `  <testsuite${attrs({ name, ...counts, time: seconds(f.durationMs), file: name })}>`,
    ...f.cases.map((c) => testcase(c, name, cwd)),
    '  </testsuite>',
  ].join('\n');
}

export function renderJunit(report: TestReport, opts: { cwd?: string } = {}): string {
  const cwd = opts.cwd ?? process.cwd();
  const t = report.totals;
  const root = attrs({
    name: 'care-etl test',
    tests: t.cases + t.brokenFiles,
    failures: t.failed,
    errors: t.errors + t.brokenFiles,
    skipped: t.skipped,
    time: seconds(report.durationMs),
  });
  return ['<?xml version="1.0" encoding="UTF-8"?>', `<testsuites${root}>`, ...report.files.map((f) => testsuite(f, cwd)), '</testsuites>', ''].join('\n');
}
