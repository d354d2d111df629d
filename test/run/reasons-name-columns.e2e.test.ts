import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyTree, runCliInProcess } from '../helpers/cli.js';

/*
 * Issue 26, item 2, "Done when": every message of the example clinic's rejects.summary.csv names a column of its
 * export, in the export's own words (`column DOB: …`); the mapping's jargon is in the `detail` column; a care team
 * rejected because its patient was comes after that patient's reject and names its line. Built CLI, dry run (nothing
 * sent); the summary read with csv-parse, the headers read from the export files themselves.
 */

let dir: string;
let rows: Record<string, string>[];

/** The columns of each export file, as the clinic wrote them. */
function exportColumns(): Record<string, string[]> {
  const firstLine = (f: string) => readFileSync(join(dir, f), 'utf8').split(/\r?\n/)[0]!;
  const staff = (JSON.parse(readFileSync(join(dir, 'data/practitioners.json'), 'utf8')) as { staff: Record<string, unknown>[] }).staff;
  return {
    'data/patients.csv': firstLine('data/patients.csv').split(','),
    'data/assignments.csv': firstLine('data/assignments.csv').split(';'),
    'data/practitioners.json': [...new Set(staff.flatMap((s) => Object.keys(s)))],
  };
}

beforeAll(async () => {
  dir = copyTree('examples/clinic', 'care-etl-reasons-');
  const out = join(dir, 'out');
  const res = await runCliInProcess(['run', join(dir, 'mapping.yaml'), '--dry-run', '--out', out, '--progress', 'none']);
  expect(res.code, res.stderr).toBe(1);
  rows = parse(readFileSync(join(out, 'rejects.summary.csv'), 'utf8'), { columns: true, bom: true }) as Record<string, string>[];
});
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("the example clinic's rejects.summary.csv", () => {
  it('names a column of its export first in every message, the mapping jargon apart', () => {
    const columns = exportColumns();
    expect(rows).toHaveLength(9);
    for (const r of rows) {
      const header = columns[r.file!];
      expect(header, r.file).toBeDefined();
      const m = /^columns? ([^:]+): \S/.exec(r.message!);
      expect(m, `${r.file}:${r.line || r.record} ${r.code}: ${r.message}`).not.toBeNull();
      const named = m![1]!.split(/, | … /);
      for (const name of named) expect(header, `${r.code}: ${r.message}`).toContain(name);
      // mapping jargon (the mapping's name, `map`, JSONata) is not in the clinic's sentence
      expect(r.message).not.toMatch(/mapping `|\$lookup|groupBy/);
    }
    const byCode = (code: string, file: string) => rows.find((r) => r.code === code && r.file === file)!.message;
    expect(byCode('date-invalid', 'data/patients.csv')).toBe('column DOB: not a date in the format MM/DD/YYYY (day out of range)');
    expect(byCode('date-invalid', 'data/assignments.csv')).toBe('column START: not a date-time in the format YYYY-MM-DD (month out of range)');
    expect(byCode('lookup-miss', 'data/patients.csv')).toMatch(/^column SEX: /);
    expect(byCode('key-missing', 'data/practitioners.json')).toMatch(/^column npi: /);
    expect(byCode('ref-missing', 'data/assignments.csv')).toMatch(/^column NPI: /);
    expect(rows.find((r) => r.code === 'lookup-miss')!.detail).toContain('$lookup($gender, code, "default")');
  });

  it('lists the cause before its consequence, and the consequence names the row to fix', () => {
    const cause = rows.findIndex((r) => r.mapping === 'patient' && r.key === '000031');
    const consequence = rows.findIndex((r) => r.code === 'ref-rejected');
    expect(cause).toBeGreaterThanOrEqual(0);
    expect(consequence).toBeGreaterThan(cause);
    expect(rows[consequence]!.message).toBe('column MRN: rejected because patient `000031` was rejected (data/patients.csv line 33): fix that row first');
  });
});
