import { chmodSync, existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CareEtlError } from '../../src/core/issues.js';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import type { RunReport } from '../../src/pipeline/run-report.js';
import { RejectsWriter } from '../../src/pipeline/rejects.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { copyTree, runCliInProcess } from '../helpers/cli.js';

/*
 * Issue 12 (sources half), end to end: malformed sources lose nothing silently.
 *  - a stray quote costs its line, the rows after it load;
 *  - a record nested 5,000 deep is a reject with its line, the rows after it are read (the rejects writer never
 *    throws on a pathological row);
 *  - every source is checked before anything is written: a missing second source is exit 2 with truly nothing
 *    sent, recorded or written;
 *  - a dry run leaves no stale output of a previous run;
 *  - control characters from source text never reach the terminal raw.
 */

const API_KEY = 'e2e-source-hardening-key';
let sb: Sandbox;
let env: Record<string, string>;

beforeAll(async () => {
  sb = await startSandbox({ port: 0, apiKey: API_KEY, emrId: 'emr-src', tenants: ['t-src'] });
  env = { CARE_BASE_URL: sb.url, CARE_API_KEY: API_KEY, CARE_EMR_ID: 'emr-src', CARE_TENANT_ID: 't-src', NO_COLOR: '1' };
});
afterAll(async () => {
  await sb.close();
});

const lines = (file: string): Record<string, unknown>[] =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);

const resourcesOnServer = (): number => Object.values(sb.stats().resources).reduce((n, byType) => n + Object.values(byType).reduce((a, b) => a + b, 0), 0);

/** A folder with a patient mapping over `file` (CSV or NDJSON). */
function patientProject(file: string, content: string, key = 'MRN'): string {
  const dir = copyTree('test/fixtures/run/clean', 'care-etl-src-');
  writeFileSync(join(dir, 'data', file), content);
  const mapping = readFileSync(join(dir, 'mapping.yaml'), 'utf8').replace('path: data/patients.csv', `path: data/${file}`).replace('key: MRN', `key: ${key}`);
  writeFileSync(join(dir, 'mapping.yaml'), mapping);
  return dir;
}

const HEADER = 'MRN,FIRST,LAST,DOB,SEX';
const row = (i: number): string => `${String(i).padStart(6, '0')},Given${i},Family${i},01/03/1989,F`;

