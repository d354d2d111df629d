/**
 * Issue 13 items 2–5, end to end: the built CLI against an in-process sandbox (127.0.0.1) holding patients loaded
 * with MRNs and observations with hostile questionnaire texts, display names and same-day repeats.
 * - `--layout wide`: read back by Python's csv module with `strict=True`, checked cell by cell against a table
 *   computed here from the observations (patient + UTC day, latest result of an instrument wins).
 * - `--pseudonymize`: same key → same pseudonyms in two exports (and across layouts); another key → other
 *   pseudonyms; no MRN, server id, observation id or display name anywhere in the file; a missing key exits 2.
 * - `--since last` twice in a row: the second writes 0 rows and says how many it skipped.
 * - `--dictionary`: one entry per column written, CSV (strict-read) or JSON.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_COLUMNS } from '../../src/export/default-columns.js';
import { makeObservation } from '../../src/sandbox/observations.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { cliInProcess, clientFor, envFor, loadPatients, ROOT, TENANT, workDir } from './helpers.js';

const PYTHON = spawnSync('python3', ['-c', 'import csv'], { encoding: 'utf8' }).status === 0 ? 'python3' : undefined;
const KEY_A = 'analyst-key-A-0123456789abcdef';
const KEY_B = 'analyst-key-B-fedcba9876543210';
const PATIENTS = 20;

let sb: Sandbox;
let dir: string;
const mrns = Array.from({ length: PATIENTS }, (_, i) => `MRN-Q${String(i).padStart(3, '0')}`);
let ids: Map<string, string>; // MRN → server id
type Obs = { id: string; pid: string; loinc: string; effective: string; value: number; text: string };
const observations: Obs[] = [];

beforeAll(async () => {
  if (!existsSync(join(ROOT, 'dist/commands/export.js'))) throw new Error('dist/ is missing: run `npm run build` first');
  sb = await startSandbox({ observationsPerPatient: 0, pageSize: 25 });
  dir = workDir();
  const client = clientFor(sb);
  ids = await loadPatients(client, join(dir, '.care-etl/state.db'), sb.url, mrns);
  await client.close();
  const batch: Record<string, unknown>[] = [];
  mrns.forEach((mrn, i) => {
    const pid = ids.get(mrn)!;
    for (let k = 0; k < 6; k++) {
      const o = makeObservation(13, `p${i}`, k, pid) as Record<string, unknown> & { code: { text: string; coding: { code: string }[] } };
      batch.push({
        ...o,
        id: `obs-${i}-${k}`,
        subject: { reference: `Patient/${pid}`, display: `Alice Example ${i}` },
        performer: [{ reference: `Patient/${pid}` }, { display: 'Dr Bob Smith' }],
      });
      observations.push({
        id: `obs-${i}-${k}`,
        pid,
        loinc: o.code.coding[0]!.code,
        effective: o.effectiveDateTime as string,
        value: o.valueInteger as number,
        text: o.code.text,
      });
    }
    if (i % 4 === 0) {
      // A second result of the first instrument the same UTC day, at the day's last second: it wins.
      const first = observations[observations.length - 6]!;
      const effective = `${first.effective.slice(0, 10)}T23:59:59Z`;
      batch.push({
        ...makeObservation(13, `p${i}`, 0, pid),
        id: `obs-${i}-again`,
        effectiveDateTime: effective,
        valueInteger: 27,
        subject: { reference: `Patient/${pid}`, display: `Alice Example ${i}` },
      });
      observations.push({ id: `obs-${i}-again`, pid, loinc: first.loinc, effective, value: 27, text: '' });
    }
  });
  sb.addObservations(TENANT, batch);
});
afterAll(async () => {
  await sb.close();
});

const exportCli = (args: string[], env: NodeJS.ProcessEnv = envFor(sb)) => cliInProcess(['export', 'mapping-default.yaml', ...args], { cwd: dir, env });

function readStrict(file: string): string[][] {
  const script =
    "import csv, json, sys\nwith open(sys.argv[1], newline='', encoding='utf-8-sig') as f:\n    print(json.dumps([r for r in csv.reader(f, strict=True)]))";
  const r = spawnSync(PYTHON!, ['-c', script, file], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`python csv (strict) refused ${file}: ${r.stderr}`);
  return JSON.parse(r.stdout) as string[][];
}

const NAMES: Record<string, string> = { '44261-6': 'PHQ-9 (44261-6)', '70274-6': 'GAD-7 (70274-6)' };

/** The wide table by the documented rules, computed independently of the exporter. */
function expectedWide(only?: Set<string>): Map<string, Record<string, string>> {
  const rows = new Map<string, { cells: Map<string, { eff: number; seq: number; value: number }>; n: number; pid: string; day: string }>();
  observations.forEach((o, seq) => {
    if (only && !only.has(o.pid)) return;
    const day = new Date(Date.parse(o.effective)).toISOString().slice(0, 10);
    const k = `${o.pid}|${day}`;
    let r = rows.get(k);
    if (!r) rows.set(k, (r = { cells: new Map(), n: 0, pid: o.pid, day }));
    r.n++;
    const eff = Date.parse(o.effective);
    const cur = r.cells.get(o.loinc);
    if (!cur || eff > cur.eff || (eff === cur.eff && seq > cur.seq)) r.cells.set(o.loinc, { eff, seq, value: o.value });
  });
  const mrnOf = new Map([...ids].map(([m, id]) => [id, m]));
  const out = new Map<string, Record<string, string>>();
  for (const [k, r] of rows) {
    const row: Record<string, string> = { patient_id: r.pid, patient_source_key: mrnOf.get(r.pid)!, date: r.day, 'GAD-7 (70274-6)': '', 'PHQ-9 (44261-6)': '' };
    for (const [loinc, c] of r.cells) row[NAMES[loinc]!] = String(c.value);
    row.observations = String(r.n);
    row.superseded = String(r.n - r.cells.size);
    out.set(k, row);
  }
  return out;
}

