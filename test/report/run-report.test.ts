import { rmSync } from 'node:fs';
import { beforeAll, afterAll, describe, expect, it } from 'vitest';
import { registerSecret } from '../../src/core/secret.js';
import type { RejectRecord } from '../../src/transform/reject-record.js';
import type { RunReport } from '../../src/pipeline/run-report.js';
import { groupRejects, normaliseMessage } from '../../src/report/report-model.js';
import { renderRunReportHtml } from '../../src/report/run-report-html.js';
import { renderRunReportMarkdown } from '../../src/report/run-report-markdown.js';
import { CLINIC_REJECTS, clinicDryRun, reasonRows, textOf, type ClinicRun } from './clinic-run.js';

/*
 * Issue 14, item 3: the run report to hand over, as one self-contained HTML file and as Markdown for CI job
 * summaries, built from a real run (the example clinic's dry run, in-process) and its rejects file. The browser
 * side (headless Chromium renders it) is run-report-browser.test.ts.
 */

let clinic: ClinicRun;
beforeAll(async () => {
  clinic = await clinicDryRun();
});
afterAll(() => {
  if (clinic) rmSync(clinic.dir, { recursive: true, force: true });
});

const wordIn = (text: string, value: string) =>
  new RegExp(`(^|[^\\p{L}\\p{N}])${value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}($|[^\\p{L}\\p{N}])`, 'u').test(text);

/** Every tag of the page (text escapes `<` and `>`, so tags are exactly the `<…>` spans). */
const tagsOf = (html: string) => [...html.matchAll(/<[^>]*>/g)].map((m) => m[0]);

/** A synthetic report around some rejects (for escaping and grouping cases the example clinic does not have). */
function syntheticReport(over: Partial<RunReport> = {}): RunReport {
  const counts = { read: 10, skipped: 0, created: 5, updated: 1, unchanged: 1, adopted: 1, rejected: 3, ended: 1, written: 0 };
  return {
    mappingFile: '/clinic/mapping.yaml',
    dryRun: false,
    target: { baseUrl: 'https://user:pw@care.example.org/api', tenantId: 't-1', embedded: false },
    runId: 7,
    startedAt: '2026-01-02T03:04:05.000Z',
    finishedAt: '2026-01-02T03:05:10.000Z',
    durationMs: 65_000,
    order: ['patient'],
    mappings: { patient: { ...counts } },
    totals: { ...counts },
    rejectsFile: '/clinic/.care-etl/rejects.ndjson',
    ended: [{ mapping: 'patient', key: 'K-9', serverId: 'ct-1', member: 'Practitioner/p-1' }],
    warnings: ['careteam: onMissing: end skipped <b>now</b>'],
    indexes: [{ resourceType: 'Patient', reason: 'keys the state does not know', pages: 3, resources: 2500, pageSize: 1000, durationMs: 1234 }],
    exitCode: 1,
    ...over,
  };
}

const reject = (over: Partial<RejectRecord> & { message?: string; code?: string }): RejectRecord => {
  const { message = 'bad', code = 'invalid', ...rest } = over;
  return {
    stage: 'transform',
    mapping: 'patient',
    source: 'patients',
    file: '/clinic/data/patients.csv',
    issues: [{ severity: 'error', code: code as never, message }],
    ...rest,
  };
};

