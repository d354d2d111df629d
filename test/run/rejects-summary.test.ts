import { mkdtempSync, readFileSync, statSync, writeFileSync, existsSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CareEtlError } from '../../src/core/issues.js';
import { registerSecret } from '../../src/core/secret.js';
import { readRejectSelection, RejectSelection, RejectsWriter, summaryPathFor, summaryRows } from '../../src/pipeline/rejects.js';
import type { RejectRecord } from '../../src/transform/reject-record.js';
import { copyTree, runCliInProcess } from '../helpers/cli.js';
import { startEchoServer, type HostileServer } from '../helpers/hostile-server.js';

/*
 * Issue 14, item 4: beside the full rejects file (rows kept for re-processing), a redacted summary a clinic can act
 * on — CSV, one row per issue: file, line, record, mapping, key, stage, code, message, detail; never the row — written and
 * replaced like the rejects file (temporary sibling, renamed on commit, 0600); and the selection `--only-rejected`
 * reads back from the rejects file.
 */

const tmp = () => mkdtempSync(join(tmpdir(), 'care-etl-rejects-summary-'));
const issue = (code: string, message: string) => ({ severity: 'error' as const, code: code as never, message });
const csv = (file: string) => parse(readFileSync(file, 'utf8'), { columns: true, bom: true }) as Record<string, string>[];