describe.skipIf(!PYTHON)('care-etl export for analysts (built CLI, sandbox)', () => {
  it('--layout wide: one strict RFC 4180 record per patient and UTC day, the latest result of a day winning', async () => {
    const r = await exportCli(['--layout', 'wide', '--out', 'wide.csv', '--bom']);
    expect(r.code, r.stderr).toBe(0);
    const file = join(dir, 'wide.csv');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const [header, ...records] = readStrict(file);
    expect(header).toEqual(['patient_id', 'patient_source_key', 'date', 'GAD-7 (70274-6)', 'PHQ-9 (44261-6)', 'observations', 'superseded', 'last_updated']);
    const expected = expectedWide();
    expect(records).toHaveLength(expected.size);
    const keys: string[] = [];
    for (const rec of records) {
      expect(rec).toHaveLength(header!.length);
      const row = Object.fromEntries(header!.map((h, i) => [h, rec[i]!]));
      keys.push(`${row.patient_id}|${row.date}`);
      const { last_updated: lu, ...rest } = row;
      expect(rest).toEqual(expected.get(`${row.patient_id}|${row.date}`));
      expect(lu).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    }
    expect(keys).toEqual([...keys].sort()); // rows in patient, date order
    expect(records.some((rec) => rec[header!.indexOf('superseded')] === '1')).toBe(true);
    expect(r.stderr).toContain(`Exported ${expected.size} rows (wide: ${observations.length} observations by patient and day)`);
    expect(statSync(join(dir, '.care-etl')).isDirectory()).toBe(true);
    expect(spawnSync('ls', ['-a', join(dir, '.care-etl')], { encoding: 'utf8' }).stdout).not.toContain('.export-wide-'); // spool removed

    // --patient and NDJSON: the same rows for that patient, typed
    const one = await exportCli(['--layout', 'wide', '--patient', mrns[4]!, '--format', 'ndjson']);
    expect(one.code, one.stderr).toBe(0);
    const lines = one.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const mine = expectedWide(new Set([ids.get(mrns[4]!)!]));
    expect(lines).toHaveLength(mine.size);
    for (const l of lines) {
      const want = mine.get(`${l.patient_id}|${l.date}`)!;
      expect(l.patient_source_key).toBe(mrns[4]);
      expect(l.observations).toBe(Number(want.observations));
      for (const name of Object.values(NAMES)) expect(l[name]).toBe(want[name] === '' ? null : Number(want[name]));
    }
  });

  it('--pseudonymize: same key → same pseudonyms (both layouts), another key → others; no MRN, server id, observation id or name in the files', async () => {
    const envA = { ...envFor(sb), CARE_PSEUDONYM_KEY: KEY_A };
    const first = await exportCli(['--pseudonymize', '--out', 'p1.csv', '--json', '--verbose'], envA);
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ pseudonymized: true, rows: observations.length });
    const second = await exportCli(['--pseudonymize', '--out', 'p2.csv'], envA);
    expect(second.code, second.stderr).toBe(0);
    writeFileSync(join(dir, 'b.key'), `${KEY_B}\n`, { mode: 0o600 });
    const other = await exportCli(['--pseudonymize', '--pseudonym-key-file', 'b.key', '--out', 'p3.csv'], envA); // the file wins
    expect(other.code, other.stderr).toBe(0);
    const wide = await exportCli(['--pseudonymize', '--layout', 'wide', '--out', 'pw.csv'], envA);
    expect(wide.code, wide.stderr).toBe(0);

    const read = (f: string) => {
      const [h, ...recs] = readStrict(join(dir, f));
      return recs.map((rec) => Object.fromEntries(h!.map((k, i) => [k, rec[i]!])));
    };
    const [p1, p2, p3, pw] = ['p1.csv', 'p2.csv', 'p3.csv', 'pw.csv'].map(read);
    expect(Object.keys(p1![0]!)).toEqual([...DEFAULT_COLUMNS]);
    const cols = ['id', 'patient_id', 'patient_source_key'];
    const pick = (rows: Record<string, string>[]) => rows.map((r) => cols.map((c) => r[c]));
    expect(pick(p2!)).toEqual(pick(p1!));
    for (const row of p1!) for (const c of cols) expect(row[c]).toMatch(/^[0-9a-f]{32}$/);
    // another key: every pseudonym differs
    p3!.forEach((row, i) => cols.forEach((c) => expect(row[c]).not.toBe(p1![i]![c])));
    // longitudinal: PATIENTS distinct patients, and the wide file uses the same pseudonyms
    expect(new Set(p1!.map((r) => r.patient_source_key)).size).toBe(PATIENTS);
    expect(new Set(pw!.map((r) => r.patient_id))).toEqual(new Set(p1!.map((r) => r.patient_id)));
    expect(new Set(pw!.map((r) => r.patient_source_key))).toEqual(new Set(p1!.map((r) => r.patient_source_key)));
    // values and dates stay
    expect(p1!.map((r) => Number(r.value)).sort()).toEqual(observations.map((o) => o.value).sort());

    for (const f of ['p1.csv', 'p2.csv', 'p3.csv', 'pw.csv']) {
      const text = readFileSync(join(dir, f), 'utf8');
      expect(statSync(join(dir, f)).mode & 0o777).toBe(0o600);
      for (const mrn of mrns) expect(text).not.toContain(mrn);
      for (const id of ids.values()) expect(text).not.toContain(id);
      expect(text).not.toMatch(/obs-\d|Alice|Bob Smith|MRN-Q/);
    }
    // the key is never printed or stored
    for (const out of [first, second, other, wide]) expect(out.stdout + out.stderr).not.toMatch(/analyst-key-[AB]/);
    expect(readFileSync(join(dir, '.care-etl/state.db')).includes(Buffer.from('analyst-key'))).toBe(false);
  });

  it('--pseudonymize without a key exits 2 with a clear message and writes nothing', async () => {
    const r = await exportCli(['--pseudonymize', '--out', 'nokey.csv']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('`--pseudonymize` needs a key: set CARE_PSEUDONYM_KEY or give `--pseudonym-key-file FILE`');
    expect(existsSync(join(dir, 'nokey.csv'))).toBe(false);
    const stray = await exportCli(['--pseudonym-key-file', 'b.key', '--out', 'stray.csv']);
    expect(stray.code).toBe(2);
    // declared on the flag (src/cli/flags.ts): oclif's refusal, the flag's description as the hint
    expect(stray.stderr).toContain('All of the following must be provided when using --pseudonym-key-file: --pseudonymize');
    expect(stray.stderr).toContain('Hint: --pseudonym-key-file: with --pseudonymize: file holding the key');
    const wideCustom = await cliInProcess(['export', 'mapping.yaml', 'observations', '--layout', 'wide'], { cwd: dir, env: envFor(sb) });
    expect(wideCustom.code).toBe(2);
    expect(wideCustom.stderr).toContain('`--layout wide` has its own columns');
  });

  it('--since last twice in a row: the second export writes 0 rows and says how many were already delivered', async () => {
    // An hour of overlap keeps every observation inside the window whatever the machine's speed.
    const first = await exportCli(['--since', 'last', '--overlap', '3600', '--out', 's1.csv', '--json']);
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ rows: observations.length, alreadyDelivered: 0, remembered: observations.length });
    const second = await exportCli(['--since', 'last', '--overlap', '3600', '--out', 's2.csv']);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toContain('Exported 0 rows updated since');
    expect(second.stderr).toContain(`Skipped ${observations.length} observations already delivered by the previous --since last export (same id and version)`);
    expect(readStrict(join(dir, 's2.csv'))).toEqual([[...DEFAULT_COLUMNS]]);
    const third = await exportCli(['--since', 'last', '--overlap', '3600', '--out', 's3.csv', '--json']);
    expect(JSON.parse(third.stdout)).toMatchObject({ rows: 0, alreadyDelivered: observations.length });
  });

  it('--dictionary: every column written, CSV (strict) for the long layout, JSON for the wide one; no patient data in it', async () => {
    const long = await exportCli(['--out', 'd.csv', '--dictionary', 'd.dictionary.csv']);
    expect(long.code, long.stderr).toBe(0);
    expect(long.stderr).toContain(`Data dictionary written to ${join(dir, 'd.dictionary.csv')}`);
    const [head, ...entries] = readStrict(join(dir, 'd.dictionary.csv'));
    expect(head).toEqual(['name', 'source', 'type', 'description']);
    expect(entries.map((e) => e[0])).toEqual([...DEFAULT_COLUMNS]);
    const byName = Object.fromEntries(entries.map((e) => [e[0], { source: e[1], type: e[2], description: e[3] }]));
    expect(byName.patient_source_key).toMatchObject({ source: '$sourceKey(subject.reference)', type: 'string' });
    expect(byName.value!.type).toBe('integer'); // observed
    expect(byName.loinc!.source).toBe('code.coding[system = "http://loinc.org"].code');

    const custom = await cliInProcess(['export', 'mapping.yaml', '--out', 'c.csv', '--dictionary', 'c.dictionary.json'], { cwd: dir, env: envFor(sb) });
    expect(custom.code, custom.stderr).toBe(0);
    const cd = JSON.parse(readFileSync(join(dir, 'c.dictionary.json'), 'utf8')) as {
      columns: { name: string; source: string; type: string; description: string }[];
    };
    expect(cd.columns.map((c) => [c.name, c.source, c.type])).toEqual([
      ['id', 'id', 'string'],
      ['mrn', '$sourceKey(subject.reference)', 'string'],
      ['questionnaire', 'code.text', 'string'],
      ['score', 'valueInteger', 'integer'],
      ['effective', 'effectiveDateTime', 'string'],
    ]);
    expect(cd.columns[0]!.description).toMatch(/^column of export `observations` \(mapping\.yaml:\d+:\d+\)$/);

    const wide = await exportCli(['--layout', 'wide', '--pseudonymize', '--out', 'w.csv', '--dictionary', 'w.dictionary.json'], {
      ...envFor(sb),
      CARE_PSEUDONYM_KEY: KEY_A,
    });
    expect(wide.code, wide.stderr).toBe(0);
    const text = readFileSync(join(dir, 'w.dictionary.json'), 'utf8');
    const wd = JSON.parse(text) as {
      layout: string;
      pseudonymized: boolean;
      rows: number;
      columns: { name: string; source: string; type: string; description: string }[];
    };
    expect(wd).toMatchObject({ layout: 'wide', pseudonymized: true, rows: expectedWide().size });
    expect(wd.columns.map((c) => c.name)).toEqual(readStrict(join(dir, 'w.csv'))[0]);
    expect(wd.columns.find((c) => c.name === 'PHQ-9 (44261-6)')).toMatchObject({
      source: expect.stringContaining('http://loinc.org|44261-6'),
      type: 'integer',
    });
    expect(wd.columns.find((c) => c.name === 'patient_id')!.description).toContain('HMAC-SHA-256');
    for (const mrn of mrns) expect(text).not.toContain(mrn);
    expect(text).not.toMatch(/Alice|analyst-key/);
  });
});