describe('the example clinic (dry run): HTML report', () => {
  it('groups the 9 rejects by reason, each with its file, lines or record and source key', () => {
    const html = renderRunReportHtml({ report: clinic.report, rejects: clinic.rejects });
    expect(textOf(html)).toContain('Rejected rows by reason (9 rows, 9 reasons)');
    const rows = reasonRows(html);
    expect(rows).toHaveLength(9);
    for (const want of CLINIC_REJECTS) {
      const row = rows.find((r) => r.includes(` ${want.code} `) && r.includes(want.where) && r.includes(` ${want.mapping} `));
      expect(row, `${want.mapping} ${want.code} at ${want.where}`).toBeDefined();
      expect(row).toMatch(/^R\d+ 1 /); // one row each
      expect(row).toContain(` ${want.stage} `);
      if (want.key) expect(row).toContain(want.key);
      else expect(row).toContain('1 without a key');
    }
    // a message with its figures, unchanged (one row: nothing normalised)
    expect(rows.find((r) => r.includes('csv-ragged'))).toContain('columns MRN … ZIP: 12 values for 11 columns (header, line 1)');
    // the failing expression's place in the mapping
    expect(rows.find((r) => r.includes('lookup-miss'))).toContain('at mapping.yaml:32:19');
  });

  it('shows the header, the counts per mapping, the chart, and what a dry run does not have', () => {
    const html = renderRunReportHtml({ report: clinic.report, rejects: clinic.rejects });
    const text = textOf(html);
    expect(text).toContain(`Mapping file ${clinic.report.mappingFile}`);
    expect(text).toContain('Exit code 1 — some rows were rejected');
    expect(text).toContain('dry run');
    expect(text).toContain('Target none (dry run)');
    const counts = textOf(/<table class="counts">[\s\S]*?<\/table>/.exec(html)![0]);
    expect(counts).toContain('mapping read created updated unchanged adopted rejected ended written');
    expect(counts).toContain('patient 35 0 0 0 0 5 0 30');
    expect(counts).toContain('practitioner 7 0 0 0 0 1 0 6');
    expect(counts).toContain('careteam 48 0 0 0 0 3 0 28');
    expect(counts).toContain('total 90 0 0 0 0 9 0 64');
    const svg = /<svg class="chart"[\s\S]*?<\/svg>/.exec(html)![0];
    expect(svg.match(/<rect class="o-written"/g)).toHaveLength(3);
    expect(svg.match(/<rect class="o-rejected"/g)).toHaveLength(3);
    expect(svg).toContain('<title>patient: rejected 5</title>');
    expect(text).toContain('Nothing was ended.');
    expect(text).toContain('Dry run: the server was not contacted.');
    expect(text).toMatch(/Warnings None\./);
  });

  it('holds no patient data of the rejected rows — names, birth dates, phones, e-mails, addresses — unless includeRows', () => {
    expect(clinic.personalValues).toEqual(expect.arrayContaining(['Sam', 'Quinn', 'Grace', 'Holm', 'Peter', 'Lund', 'Lena', 'Berg', 'Temp', 'Locum']));
    const html = renderRunReportHtml({ report: clinic.report, rejects: clinic.rejects });
    const md = renderRunReportMarkdown({ report: clinic.report, rejects: clinic.rejects });
    for (const v of clinic.personalValues) {
      expect(wordIn(html, v), `HTML holds ${v}`).toBe(false);
      expect(wordIn(md, v), `Markdown holds ${v}`).toBe(false);
    }
    const withRows = renderRunReportHtml({ report: clinic.report, rejects: clinic.rejects, includeRows: true });
    const mdRows = renderRunReportMarkdown({ report: clinic.report, rejects: clinic.rejects, includeRows: true });
    // the rows' own content (patient rows and the rejected staff record; the care team rows name no one)
    for (const v of ['Sam', 'Quinn', 'Grace', 'Holm', 'Peter', 'Lund', 'Lena', 'Berg', 'Temp', 'Locum']) {
      expect(wordIn(withRows, v), `HTML --include-rows lacks ${v}`).toBe(true);
      expect(wordIn(mdRows, v), `Markdown --include-rows lacks ${v}`).toBe(true);
    }
    expect(textOf(withRows)).toContain('Contains patient data');
    expect(withRows).toContain('000034,Sam,Quinn,03/03/1983'); // a source-stage reject: the line as read
    expect(mdRows).toContain('> **Contains patient data:**');
  });

  it('references nothing outside the file: no script, no src/href, no url(), a CSP forbidding every fetch', () => {
    for (const includeRows of [false, true]) {
      const html = renderRunReportHtml({ report: clinic.report, rejects: clinic.rejects, includeRows });
      expect(html).toContain(`<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">`);
      expect(html).not.toMatch(/<script|<link|<img|<iframe|<object|<embed|@import|url\(/i);
      for (const tag of tagsOf(html)) expect(tag).not.toMatch(/https?:|\/\/|\b(src|href|xlink:href|srcset|action)=/i);
    }
  });
});

describe('escaping hostile data', () => {
  const hostile = [
    reject({ key: '<script>alert("key")</script>', line: 2, message: 'value `<script>alert(1)</script>` is not <b>bold</b> & "quoted"' }),
    reject({ key: 'k|2', line: 3, message: 'a | pipe\nand a line break', code: 'x|y' }),
    reject({
      key: 'k3',
      line: 4,
      message: '![img](http://evil.invalid/p.png) [link](https://evil.invalid) *em* _u_ ~s~ $x$ `code` <img src="http://evil.invalid/x.png"> \u202Eevil\u202C',
    }),
  ];
  const report = syntheticReport({ mappings: { 'pa<t>ient': syntheticReport().mappings.patient! }, order: ['pa<t>ient'] });

  it('HTML: messages, keys, codes and names are text, never markup', () => {
    const html = renderRunReportHtml({ report, rejects: hostile, title: 'Report <i>x</i>', includeRows: true });
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toContain('<b>');
    expect(html).not.toContain('<i>');
    expect(html).toContain('&lt;script&gt;alert(&quot;key&quot;)&lt;/script&gt;');
    expect(html).toContain('&lt;b&gt;bold&lt;/b&gt; &amp; &quot;quoted&quot;');
    expect(html).toContain('pa&lt;t&gt;ient');
    expect(html).toContain('\\u{202e}evil\\u{202c}'); // bidi controls shown, not obeyed
    expect(html).not.toContain('\u202E');
    for (const tag of tagsOf(html)) expect(tag).not.toMatch(/https?:|evil/i);
    // the URLs are there, as text
    expect(textOf(html)).toContain('<img src="http://evil.invalid/x.png">');
    // the target URL: as text, without its user info
    expect(textOf(html)).toContain('Target https://care.example.org/api');
    expect(html).not.toContain('user:pw');
  });

  it('Markdown: no HTML, link, image or emphasis, and | and line breaks stay inside their cell', () => {
    const md = renderRunReportMarkdown({ report, rejects: hostile, title: 'Report <i>x</i>' });
    expect(md).not.toMatch(/<(?!br>)[a-z/!]/i); // the only tag is our own <br>
    expect(md).toContain('&lt;script&gt;alert("key")&lt;/script&gt;');
    expect(md).toContain('a \\| pipe<br>and a line break');
    expect(md).toContain('k\\|2');
    expect(md).toContain('x\\|y');
    expect(md).toContain('!\\[img\\](http://evil.invalid/p.png) \\[link\\](https://evil.invalid) \\*em\\* \\_u\\_ \\~s\\~ \\$x\\$ \\`code\\`');
    expect(md).toContain('\\\\u{202e}evil');
    expectWellFormedTables(md);
  });

  it('passes the result through redactKnown: a registered secret echoed in a message or key is not in the output', () => {
    const secret = 'sk-report-test-0123456789';
    registerSecret(secret);
    const rejects = [reject({ key: `key-${secret}`, line: 5, message: `server said: invalid key ${secret}` })];
    const html = renderRunReportHtml({ report: syntheticReport({ warnings: [`w ${secret}`] }), rejects, includeRows: true });
    const md = renderRunReportMarkdown({ report: syntheticReport({ warnings: [`w ${secret}`] }), rejects, includeRows: true });
    for (const out of [html, md]) {
      expect(out).not.toContain(secret);
      expect(out).toMatch(/\\?\[redacted\\?\]/); // Markdown: escaped brackets
    }
  });
});

describe('grouping rejects by reason', () => {
  it('normalises backticked values and figures: ragged rows of different widths are one reason', () => {
    expect(normaliseMessage('expected 11 fields (header, line 1), got 12')).toBe(normaliseMessage('expected 11 fields (header, line 1), got 13'));
    expect(normaliseMessage('key `000005` was already used by line 6 of this source')).toBe('key `…` was already used by line # of this source');
    const rejects = [
      reject({ stage: 'source', line: 21, code: 'csv-ragged', message: 'expected 11 fields (header, line 1), got 12' }),
      reject({ stage: 'source', line: 40, code: 'csv-ragged', message: 'expected 11 fields (header, line 1), got 13' }),
      reject({ stage: 'source', line: 30, code: 'csv-ragged', message: 'expected 11 fields (header, line 1), got 12' }),
      reject({ key: 'A', line: 50, code: 'duplicate-key', message: 'key `A` was already used by line 6 of this source' }),
      reject({ key: 'B', line: 51, code: 'duplicate-key', message: 'key `B` was already used by line 7 of this source' }),
      // same code and message, another mapping: another reason
      reject({ mapping: 'other', stage: 'source', line: 9, code: 'csv-ragged', message: 'expected 11 fields (header, line 1), got 12' }),
    ];
    const groups = groupRejects(rejects, { baseDir: '/clinic' });
    expect(groups.map((g) => [g.mapping, g.code, g.count])).toEqual([
      ['patient', 'csv-ragged', 3],
      ['patient', 'duplicate-key', 2],
      ['other', 'csv-ragged', 1],
    ]);
    const ragged = groups[0]!;
    expect(ragged.reason).toBe('# values for # columns (header, line #): a value holding the delimiter or a quote must be quoted');
    expect(ragged.example).toBe('12 values for 11 columns (header, line 1): a value holding the delimiter or a quote must be quoted');
    expect(ragged.places).toEqual([{ file: 'data/patients.csv', lines: { items: [21, 30, 40], more: 0 }, records: { items: [], more: 0 } }]);
    expect(ragged.keyless).toBe(3);
    expect(groups[1]!.keys.items).toEqual(['A', 'B']);
    expect(groups[2]!.reason).toBe('12 values for 11 columns (header, line 1): a value holding the delimiter or a quote must be quoted'); // one message: as it is

    const html = renderRunReportHtml({ report: syntheticReport({ totals: { ...syntheticReport().totals, rejected: 6 } }), rejects });
    const rows = reasonRows(html);
    expect(rows[0]).toBe(
      'R1 3 # values for # columns (header, line #): a value holding the delimiter or a quote must be quoted e.g. 12 values for 11 columns (header, line 1): a value holding the delimiter or a quote must be quoted mapping patient · source · csv-ragged data/patients.csv: lines 21, 30, 40 3 without a key',
    );
    expect(rows[1]).toContain('data/patients.csv: lines 50, 51 A, B');
  });

  it('keeps distinct failing expressions (mapping locations) and fields apart; further issues are listed under the first', () => {
    const at = (line: number) => ({ file: '/clinic/mapping.yaml', line, column: 5 });
    const rejects: RejectRecord[] = [
      {
        ...reject({ key: 'a', line: 2, code: 'date-invalid', message: 'not a date `x`' }),
        issues: [{ severity: 'error', code: 'date-invalid' as never, message: 'not a date `x`', location: at(10) }],
      },
      { ...reject({ key: 'b', line: 3 }), issues: [{ severity: 'error', code: 'date-invalid' as never, message: 'not a date `y`', location: at(11) }] },
      {
        ...reject({ key: 'c', line: 4, stage: 'validate' }),
        stage: 'validate',
        issues: [
          { severity: 'error', code: 'type' as never, message: 'must be string', path: '/telecom/0/value' },
          { severity: 'error', code: 'format' as never, message: 'must match format "date"', path: '/birthDate' },
        ],
      },
      {
        ...reject({ key: 'd', line: 5 }),
        stage: 'validate',
        issues: [{ severity: 'error', code: 'type' as never, message: 'must be string', path: '/telecom/1/value' }],
      },
    ];
    const groups = groupRejects(rejects, { baseDir: '/clinic' });
    expect(groups.map((g) => [g.code, g.count, g.at, g.path])).toEqual([
      ['type', 2, undefined, '/telecom/#/value'],
      ['date-invalid', 1, 'mapping.yaml:10:5', undefined],
      ['date-invalid', 1, 'mapping.yaml:11:5', undefined],
    ]);
    expect(groups[0]!.moreIssues).toEqual([{ code: 'format', message: 'must match format "date"', count: 1 }]);
  });

  it('lists at most 500 lines and keys per reason, and says how many more', () => {
    const rejects = Array.from({ length: 620 }, (_, i) => reject({ key: `K${i}`, line: i + 2, code: 'lookup-miss', message: 'not in `gender`' }));
    const html = renderRunReportHtml({ report: syntheticReport({ totals: { ...syntheticReport().totals, rejected: 620 } }), rejects });
    const row = reasonRows(html)[0]!;
    expect(row).toContain('… and 120 more (all in the rejects summary CSV)');
    expect(row).toContain('K499');
    expect(row).not.toContain('K500');
  });
});

describe('a run against a server (synthetic report)', () => {
  it('shows target, tenant, run, ended, reconciliation, warnings, and an interruption', () => {
    const report = syntheticReport({
      interrupted: true,
      stoppedEarly: 'interrupted (SIGINT/SIGTERM): the rows not read yet are loaded by the next run',
      exitCode: 3,
    });
    const rejects = [reject({ key: 'K1', line: 2 }), reject({ key: 'K2', line: 3 }), reject({ key: 'K3', line: 4 })];
    const text = textOf(renderRunReportHtml({ report, rejects }));
    expect(text).toContain('Exit code 3 — could not complete');
    expect(text).toContain('Interrupted (SIGINT/SIGTERM): interrupted (SIGINT/SIGTERM)');
    expect(text).toContain('Tenant t-1');
    expect(text).toContain('Run #7');
    expect(text).toContain('Started 2026-01-02 03:04:05 UTC Finished 2026-01-02 03:05:10 UTC Duration 1 min 05 s');
    expect(text).toContain('Ended (1) mapping source key server id member patient K-9 ct-1 Practitioner/p-1');
    expect(text).toContain('Reconciliation (1 listing, 2,500 resources, 3 pages)');
    expect(text).toContain('Patient 2,500 3 1,000 1.2 s keys the state does not know');
    expect(text).toContain('careteam: onMissing: end skipped <b>now</b>');

    const md = renderRunReportMarkdown({ report, rejects });
    expect(md).toContain('| Exit code | 3 — could not complete');
    expect(md).toContain('**7 resources loaded (patient 7); 3 rows need fixing in the export — see below; the run stopped before the end');
    expect(md).toContain('| patient | K-9 | ct-1 | Practitioner/p-1 |');
    expect(md).toContain('| Patient | 2,500 | 3 | 1,000 | 1.2 s | keys the state does not know |');
    expectWellFormedTables(md);
  });

  it("says when the rejects given do not match the run's count", () => {
    const text = textOf(renderRunReportHtml({ report: syntheticReport(), rejects: [] }));
    expect(text).toContain('The rejects file holds 0 reject(s) but the run counted 3');
    expect(text).toContain('No row was rejected.');
  });
});

describe('the example clinic (dry run): Markdown report', () => {
  it('has the same content as well-formed GitHub tables', () => {
    const md = renderRunReportMarkdown({ report: clinic.report, rejects: clinic.rejects });
    expectWellFormedTables(md);
    expect(md).toContain('### Rejected rows by reason (9 rows, 9 reasons)');
    expect(md).toContain('| patient | 35 | 0 | 0 | 0 | 0 | 5 | 0 | 30 |');
    expect(md).toContain('| **total** | **90** | **0** | **0** | **0** | **0** | **9** | **0** | **64** |');
    const reasons = md.split('\n').filter((l) => /^\| R\d+ \|/.test(l));
    expect(reasons).toHaveLength(9);
    for (const want of CLINIC_REJECTS) {
      const row = reasons.find((l) => l.includes(`| ${want.mapping} | ${want.stage} | ${want.code} |`) && l.includes(want.where));
      expect(row, `${want.mapping} ${want.code} at ${want.where}`).toBeDefined();
      expect(row).toContain(want.key ?? '_1 without a key_');
    }
    // backticks and $ of the messages are escaped (no code span, no math)
    expect(reasons.find((l) => l.includes('lookup-miss'))).toContain(
      'column SEX: the code (1 character) is not in the list \\`gender\\` (known: M, F, U)<br>_map, add it or pass a default: \\$lookup(\\$gender, code, "default")_',
    );
    expect(md).toMatch(/^\| patient \| █+░+ \| written \(dry run\) 30 · rejected 5 \|$/m);
  });
});

/** Every GFM table: header, delimiter row, and each row with as many cells (unescaped `|`) as the header. */
function expectWellFormedTables(md: string): void {
  const lines = md.split('\n');
  const cells = (line: string) => {
    let n = 0;
    for (let i = 0; i < line.length; i++) {
      if (line[i] === '\\') i++;
      else if (line[i] === '|') n++;
    }
    return n;
  };
  let tables = 0;
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i]!.startsWith('|') || (i > 0 && lines[i - 1]!.startsWith('|'))) continue;
    tables++;
    expect(lines[i - 1], 'a blank line before a table').toBe('');
    const width = cells(lines[i]!);
    expect(lines[i + 1], `delimiter row of the table at line ${i + 1}`).toMatch(/^\|( (---|--:) \|)+$/);
    expect(cells(lines[i + 1]!)).toBe(width);
    for (let j = i + 1; j < lines.length && lines[j]!.startsWith('|'); j++) {
      expect(lines[j]!.endsWith('|') && !lines[j]!.endsWith('\\|'), `row ends with its own |: ${lines[j]}`).toBe(true);
      expect(cells(lines[j]!), `cells of ${lines[j]}`).toBe(width);
    }
  }
  expect(tables).toBeGreaterThan(0);
}
