/**
 * Issue 27 items 1, 3, 4, 6, end to end: the built CLI against the sandbox in both Observation modes — `coded`
 * (LOINC coding + text) and `text-only` (only `code.text`, as the service spec shows).
 * - `--layout wide` holds every observation that has a score exactly once, in its patient's row for its UTC day,
 *   compared with the server's own list (read here with plain fetch, following its next links).
 * - text-only: spellings differing only in case and whitespace share a column; the dictionary lists them and the
 *   export warns.
 * - `--column-names snake`; formula neutralisation by format (the dictionary says which applied).
 * - The Table Schema beside a CSV file, applied by Python's csv module: the header equals the schema's fields and
 *   every value of an integer field parses as an int (date/datetime fields as ISO dates).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { asyncBufferFromFile, parquetReadObjects } from 'hyparquet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { cliInProcess, clientFor, envFor, loadPatients, ROOT, TENANT, workDir } from './helpers.js';

// Python's csv module is the independent reader (python3 is on every machine this runs on): never skipped.
const PYTHON = 'python3';
const PATIENTS = 24;

type Listed = { subject?: { reference?: string }; effectiveDateTime?: string; valueInteger?: number; code?: { text?: string; coding?: unknown[] } };

/** Every Observation of the tenant, by the server's own paging (no care-etl code). */
async function serverList(sb: Sandbox): Promise<Listed[]> {
  const headers = { 'Service-SubscriptionKey': sb.credentials.apiKey, 'Service-EmrId': sb.credentials.emrId, 'Service-TenantId': TENANT };
  const out: Listed[] = [];
  for (let url: string | undefined = `${sb.url}/Observation`; url;) {
    const res = await fetch(url, { headers });
    expect(res.status).toBe(200);
    const b = (await res.json()) as { entry?: { resource: Listed }[]; link?: { relation: string; url: string }[] };
    out.push(...(b.entry ?? []).map((e) => e.resource));
    url = b.link?.find((l) => l.relation === 'next')?.url;
  }
  return out;
}

