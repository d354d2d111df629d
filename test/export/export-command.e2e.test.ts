import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { DEFAULT_COLUMNS } from '../../src/export/default-columns.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { Ledger } from '../../src/state/ledger.js';
import { cliInProcess, clientFor, envFor, loadPatients, observation, oldObservations, parseCsv, ROOT, TENANT, workDir } from './helpers.js';

// Runs the built CLI in this worker (`runCliInProcess`; `npm run build` first, CI builds in `npm ci` → prepare) against an in-process
// sandbox on 127.0.0.1 (ephemeral port); credentials travel in CARE_* variables.
beforeAll(() => {
  if (!existsSync(join(ROOT, 'dist/commands/export.js'))) throw new Error('dist/ is missing: run `npm run build` first');
});

let sb: Sandbox;
let dir: string;
beforeEach(async () => {
  sb = await startSandbox({ observationsPerPatient: 0, pageSize: 10 });
  dir = workDir();
});
afterEach(async () => {
  await sb.close();
});

const exportCli = (args: string[], env = envFor(sb)) => cliInProcess(['export', ...args], { cwd: dir, env });
const mode = (f: string) => statSync(f).mode & 0o777;

describe('care-etl export', () => {
  test('exports more than 3 pages to a 0600 file: exactly one row per observation, progress on stderr', async () => {
    sb.addObservations(TENANT, oldObservations(35));
    const r = await exportCli(['mapping-default.yaml', '--out', 'out/obs.csv']);
    expect(r.stderr).toContain('Exported 35 rows from 4 pages');
    expect(r.stderr).toMatch(/exporting: \d+ pages/);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('');
    const file = join(dir, 'out/obs.csv');
    expect(mode(file)).toBe(0o600);
    expect(readdirSync(join(dir, 'out'))).toEqual(['obs.csv', 'obs.datapackage.json']); // no .partial left behind
    const rows = parseCsv(readFileSync(file, 'utf8'));
    expect(rows).toHaveLength(35);
    expect(new Set(rows.map((row) => row.id)).size).toBe(35);
    expect(Object.keys(rows[0]!)).toEqual([...DEFAULT_COLUMNS]);
  });

  test('tightens the mode of an existing output file to 0600', async () => {
    const file = join(dir, 'obs.csv');
    writeFileSync(file, 'old', { mode: 0o644 });
    const r = await exportCli(['mapping-default.yaml', '--out', 'obs.csv']);
    expect(r.code).toBe(0);
    expect(mode(file)).toBe(0o600);
  });

  test('round-trips commas, quotes, newlines and non-ASCII text; neutralises formulas unless --no-escape-formulas', async () => {
    const texts = ['a, b', 'say "hi"', 'two\nlines', 'crlf\r\nx', 'Échelle — 日本語 🧠'];
    const risky = ['=HYPERLINK("http://evil.example","x")', '+1', '@SUM(A1)', '-1+1'];
    sb.addObservations(
      TENANT,
      [...texts, ...risky].map((t, i) => observation('p', { id: `o${i}`, code: { text: t }, valueInteger: -3 })),
    );

    const r = await exportCli(['mapping-default.yaml']); // --out - (stdout) is the default
    expect(r.code).toBe(0);
    const rows = parseCsv(r.stdout);
    expect(rows.map((row) => row.questionnaire)).toEqual([...texts, ...risky.map((t) => `'${t}`)]);
    expect(rows.every((row) => row.value === '-3')).toBe(true); // numbers stay numbers

    const raw = await exportCli(['mapping-default.yaml', '--no-escape-formulas', '--bom']);
    expect(raw.stdout.startsWith('\uFEFF')).toBe(true);
    expect(parseCsv(raw.stdout).map((row) => row.questionnaire)).toEqual([...texts, ...risky]);
  });

  test('--since last exports only what is new; --json prints the summary', async () => {
    sb.addObservations(TENANT, oldObservations(12));
    const first = await exportCli(['mapping-default.yaml', '--since', 'last', '--overlap', '0', '--out', 'a.csv', '--json']);
    expect(first.code).toBe(0);
    const s1 = JSON.parse(first.stdout) as Record<string, unknown>;
    expect(s1).toMatchObject({ rows: 12, pages: 2, out: join(dir, 'a.csv'), since: null, watermarkSaved: true });
    expect(typeof s1.durationMs).toBe('number');
    expect(typeof s1.watermark).toBe('string');

    await sleep(10);
    sb.addObservations(TENANT, [observation('p', { id: 'new-1' }), observation('p', { id: 'new-2' })]);
    const second = await exportCli(['mapping-default.yaml', '--since', 'last', '--overlap', '0', '--out', 'b.csv', '--json']);
    const s2 = JSON.parse(second.stdout) as Record<string, unknown>;
    expect(s2).toMatchObject({ rows: 2, since: s1.watermark });
    expect(parseCsv(readFileSync(join(dir, 'b.csv'), 'utf8')).map((row) => row.id)).toEqual(['new-1', 'new-2']);

    const explicit = await exportCli(['mapping-default.yaml', '--since', '2024-06-02']);
    expect(parseCsv(explicit.stdout).map((row) => row.id)).toEqual(['new-1', 'new-2']);
  });

  test('source keys join back: the MRN column comes from the ledger; --patient filters by source key', async () => {
    const seeded = await startSandbox({ observationsPerPatient: 2, pageSize: 10 });
    try {
      const client = clientFor(seeded);
      const ids = await loadPatients(client, join(dir, '.care-etl/state.db'), seeded.url, ['00123', '00456', '00789']);
      await client.close();
      seeded.addObservations(TENANT, [observation('unknown-patient', { id: 'orphan' })]);

      const r = await exportCli(['mapping.yaml', '--out', 'obs.csv'], envFor(seeded));
      expect(r.code).toBe(0);
      const rows = parseCsv(readFileSync(join(dir, 'obs.csv'), 'utf8'));
      expect(Object.keys(rows[0]!)).toEqual(['id', 'mrn', 'questionnaire', 'score', 'effective']);
      expect(rows).toHaveLength(7);
      const mrns = rows.map((row) => row.mrn);
      expect(mrns.filter((m) => m === '00123')).toHaveLength(2);
      expect(mrns.filter((m) => m === '00456')).toHaveLength(2);
      expect(mrns.filter((m) => m === '00789')).toHaveLength(2);
      expect(rows.find((row) => row.id === 'orphan')!.mrn).toBe('');

      const one = await exportCli(['mapping-default.yaml', '--patient', '00456', '--format', 'ndjson'], envFor(seeded));
      expect(one.code).toBe(0);
      const lines = one.stdout
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines).toHaveLength(2);
      expect(lines.every((l) => l.patient_source_key === '00456' && l.patient_id === ids.get('00456'))).toBe(true);
      expect(typeof lines[0]!.value).toBe('number');

      const unknown = await exportCli(['mapping-default.yaml', '--patient', '99999'], envFor(seeded));
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toContain('No patient with source key `99999`');
    } finally {
      await seeded.close();
    }
  });

  test('writes a header-only CSV when the tenant has no observations', async () => {
    const r = await exportCli(['mapping.yaml']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('id,mrn,questionnaire,score,effective\r\n');
    expect(r.stderr).toContain('Exported 0 rows');
  });

  test('--columns file: its own columns, positions in its errors', async () => {
    sb.addObservations(TENANT, [observation('p', { id: 'x1' })]);
    const r = await exportCli(['mapping.yaml', '--columns', 'columns.yaml', '--format', 'ndjson']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ observation: 'x1', patient_mrn: null, instrument: '44261-6', value: 7 });
    const bad = await exportCli(['mapping.yaml', '--columns', 'bad-columns.yaml']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/bad-columns\.yaml:3:\d+: error \[jsonata-syntax\]/);
  });

  test('configuration and authentication errors exit 2 (key redacted); --json needs a file', async () => {
    const json = await exportCli(['mapping.yaml', '--json']);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stdout)).toMatchObject({ exitCode: 2, error: { message: expect.stringContaining('--out') } });

    const auth = await exportCli(['mapping.yaml', '--out', 'x.csv'], { ...envFor(sb), CARE_API_KEY: 'wrong-key-1234' });
    expect(auth.code).toBe(2);
    expect(auth.stderr).toContain('HTTP 401');
    expect(auth.stderr + auth.stdout).not.toContain('wrong-key-1234');
    expect(existsSync(join(dir, 'x.csv'))).toBe(false);
    expect(existsSync(join(dir, 'x.csv.partial'))).toBe(false);

    // Unwritable --out with the embedded sandbox: exit 2, and the process ends (cleanup closes the sandbox).
    writeFileSync(join(dir, 'a-file'), '');
    const unwritable = await exportCli(['mapping.yaml', '--out', 'a-file/obs.csv'], envFor(undefined));
    expect(unwritable.code).toBe(2);
    expect(unwritable.stderr).toContain('Cannot write the output file a-file/obs.csv.partial');

    const name = await exportCli(['mapping.yaml', 'observatons']);
    expect(name.code).toBe(2);
    expect(name.stderr).toContain('did you mean `observations`?');
  });

  test('a column failing mid-export exits 2 (the mapping is at fault), leaves no partial file, keeps the previous output and the watermark', async () => {
    writeFileSync(join(dir, 'obs.csv'), 'previous export\n');
    sb.addObservations(TENANT, oldObservations(25));
    sb.addObservations(TENANT, [observation('p', { id: 'odd', effectiveDateTime: 'not a date' })]);
    writeFileSync(join(dir, 'dates.yaml'), 'columns:\n  id: id\n  day: $date($substring(effectiveDateTime, 0, 10), "YYYY-MM-DD")\n');
    const r = await exportCli(['mapping.yaml', '--columns', 'dates.yaml', '--out', 'obs.csv', '--since', 'last']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('observation odd');
    expect(readFileSync(join(dir, 'obs.csv'), 'utf8')).toBe('previous export\n');
    expect(existsSync(join(dir, 'obs.csv.partial'))).toBe(false);
    const ledger = Ledger.open(join(dir, '.care-etl/state.db'));
    try {
      expect(ledger.scope(sb.url, TENANT).getWatermark('export:dates')).toBeUndefined();
    } finally {
      ledger.close();
    }
  });

  test('with no target configured: `run` then `export` on the embedded sandbox, MRNs joined', async () => {
    const env = envFor(undefined);
    const load = await cliInProcess(['run', 'mapping.yaml'], { cwd: dir, env });
    expect(load.code).toBe(0);
    const r = await cliInProcess(['export', 'mapping.yaml'], { cwd: dir, env });
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('No target configured: exporting from the embedded sandbox');
    expect(r.stderr).toContain(join(dir, '.care-etl/sandbox.db'));
    const rows = parseCsv(r.stdout);
    expect(rows).toHaveLength(6); // the sandbox generates 2 questionnaire results per patient
    expect(rows.map((row) => row.mrn).sort()).toEqual(['00123', '00123', '00456', '00456', '00789', '00789']);
  });
});