describe('rejects summary (CSV)', () => {
  it('is named after the rejects file', () => {
    expect(summaryPathFor('/x/.care-etl/rejects.ndjson')).toBe('/x/.care-etl/rejects.summary.csv');
    expect(summaryPathFor('/x/bad.jsonl')).toBe('/x/bad.summary.csv');
    expect(summaryPathFor('/x/bad-rows')).toBe('/x/bad-rows.summary.csv');
  });

  it('one row per issue with the location, key, stage, code and message — no row content, no raw text, mode 0600', async () => {
    const dir = tmp();
    const file = join(dir, 'rejects.ndjson');
    const data = join(dir, 'data', 'patients.csv');
    const writer = new RejectsWriter(file, { baseDir: dir });
    expect(writer.summaryPath).toBe(join(dir, 'rejects.summary.csv'));
    const secretRow = { MRN: '000031', FIRST: 'Grace', LAST: 'Holm', DOB: '02/30/1985' };
    writer.write({
      stage: 'source',
      mapping: 'patient',
      source: 'patients',
      file: data,
      line: 21,
      record: 20,
      issues: [issue('csv-ragged', 'expected 11 fields (header, line 1), got 12')],
      raw: 'Grace,Holm,HOLM-RAW-TEXT',
    });
    writer.write({
      stage: 'validate',
      mapping: 'patient',
      source: 'patients',
      file: data,
      line: 33,
      record: 32,
      key: '000031',
      issues: [issue('schema', 'first problem'), issue('schema', 'second problem')],
      row: secretRow,
    });
    writer.write({
      stage: 'transform',
      mapping: 'careteam',
      source: 'assignments',
      file: join(dir, 'data', 'a.csv'),
      line: 3,
      record: 2,
      lines: [3, 4, 48],
      key: '000002',
      issues: [issue('ref-missing', 'no practitioner')],
    });
    writer.write({
      stage: 'transform',
      mapping: 'practitioner',
      source: 'staff',
      file: '/elsewhere/staff.json',
      record: 7,
      issues: [issue('key-missing', 'the key `npi` is empty')],
    });
    await writer.commit();

    const summary = join(dir, 'rejects.summary.csv');
    expect(statSync(summary).mode & 0o777).toBe(0o600);
    const text = readFileSync(summary, 'utf8');
    for (const s of ['Grace', 'Holm', '02/30/1985', 'HOLM-RAW-TEXT']) expect(text).not.toContain(s);
    expect(text.startsWith('file,line,record,mapping,key,stage,code,message,detail\r\n')).toBe(true);
    expect(csv(summary)).toEqual([
      {
        file: 'data/patients.csv',
        line: '21',
        record: '',
        mapping: 'patient',
        key: '',
        stage: 'source',
        code: 'csv-ragged',
        message: '12 values for 11 columns (header, line 1): a value holding the delimiter or a quote must be quoted',
        detail: '',
      },
      {
        file: 'data/patients.csv',
        line: '33',
        record: '',
        mapping: 'patient',
        key: '000031',
        stage: 'validate',
        code: 'schema',
        message: 'first problem',
        detail: '',
      },
      {
        file: 'data/patients.csv',
        line: '33',
        record: '',
        mapping: 'patient',
        key: '000031',
        stage: 'validate',
        code: 'schema',
        message: 'second problem',
        detail: '',
      },
      {
        file: 'data/a.csv',
        line: '3 4 48',
        record: '',
        mapping: 'careteam',
        key: '000002',
        stage: 'transform',
        code: 'ref-missing',
        message: 'no practitioner',
        detail: '',
      },
      {
        file: '/elsewhere/staff.json',
        line: '',
        record: '7',
        mapping: 'practitioner',
        key: '',
        stage: 'transform',
        code: 'key-missing',
        message: 'the key `npi` is empty',
        detail: '',
      },
    ]);
  });

  it('keeps line breaks inside quotes, neutralises formulas, replaces NUL, redacts known secrets', async () => {
    registerSecret('summary-secret-9f2e');
    const r: RejectRecord = {
      stage: 'load',
      mapping: 'patient',
      source: 'p',
      file: '/d/p.csv',
      line: 2,
      key: '=HYPERLINK("http://x")',
      issues: [issue('http-400', 'server said:\nbad\rthing\u0000 with summary-secret-9f2e')],
    };
    // The cells: NUL replaced, the secret redacted (formulas are neutralised by the CSV writer).
    const [row] = summaryRows(r);
    expect(row![4]).toBe('=HYPERLINK("http://x")');
    expect(row![7]).toMatch(/^server said:\nbad\rthing\uFFFD with (?!summary-secret)/);
    const dir = tmp();
    const writer = new RejectsWriter(join(dir, 'r.ndjson'));
    writer.write(r);
    await writer.commit();
    const text = readFileSync(join(dir, 'r.summary.csv'), 'utf8');
    expect(text).not.toContain('summary-secret-9f2e');
    expect(text).toContain('"server said:\nbad\rthing\uFFFD with ');
    const [parsed] = csv(join(dir, 'r.summary.csv'));
    expect(parsed!.key).toBe('\'=HYPERLINK("http://x")');
    expect(parsed!.message.split(/\r?\n|\r/)).toHaveLength(3);
    expect(text.trimEnd().split('\r\n')).toHaveLength(2); // header + one record: the breaks stay inside the quotes
  });

  it('a failed run keeps the previous summary byte-identical and leaves no temporary file', async () => {
    const dir = tmp();
    const file = join(dir, 'rejects.ndjson');
    const first = new RejectsWriter(file);
    first.write({ stage: 'transform', mapping: 'patient', source: 'p', file: '/d/p.csv', line: 5, key: 'K5', issues: [issue('date-invalid', 'bad date')] });
    await first.commit();
    const before = readFileSync(join(dir, 'rejects.summary.csv'));

    const failed = new RejectsWriter(file);
    failed.write({ stage: 'transform', mapping: 'patient', source: 'p', file: '/d/p.csv', line: 9, key: 'K9', issues: [issue('lookup-miss', 'other')] });
    expect(await failed.discard()).toBe(`${file}.incomplete`);
    expect(readFileSync(join(dir, 'rejects.summary.csv'))).toEqual(before);
    expect(readdirSync(dir).sort()).toEqual(['rejects.ndjson', 'rejects.ndjson.incomplete', 'rejects.summary.csv']);

    // A run without rejects replaces it with a header-only summary.
    await new RejectsWriter(file).commit();
    expect(readFileSync(join(dir, 'rejects.summary.csv'), 'utf8')).toBe('file,line,record,mapping,key,stage,code,message,detail\r\n');
  });

  it('can be turned off', async () => {
    const dir = tmp();
    const writer = new RejectsWriter(join(dir, 'rejects.ndjson'), { summary: false });
    expect(writer.summaryPath).toBeUndefined();
    await writer.commit();
    expect(existsSync(join(dir, 'rejects.summary.csv'))).toBe(false);
  });
});