function readCsv(file: string): string[][] {
  const script =
    "import csv, json, sys\nwith open(sys.argv[1], newline='', encoding='utf-8-sig') as f:\n    print(json.dumps(list(csv.reader(f, strict=True))))";
  const r = spawnSync(PYTHON, ['-c', script, file], { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`python csv refused ${file}: ${r.stderr}`);
  return JSON.parse(r.stdout) as string[][];
}

/** Python reads the CSV with the types of its Table Schema: header = fields; integer/date/datetime values parse. */
function readWithSchema(csvFile: string, packageFile: string): { fields: { name: string; type: string }[]; rows: number } {
  const script = `
import csv, json, sys, datetime
pkg = json.load(open(sys.argv[2], encoding='utf-8'))
res = pkg['resources'][0]
fields = res['schema']['fields']
assert res['path'] == sys.argv[1].rsplit('/', 1)[-1], res['path']
conv = {'integer': int, 'number': float, 'string': str, 'date': datetime.date.fromisoformat,
        'datetime': datetime.datetime.fromisoformat, 'boolean': lambda v: {'true': True, 'false': False}[v]}
with open(sys.argv[1], newline='', encoding=res['encoding']) as f:
    r = csv.reader(f, strict=True)
    header = next(r)
    assert header == [x['name'] for x in fields], (header, fields)
    n = 0
    for rec in r:
        for v, fl in zip(rec, fields):
            if v not in res['schema']['missingValues']:
                conv[fl['type']](v)
        n += 1
print(json.dumps({'fields': [{'name': x['name'], 'type': x['type']} for x in fields], 'rows': n}))
`;
  const r = spawnSync(PYTHON, ['-c', script, csvFile, packageFile], { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`python could not read ${csvFile} with its schema: ${r.stderr}`);
  return JSON.parse(r.stdout) as { fields: { name: string; type: string }[]; rows: number };
}

const utcDay = (effective: string) => new Date(Date.parse(effective)).toISOString().slice(0, 10);
type Dict = {
  escapeFormulas: boolean;
  columnNames: string;
  columns: { name: string; label?: string; type: string; questionnaire?: { texts?: string[]; system?: string; code?: string } }[];
};

describe.each(['coded', 'text-only'] as const)('wide layout on a %s server (built CLI)', (mode) => {
  let sb: Sandbox;
  let dir: string;
  beforeAll(async () => {
    if (!existsSync(join(ROOT, 'dist/commands/export.js'))) throw new Error('dist/ is missing: run `npm run build` first');
    sb = await startSandbox({ observationsPerPatient: 2, pageSize: 20, observationCode: mode });
    dir = workDir();
    const client = clientFor(sb);
    await loadPatients(
      client,
      join(dir, '.care-etl/state.db'),
      sb.url,
      Array.from({ length: PATIENTS }, (_, i) => `MRN-W${i}`),
    );
    await client.close();
  });
  afterAll(async () => {
    await sb?.close();
  });
  const exportCli = (args: string[]) => cliInProcess(['export', 'mapping-default.yaml', ...args], { cwd: dir, env: envFor(sb) });

  it('holds every scored observation exactly once, in its patient row for its UTC day (compared with the server list)', async () => {
    const listed = await serverList(sb);
    expect(listed).toHaveLength(PATIENTS * 2);
    expect(listed.every((o) => (mode === 'coded') === Array.isArray(o.code?.coding))).toBe(true);
    const r = await exportCli(['--layout', 'wide', '--out', 'wide.csv', '--dictionary', 'wide.dictionary.json']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toContain('left out of the wide layout');
    const [header, ...records] = readCsv(join(dir, 'wide.csv'));
    const dict = JSON.parse(readFileSync(join(dir, 'wide.dictionary.json'), 'utf8')) as Dict;
    const instruments = dict.columns.filter((c) => c.questionnaire);
    expect(instruments.length).toBeGreaterThan(0);
    // its column names are the server's code texts: owner-only like the export itself (docs/output-files.md)
    expect([statSync(join(dir, 'wide.csv')).mode & 0o777, statSync(join(dir, 'wide.dictionary.json')).mode & 0o777]).toEqual([0o600, 0o600]);
    const rows = new Map(records.map((rec) => [`${rec[0]}|${rec[2]}`, Object.fromEntries(header!.map((h, i) => [h, rec[i]!]))]));
    let cells = 0;
    for (const row of rows.values()) {
      expect(row.superseded).toBe('0');
      cells += instruments.filter((c) => row[c.name] !== '').length;
    }
    const scored = listed.filter((o) => typeof o.valueInteger === 'number');
    expect(cells).toBe(scored.length); // exactly once: no more cells than scored observations…
    for (const o of scored) {
      // …and each one in its patient's row for its UTC day, in a column that names its questionnaire
      const row = rows.get(`${o.subject!.reference!.slice('Patient/'.length)}|${utcDay(o.effectiveDateTime!)}`);
      expect(row).toBeDefined();
      const home = instruments.filter((c) =>
        mode === 'coded'
          ? (o.code!.coding as { code: string }[]).some((k) => k.code === c.questionnaire!.code)
          : c.questionnaire!.texts!.includes(JSON.stringify(o.code!.text!).slice(1, -1)),
      );
      expect(home).toHaveLength(1);
      expect(row![home[0]!.name]).toBe(String(o.valueInteger));
    }
    // its Table Schema, applied by Python: scores are integers
    expect(r.stderr).toContain(`Table Schema written to ${join(dir, 'wide.datapackage.json')}`);
    const typed = readWithSchema(join(dir, 'wide.csv'), join(dir, 'wide.datapackage.json'));
    expect(typed.rows).toBe(records.length);
    const types = Object.fromEntries(typed.fields.map((f) => [f.name, f.type]));
    expect(types).toMatchObject({ date: 'date', observations: 'integer', superseded: 'integer', last_updated: 'datetime' });
    for (const c of instruments) expect(types[c.name]).toBe('integer');
    if (mode === 'text-only') {
      // the sandbox's label variants: "PHQ-9 total score", "PHQ-9\ntotal score", "\tPHQ-9\ttotal score" share a column
      expect(instruments.some((c) => (c.questionnaire!.texts ?? []).length > 1)).toBe(true);
      expect(r.stderr).toMatch(/warning: \d+ wide columns? keyed by code\.text merged spellings/);
    }
  });

  it('the wide Parquet too: every scored observation exactly once, in its row (read back by hyparquet)', async () => {
    const scored = (await serverList(sb)).filter((o) => typeof o.valueInteger === 'number');
    const r = await exportCli(['--layout', 'wide', '--format', 'parquet', '--out', 'wide.parquet', '--dictionary', 'wide.parquet.dictionary.json']);
    expect(r.code, r.stderr).toBe(0);
    const dict = JSON.parse(readFileSync(join(dir, 'wide.parquet.dictionary.json'), 'utf8')) as Dict;
    const instruments = dict.columns.filter((c) => c.questionnaire);
    const [patientCol, , dateCol] = dict.columns.map((c) => c.name);
    const records = (await parquetReadObjects({ file: await asyncBufferFromFile(join(dir, 'wide.parquet')) })) as Record<string, unknown>[];
    const rows = new Map(records.map((rec) => [`${String(rec[patientCol!])}|${(rec[dateCol!] as Date).toISOString().slice(0, 10)}`, rec]));
    expect(rows.size).toBe(records.length);
    let cells = 0;
    for (const row of rows.values()) cells += instruments.filter((c) => row[c.name] !== null && row[c.name] !== undefined).length;
    expect(cells).toBe(scored.length);
    for (const o of scored) {
      const row = rows.get(`${o.subject!.reference!.slice('Patient/'.length)}|${utcDay(o.effectiveDateTime!)}`);
      expect(row).toBeDefined();
      expect(instruments.filter((c) => Number(row![c.name]) === o.valueInteger).length).toBeGreaterThanOrEqual(1);
    }
  });

  it('--column-names snake: SQL names, mapped back to the questionnaire by the dictionary', async () => {
    const r = await exportCli(['--layout', 'wide', '--column-names', 'snake', '--out', 'snake.csv', '--dictionary', 'snake.dictionary.json']);
    expect(r.code, r.stderr).toBe(0);
    const [header] = readCsv(join(dir, 'snake.csv'));
    for (const h of header!) expect(h).toMatch(/^[a-z_][a-z0-9_]*$/);
    expect(new Set(header).size).toBe(header!.length);
    const dict = JSON.parse(readFileSync(join(dir, 'snake.dictionary.json'), 'utf8')) as Dict;
    expect(dict.columnNames).toBe('snake');
    expect(dict.columns.map((c) => c.name)).toEqual(header);
    if (mode === 'coded') {
      expect(header).toContain('phq_9_44261_6');
      expect(dict.columns.find((c) => c.name === 'phq_9_44261_6')).toMatchObject({
        label: 'PHQ-9 (44261-6)',
        questionnaire: { system: 'http://loinc.org', code: '44261-6' },
      });
    } else {
      // "-PHQ-9 total score" snakes to the same name: one of the two gets a suffix
      expect(dict.columns.find((c) => c.questionnaire?.texts?.includes('PHQ-9 total score'))?.name).toMatch(/^phq_9_total_score(_\d)?$/);
    }
  });
});

describe('long CSV on a text-only server: formulas by format, Table Schema (built CLI)', () => {
  let sb: Sandbox;
  let dir: string;
  beforeAll(async () => {
    sb = await startSandbox({ observationsPerPatient: 2, observationCode: 'text-only' });
    dir = workDir();
    const client = clientFor(sb);
    await loadPatients(client, join(dir, '.care-etl/state.db'), sb.url, ['MRN-F1', 'MRN-F2', 'MRN-F3', 'MRN-F4', 'MRN-F5', 'MRN-F6']);
    await client.close();
  });
  afterAll(async () => {
    await sb?.close();
  });
  const exportCli = (args: string[]) => cliInProcess(['export', 'mapping-default.yaml', ...args], { cwd: dir, env: envFor(sb) });
  const dictOf = (f: string) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as Dict;

  it('formulas: CSV on by default, off with --no-escape-formulas; NDJSON never; the dictionary says which; the CSV typed by its Table Schema', async () => {
    // the seeded texts of these six patients include ones starting with = - @ (sandbox textVariant)
    const on = await exportCli(['--out', 'on.csv', '--dictionary', 'on.json']);
    const off = await exportCli(['--out', 'off.csv', '--no-escape-formulas', '--dictionary', 'off.json']);
    const nd = await exportCli(['--out', 'x.ndjson', '--format', 'ndjson', '--dictionary', 'nd.json']);
    for (const x of [on, off, nd]) expect(x.code, x.stderr).toBe(0);
    expect([dictOf('on.json').escapeFormulas, dictOf('off.json').escapeFormulas, dictOf('nd.json').escapeFormulas]).toEqual([true, false, false]);
    const q = (f: string) => readCsv(join(dir, f)).map((rec) => rec[3]!);
    const raw = q('off.csv').slice(1);
    expect(raw.some((t) => /^[=\-@\t]/.test(t))).toBe(true);
    expect(q('on.csv').slice(1)).toEqual(raw.map((t) => (/^[=+\-@\t\r]/.test(t) ? `'${t}` : t)));
    const texts = readFileSync(join(dir, 'x.ndjson'), 'utf8')
      .trimEnd()
      .split('\n')
      .map((l) => (JSON.parse(l) as { questionnaire: string }).questionnaire);
    expect(texts).toEqual(raw);
    expect(existsSync(join(dir, 'x.datapackage.json'))).toBe(false); // a Table Schema is for CSV
    const typed = readWithSchema(join(dir, 'on.csv'), join(dir, 'on.datapackage.json'));
    expect(typed.rows).toBe(raw.length);
    expect(Object.fromEntries(typed.fields.map((f) => [f.name, f.type]))).toMatchObject({
      value: 'integer',
      effective: 'datetime',
      last_updated: 'datetime',
      questionnaire: 'string',
    });
  });
});