describe('malformed sources lose nothing silently', () => {
  it('a stray quote (`"ab" ,2`) on line 3 costs that line: every later row is written (dry run, built CLI)', async () => {
    const rows = [HEADER];
    for (let i = 1; i <= 2_000; i++) rows.push(i === 2 ? '"ab" ,2' : row(i));
    const dir = patientProject('patients.csv', rows.join('\n') + '\n');
    const out = join(dir, 'out');
    const res = await runCliInProcess(['run', join(dir, 'mapping.yaml'), '--dry-run', '--out', out, '--json'], { env });
    expect(res.code, res.stderr).toBe(1);
    const report = JSON.parse(res.stdout) as RunReport;
    expect(report.totals).toMatchObject({ read: 2_000, rejected: 1, written: 1_999 });
    expect(lines(join(out, 'Patient.ndjson'))).toHaveLength(1_999);
    const rejects = lines(join(out, 'rejects.ndjson'));
    expect(rejects).toHaveLength(1);
    expect(rejects[0]).toMatchObject({ stage: 'source', line: 3, record: 2, raw: '"ab" ,2', issues: [{ code: 'csv-quote' }] });
  });

  it('an NDJSON record nested 5,000 deep and lacking its key: a reject with its line, later rows read', async () => {
    const deep = `{"x":${'{"a":'.repeat(5_000)}1${'}'.repeat(5_000)}}`;
    const ndjson = [
      JSON.stringify({ MRN: '000001', FIRST: 'Ada', LAST: 'One', DOB: '01/03/1989', SEX: 'F' }),
      deep,
      JSON.stringify({ MRN: '000003', FIRST: 'Cy', LAST: 'Three', DOB: '02/04/1990', SEX: 'M' }),
    ].join('\n');
    const dir = patientProject('patients.ndjson', `${ndjson}\n`);
    const out = join(dir, 'out');
    const report = await runPipeline({ mappingFile: join(dir, 'mapping.yaml'), dryRun: true, outDir: out, env });
    expect(report.totals).toMatchObject({ read: 3, rejected: 1, written: 2 });
    const [reject] = lines(join(out, 'rejects.ndjson'));
    expect(reject).toMatchObject({
      stage: 'source',
      line: 2,
      record: 2,
      issues: [{ code: 'value-too-large', message: 'record too large: nested deeper than 64 levels' }],
    });
    expect(reject?.raw).toBe(deep);
  });

  it('the rejects writer never throws on a pathological row: the row is left out with a note and an excerpt', async () => {
    const dir = copyTree('test/fixtures/run/clean', 'care-etl-rejects-');
    const file = join(dir, 'rejects.ndjson');
    const writer = new RejectsWriter(file);
    let deep: Record<string, unknown> = { leaf: 1 };
    for (let i = 0; i < 10_000; i++) deep = { a: deep };
    const cyclic: Record<string, unknown> = { name: 'c' };
    cyclic.self = cyclic;
    const base = {
      stage: 'transform' as const,
      mapping: 'patient',
      source: 'p',
      file: 'p.ndjson',
      issues: [{ severity: 'error' as const, code: 'key-missing' as const, message: 'no key' }],
    };
    writer.write({ ...base, line: 1, row: deep });
    writer.write({ ...base, line: 2, row: { n: 12n } });
    writer.write({ ...base, line: 3, row: cyclic });
    writer.write({ ...base, line: 4, row: { big: 'x'.repeat(17 * 1024 * 1024) }, raw: 'y'.repeat(100_000) });
    writer.write({ ...base, line: 5, row: { ok: true } });
    await writer.commit();
    const written = lines(file);
    expect(written.map((r) => r.line)).toEqual([1, 2, 3, 4, 5]);
    for (const r of written.slice(0, 4)) {
      expect(r.row).toBeUndefined();
      expect(r.rowOmitted).toMatch(/^row not written: /);
      expect(typeof r.rowExcerpt).toBe('string');
      expect((r.rowExcerpt as string).length).toBeLessThanOrEqual(64 * 1024 + 1);
    }
    expect(written[0]?.rowOmitted).toBe('row not written: nested too deeply to be written as JSON');
    expect(written[0]?.rowExcerpt).toMatch(/^\{"a":\{"a":/);
    expect(written[1]?.rowExcerpt).toBe('{"n":"12n"}');
    expect(written[2]?.rowExcerpt).toBe('{"name":"c","self":"[cycle]"}');
    expect((written[3]?.raw as string).length).toBe(64 * 1024);
    expect(written[4]).toMatchObject({ row: { ok: true } });
    expect(written[4]?.rowOmitted).toBeUndefined();
  });
});

describe('every source is checked before the first write', () => {
  it('a missing second source: exit 2 before anything is sent, recorded or written (in process, live sandbox)', async () => {
    const dir = copyTree('examples/clinic', 'care-etl-missing-');
    rmSync(join(dir, 'data', 'assignments.csv'));
    const before = sb.stats().requests;
    const err = await runPipeline({ mappingFile: join(dir, 'mapping.yaml'), env }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CareEtlError);
    expect((err as CareEtlError).exitCode).toBe(2);
    expect((err as CareEtlError).message).toContain('Source `assignments`');
    expect((err as CareEtlError).issues[0]?.code).toBe('source-not-found');
    expect(sb.stats().requests - before).toBe(0); // not even the credentials check
    expect(resourcesOnServer()).toBe(0);
    expect(existsSync(join(dir, '.care-etl'))).toBe(false); // no ledger, no rejects, no embedded sandbox
  });

  it('the same with the built CLI, and with no target (the embedded sandbox is not even started)', async () => {
    const dir = copyTree('examples/clinic', 'care-etl-missing-cli-');
    rmSync(join(dir, 'data', 'assignments.csv'));
    const before = sb.stats().requests;
    const live = await runCliInProcess(['run', join(dir, 'mapping.yaml')], { env });
    expect(live.code, live.stderr).toBe(2);
    expect(live.stderr).toContain('assignments.csv');
    expect(sb.stats().requests - before).toBe(0);
    expect(resourcesOnServer()).toBe(0);
    const embedded = await runCliInProcess(['run', join(dir, 'mapping.yaml')], { env: { NO_COLOR: '1' } });
    expect(embedded.code, embedded.stderr).toBe(2);
    expect(existsSync(join(dir, '.care-etl'))).toBe(false);
  });

  it('several broken sources are reported together', async () => {
    const dir = copyTree('examples/clinic', 'care-etl-missing-2-');
    rmSync(join(dir, 'data', 'assignments.csv'));
    writeFileSync(join(dir, 'data', 'practitioners.json'), '{"staff": [ {"npi": "1"}, ');
    const err = (await runPipeline({ mappingFile: join(dir, 'mapping.yaml'), dryRun: true, env }).catch((e: unknown) => e)) as CareEtlError;
    expect(err).toBeInstanceOf(CareEtlError);
    expect(err.message).toMatch(/^2 sources cannot be read: /);
    expect(err.issues.map((i) => i.code).sort()).toEqual(['json-syntax', 'source-not-found']);
    expect(existsSync(join(dir, '.care-etl'))).toBe(false); // not even the dry-run folder
  });
});

describe('dry run output', () => {
  it("a dry run where every row is now rejected leaves no stale output: each type's file is emptied, 0600", async () => {
    const dir = copyTree('test/fixtures/run/clean', 'care-etl-dry-');
    const out = join(dir, 'out');
    const first = await runPipeline({ mappingFile: join(dir, 'mapping.yaml'), dryRun: true, outDir: out });
    expect(first.totals.written).toBe(10);
    expect(lines(join(out, 'Patient.ndjson'))).toHaveLength(10);
    chmodSync(join(out, 'Patient.ndjson'), 0o644);

    const csv = join(dir, 'data', 'patients.csv');
    writeFileSync(csv, readFileSync(csv, 'utf8').replace(/\d\d\/\d\d\/\d{4}/g, '99/99/9999')); // every birth date invalid
    const second = await runPipeline({ mappingFile: join(dir, 'mapping.yaml'), dryRun: true, outDir: out });
    expect(second.totals).toMatchObject({ read: 10, rejected: 10, written: 0 });
    expect(readFileSync(join(out, 'Patient.ndjson'), 'utf8')).toBe('');
    expect(statSync(join(out, 'Patient.ndjson')).mode & 0o777).toBe(0o600);
    expect(lines(join(out, 'rejects.ndjson'))).toHaveLength(10);
  });

  it('a first dry run with every row rejected still creates the (empty) file of each type', async () => {
    const dir = patientProject('patients.csv', `${HEADER}\n000001,A,B,bad,F\n`);
    const out = join(dir, 'out');
    await runPipeline({ mappingFile: join(dir, 'mapping.yaml'), dryRun: true, outDir: out });
    expect(readdirSync(out).sort()).toEqual(['Patient.ndjson', 'rejects.ndjson', 'rejects.summary.csv']);
    expect(readFileSync(join(out, 'Patient.ndjson'), 'utf8')).toBe('');
  });
});

describe('control characters from source text never reach the terminal raw', () => {
  const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

  it('ANSI escapes in a CSV header (fatal error, text and --json)', async () => {
    const dir = patientProject('patients.csv', `MRN,\u001b[31mFIRST\u001b]0;owned\u0007,\u001b[31mFIRST\u001b]0;owned\u0007\n000001,A,B\n`);
    const text = await runCliInProcess(['run', join(dir, 'mapping.yaml'), '--dry-run'], { env });
    expect(text.code, text.stderr).toBe(2);
    expect(text.stderr).toContain('duplicate column name');
    expect(text.stderr + text.stdout).not.toMatch(RAW_CONTROL);
    const json = await runCliInProcess(['run', join(dir, 'mapping.yaml'), '--dry-run', '--json'], { env });
    expect(json.code).toBe(2);
    expect(json.stdout + json.stderr).not.toMatch(RAW_CONTROL);
    expect(JSON.parse(json.stdout).error.message).toContain('\\u001b[31mFIRST');
  });

  it('ANSI escapes in a rejected row’s key and column names (progress lines)', async () => {
    const dir = patientProject('patients.csv', `${HEADER},\u001b[2Jx\n\u001b[2J000001,A,B,bad,F,1\n000002,"x"y,B,01/03/1989,F,2\n`);
    const res = await runCliInProcess(['run', join(dir, 'mapping.yaml'), '--dry-run', '--out', join(dir, 'out'), '--progress', 'lines'], { env });
    expect(res.code, res.stderr).toBe(1);
    expect(res.stderr + res.stdout).not.toMatch(RAW_CONTROL);
    expect(res.stderr).toContain('\\u{1b}[2J000001');
  });
});