describe('--only-rejected selection (from the previous rejects file)', () => {
  const origin = (file: string, line?: number, record = 1) => ({ file, line, record });

  it("selects by key when the key was known, by file and line otherwise (and for duplicates, whose key is another row's)", () => {
    const sel = new RejectSelection();
    sel.addReject({ stage: 'transform', mapping: 'patient', file: '/d/p.csv', line: 33, key: '000031', issues: [issue('date-invalid', '')] });
    sel.addReject({ stage: 'transform', mapping: 'patient', file: '/d/p.csv', line: 34, issues: [issue('key-missing', '')] });
    sel.addReject({ stage: 'source', mapping: 'patient', file: '/d/p.csv', line: 21, issues: [issue('csv-ragged', '')] });
    sel.addReject({ stage: 'transform', mapping: 'patient', file: '/d/p.csv', line: 36, key: '000005', issues: [issue('duplicate-key', '')] });
    sel.addReject({ stage: 'transform', mapping: 'practitioner', file: '/d/s.json', record: 7, issues: [issue('key-missing', '')] });
    sel.addReject({ stage: 'transform', mapping: 'careteam', file: '/d/a.csv', line: 3, lines: [3, 4, 48], key: '000002', issues: [issue('ref-missing', '')] });
    expect([sel.rejects, sel.keyCount, sel.placeCount]).toEqual([6, 2, 4]);

    // by key, wherever the row is now (lines shift when the file is edited)
    expect(sel.selects('patient', { key: '000031', ...origin('/d/p.csv', 40) })).toBe(true);
    // the key of another mapping is not this one's
    expect(sel.selects('careteam', { key: '000031', ...origin('/d/a.csv', 40) })).toBe(false);
    // by file and line: the row whose key was missing, the unreadable line, the duplicate
    expect(sel.selects('patient', { key: '000032', ...origin('/d/p.csv', 34) })).toBe(true);
    expect(sel.selects('patient', origin('/d/p.csv', 21))).toBe(true);
    expect(sel.selects('patient', { key: '000005', ...origin('/d/p.csv', 36) })).toBe(true);
    // the first row of the duplicated key (loaded) is not selected
    expect(sel.selects('patient', { key: '000005', ...origin('/d/p.csv', 6) })).toBe(false);
    // same line, another file
    expect(sel.selects('patient', { key: 'x', ...origin('/d/other.csv', 34) })).toBe(false);
    // JSON: by record number
    expect(sel.selects('practitioner', { key: '123', file: '/d/s.json', record: 7 })).toBe(true);
    expect(sel.selects('practitioner', { key: '124', file: '/d/s.json', record: 6 })).toBe(false);
    // a group by key
    expect(sel.selects('careteam', { key: '000002', ...origin('/d/a.csv', 3), lines: [3, 4, 48] })).toBe(true);
    expect(sel.selects('careteam', { key: '000004', ...origin('/d/a.csv', 7), lines: [7, 8] })).toBe(false);
  });

  it('a group holding a row rejected before its key was known is selected', () => {
    const sel = new RejectSelection();
    sel.addReject({ stage: 'source', mapping: 'careteam', file: '/d/a.csv', line: 8, issues: [issue('csv-ragged', '')] });
    expect(sel.selects('careteam', { key: '000004', ...origin('/d/a.csv', 7), lines: [7, 8] })).toBe(true);
  });

  it('adds keys the state holds as refused, counting only those the file did not name', () => {
    const sel = new RejectSelection();
    sel.addReject({ stage: 'load', mapping: 'patient', file: '/d/p.csv', line: 3, key: 'A', issues: [issue('http-400', '')] });
    sel.addKey('patient', 'A', true);
    sel.addKey('patient', 'B', true);
    expect([sel.keyCount, sel.fromState]).toEqual([2, 1]);
    expect(sel.selects('patient', { key: 'B', ...origin('/d/p.csv', 99) })).toBe(true);
  });

  it('reads a rejects file as the writer wrote it, ignoring lines that are not rejects', async () => {
    const dir = tmp();
    const file = join(dir, 'rejects.ndjson');
    const writer = new RejectsWriter(file);
    writer.write({
      stage: 'transform',
      mapping: 'patient',
      source: 'p',
      file: '/d/p.csv',
      line: 33,
      key: '000031',
      issues: [issue('date-invalid', '')],
      row: { MRN: '000031' },
    });
    writer.write({ stage: 'transform', mapping: 'patient', source: 'p', file: '/d/p.csv', line: 34, issues: [issue('key-missing', '')], row: { MRN: '' } });
    await writer.commit();
    writeFileSync(file, `${readFileSync(file, 'utf8')}not json\n\n[1,2]\n`);
    const sel = await readRejectSelection(file);
    expect([sel.rejects, sel.keyCount, sel.placeCount, sel.unreadable]).toEqual([2, 1, 1, 2]);
  });

  it('no rejects file: a usage error (exit 2) with a hint', async () => {
    const err = await readRejectSelection(join(tmp(), 'missing.ndjson')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CareEtlError);
    expect((err as CareEtlError).exitCode).toBe(2);
    expect((err as CareEtlError).message).toMatch(/no rejects file at/);
    expect((err as CareEtlError).hint).toMatch(/Run without --only-rejected first/);
  });
});

