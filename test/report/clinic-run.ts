import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RejectRecord } from '../../src/transform/reject-record.js';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import type { RunReport } from '../../src/pipeline/run-report.js';
import { readRejectsFile } from '../../src/report/report-model.js';
import { copyTree } from '../helpers/cli.js';

/** The example clinic's dry run, in-process, on a private copy: the report and the rejects (rows kept) as `run` leaves them. */
export interface ClinicRun {
  dir: string;
  report: RunReport;
  rejects: RejectRecord[];
  /** Every value of the rejected rows that is patient (or staff) data — names, birth dates, phones, e-mails, addresses — never keys. */
  personalValues: string[];
}

export async function clinicDryRun(): Promise<ClinicRun> {
  const dir = copyTree('examples/clinic', 'care-etl-report-');
  const out = join(dir, 'out');
  const report = await runPipeline({ mappingFile: join(dir, 'mapping.yaml'), dryRun: true, outDir: out, rejectsFile: join(out, 'rejects.ndjson') });
  const { rejects, unreadable } = await readRejectsFile(join(out, 'rejects.ndjson'), { keepRows: true });
  if (unreadable) throw new Error(`${unreadable} unreadable reject line(s)`);
  return { dir, report, rejects, personalValues: personalValuesOf(dir, rejects) };
}

/**
 * Read from the export itself (not from the rejects): the FIRST, LAST, DOB, PHONE, EMAIL, ADDRESS of every patient
 * whose row was rejected (by line) or whose key a reject names (care teams of rejected patients), and the names of
 * the rejected practitioner records.
 */
function personalValuesOf(dir: string, rejects: RejectRecord[]): string[] {
  const lines = readFileSync(join(dir, 'data/patients.csv'), 'utf8').split(/\r?\n/);
  const head = lines[0]!.split(',');
  const col = (name: string) => head.indexOf(name);
  const rejectedLines = new Set(rejects.filter((r) => r.mapping === 'patient').map((r) => r.line!));
  const rejectedKeys = new Set(rejects.map((r) => r.key).filter((k): k is string => k !== undefined));
  const values = new Set<string>();
  lines.forEach((text, i) => {
    if (i === 0 || !text) return;
    const f = text.split(',');
    if (!rejectedLines.has(i + 1) && !rejectedKeys.has(f[col('MRN')]!)) return;
    for (const c of ['FIRST', 'LAST', 'DOB', 'PHONE', 'EMAIL', 'ADDRESS']) {
      const v = f[col(c)];
      if (v && v.length >= 3) values.add(v);
    }
  });
  const staff = (JSON.parse(readFileSync(join(dir, 'data/practitioners.json'), 'utf8')) as { staff: Record<string, unknown>[] }).staff;
  for (const r of rejects.filter((x) => x.mapping === 'practitioner')) {
    const p = staff[r.record! - 1]!;
    for (const k of ['firstName', 'lastName']) if (typeof p[k] === 'string' && (p[k] as string).length >= 3) values.add(p[k] as string);
  }
  return [...values];
}

/** The example clinic's 9 rejects: where each is, its mapping, code and key (README: 9 deliberately bad rows). */
export const CLINIC_REJECTS = [
  { mapping: 'patient', stage: 'source', code: 'csv-ragged', where: 'data/patients.csv: line 21', key: undefined },
  { mapping: 'patient', stage: 'transform', code: 'date-invalid', where: 'data/patients.csv: line 33', key: '000031' },
  { mapping: 'patient', stage: 'transform', code: 'key-missing', where: 'data/patients.csv: line 34', key: undefined },
  { mapping: 'patient', stage: 'transform', code: 'lookup-miss', where: 'data/patients.csv: line 35', key: '000033' },
  { mapping: 'patient', stage: 'transform', code: 'duplicate-key', where: 'data/patients.csv: line 36', key: '000005' },
  { mapping: 'practitioner', stage: 'transform', code: 'key-missing', where: 'data/practitioners.json: record 7', key: undefined },
  { mapping: 'careteam', stage: 'transform', code: 'ref-missing', where: 'data/assignments.csv: lines 3, 4, 5, 48', key: '000002' },
  { mapping: 'careteam', stage: 'transform', code: 'date-invalid', where: 'data/assignments.csv: lines 6, 49', key: '000003' },
  { mapping: 'careteam', stage: 'transform', code: 'ref-rejected', where: 'data/assignments.csv: line 47', key: '000031' },
] as const;

/** Text of an HTML fragment: tags dropped, the few entities the report uses decoded, white space collapsed. */
export function textOf(html: string): string {
  return html
    .replace(/<(script|style)\b[\s\S]*?<\/\1>/gi, ' ')
    .replace(/<\/?(span|code|strong|em|b|i|a)\b[^>]*>/gi, '') // inline: no break in the text
    .replace(/<[^>]*>/g, ' ')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&')
    .replace(/\s+/g, ' ')
    .trim();
}

/** The rows of the rejects-by-reason table (`<tr id="reason-N">`), as text, in order. */
export function reasonRows(html: string): string[] {
  return [...html.matchAll(/<tr id="reason-\d+">([\s\S]*?)<\/tr>/g)].map((m) => textOf(m[1]!));
}