describe('rejects summary of a real run (built CLI)', () => {
  let echo400: HostileServer;
  beforeAll(async () => {
    echo400 = await startEchoServer({ status: 400 }); // 127.0.0.1: every write answered 400 echoing the request
  });
  afterAll(async () => {
    await echo400.close();
  });

  it('a server echoing the rows in its 400s: the summary lists every reject, without the patient values or the key', async () => {
    const KEY = 'summary-e2e-key-51c3a9d0';
    const dir = copyTree('examples/clinic', 'care-etl-summary-e2e-');
    const res = await runCliInProcess(['run', join(dir, 'mapping.yaml'), '--progress', 'none'], {
      env: { CARE_BASE_URL: echo400.url, CARE_API_KEY: KEY, CARE_EMR_ID: 'emr', CARE_TENANT_ID: 't' },
    });
    expect(res.code, res.stderr).toBe(1);
    const summaryFile = join(dir, '.care-etl', 'rejects.summary.csv');
    expect(res.stdout).toContain(`Summary without row content, for the clinic: ${summaryFile}`);
    expect(statSync(summaryFile).mode & 0o777).toBe(0o600);
    const rows = csv(summaryFile);
    const ndjson = readFileSync(join(dir, '.care-etl', 'rejects.ndjson'), 'utf8')
      .trim()
      .split('\n');
    const issues = ndjson.reduce((n, l) => n + (JSON.parse(l) as { issues: unknown[] }).issues.length, 0);
    expect(rows).toHaveLength(issues);
    expect(rows.filter((r) => r.stage === 'load').length).toBeGreaterThan(20);
    expect(rows.find((r) => r.stage === 'load' && r.mapping === 'patient')).toMatchObject({ file: 'data/patients.csv', code: 'http-400' });
    const text = readFileSync(summaryFile, 'utf8');
    expect(text).not.toContain(KEY);
    const patients = readFileSync(join(dir, 'data', 'patients.csv'), 'utf8')
      .trim()
      .split('\n')
      .slice(1)
      .map((l) => l.split(','));
    for (const [, first, last, dob, , phone, email, address] of patients) {
      for (const value of [first, last, dob, phone, email, address]) {
        if (!value || value.length < 3) continue;
        expect(text, value).not.toContain(value);
      }
    }
  });
});
