import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { CareClient } from '../../src/api/client.js';
import { connectionFromEnv, resolveConnection } from '../../src/api/connection.js';
import type { Resource } from '../../src/api/types.js';
import type { RunReport } from '../../src/pipeline/run-report.js';
import { copyTree, ROOT, runCliInProcess } from '../helpers/cli.js';

const API_KEY = 'e2e-secret-key-7d41c0';
let sb: Sandbox;
let env: Record<string, string>;

const readNdjson = (file: string) =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);

async function all(client: CareClient, type: 'Patient' | 'Practitioner' | 'CareTeam'): Promise<Resource[]> {
  const out: Resource[] = [];
  for await (const r of client.list(type, { pageSize: 200 })) out.push(r);
  return out;
}

beforeAll(async () => {
  sb = await startSandbox({ apiKey: API_KEY, emrId: 'emr-e2e', tenants: ['t-run', 't-json', 't-exit'] });
  env = { CARE_BASE_URL: sb.url, CARE_API_KEY: API_KEY, CARE_EMR_ID: 'emr-e2e', CARE_TENANT_ID: 't-run' };
});
afterAll(async () => {
  await sb.close();
});

describe('care-etl run (built CLI) against the sandbox', () => {
  it('loads the example clinic: good rows load, bad rows are rejected with their row numbers, care teams point at the right ids', async () => {
    const dir = copyTree('examples/clinic');
    const res = await runCliInProcess(['run', join(dir, 'mapping.yaml'), '--progress', 'lines'], { env });
    expect(res.code, res.stderr).toBe(1); // the example has deliberately bad rows
    expect(res.stdout).toMatch(/patient\s+35\s+30\s+0\s+0\s+0\s+5/);
    expect(res.stdout).toMatch(/practitioner\s+7\s+6\s+0\s+0\s+0\s+1/);
    expect(res.stdout).toMatch(/careteam\s+48\s+28\s+0\s+0\s+0\s+3/);
    expect(res.stderr + res.stdout).not.toContain(API_KEY);

    const rejectsFile = join(dir, '.care-etl', 'rejects.ndjson');
    expect(statSync(rejectsFile).mode & 0o777).toBe(0o600);
    const rejects = readNdjson(rejectsFile);
    const where = rejects.map(
      (r) => `${(r.file as string).split('/').pop()}:${r.line ?? `#${r.record}`}:${r.stage}:${(r.issues as { code: string }[])[0].code}`,
    );
    // Each mapping's rejects in source order; patients and practitioners load alongside (issue 28), so their lines may interleave.
    const files = ['patients.csv', 'practitioners.json', 'assignments.csv'];
    const byFile = (w: string) => files.indexOf(w.split(':')[0]!);
    expect([...where].sort((a, b) => byFile(a) - byFile(b))).toEqual([
      'patients.csv:21:source:csv-ragged',
      'patients.csv:33:transform:date-invalid',
      'patients.csv:34:transform:key-missing',
      'patients.csv:35:transform:lookup-miss',
      'patients.csv:36:transform:duplicate-key',
      'practitioners.json:#7:transform:key-missing',
      'assignments.csv:3:transform:ref-missing',
      'assignments.csv:6:transform:date-invalid',
      'assignments.csv:47:transform:ref-rejected',
    ]);
    // The rejected rows are kept whole for re-processing.
    expect((rejects[where.indexOf('patients.csv:33:transform:date-invalid')].row as { MRN: string }).MRN).toBe('000031');

    const client = new CareClient(resolveConnection(connectionFromEnv(env)), { retry: false });
    try {
      const patients = await all(client, 'Patient');
      const practitioners = await all(client, 'Practitioner');
      const teams = await all(client, 'CareTeam');
      expect([patients.length, practitioners.length, teams.length]).toEqual([30, 6, 28]);
      const mrnOf = new Map(patients.map((p) => [`Patient/${p.id}`, (p.identifier as { value: string }[])[0].value]));
      const npiOf = new Map(practitioners.map((p) => [`Practitioner/${p.id}`, (p.identifier as { value: string }[])[0].value]));
      // Expected assignments straight from the source file.
      const rows = readFileSync(join(dir, 'data', 'assignments.csv'), 'utf8')
        .trim()
        .split('\n')
        .slice(1)
        .map((l) => l.split(';'));
      for (const team of teams) {
        const mrn = mrnOf.get((team.subject as { reference: string }).reference);
        expect(mrn, 'subject refers to a loaded patient').toBeDefined();
        const members = (team.participant as { member: { reference: string } }[]).map((p) => npiOf.get(p.member.reference)).sort();
        const expected = rows
          .filter((r) => r[0] === mrn)
          .map((r) => r[1])
          .sort();
        expect(members).toEqual(expected);
      }
    } finally {
      await client.close();
    }

    // A second run of the unchanged export writes nothing.
    const again = await runCliInProcess(['run', join(dir, 'mapping.yaml'), '--json'], { env });
    const report = JSON.parse(again.stdout) as RunReport;
    expect(report.totals).toMatchObject({ created: 0, updated: 0, unchanged: 64, rejected: 9 });
  });

  it('--dry-run sends nothing and writes resources per type matching the golden files', async () => {
    const dir = copyTree('examples/clinic');
    const out = join(dir, 'out');
    const before = sb.stats().requests;
    // No target at all: a dry run must not start the embedded sandbox either.
    const res = await runCliInProcess(['run', join(dir, 'mapping.yaml'), '--dry-run', '--out', out, '--progress', 'none']);
    expect(res.code, res.stderr).toBe(1);
    expect(sb.stats().requests).toBe(before);
    // A dry run keeps its own rejects file, beside its output (the last real run's stays as it was).
    expect(readdirSync(out).sort()).toEqual(['CareTeam.ndjson', 'Patient.ndjson', 'Practitioner.ndjson', 'rejects.ndjson', 'rejects.summary.csv']);
    for (const f of readdirSync(out)) {
      expect(statSync(join(out, f)).mode & 0o777).toBe(0o600);
      if (f === 'rejects.ndjson') expect(readNdjson(join(out, f)).map((r) => r.stage)).toHaveLength(9);
      else if (f === 'rejects.summary.csv') expect(readFileSync(join(out, f), 'utf8').trimEnd().split('\r\n')).toHaveLength(1 + 9);
      else expect(readFileSync(join(out, f), 'utf8')).toBe(readFileSync(join(ROOT, 'test/fixtures/run/golden', f), 'utf8'));
    }
    expect(existsSync(join(dir, '.care-etl', 'rejects.ndjson'))).toBe(false);
  });

  it('--json prints a machine-readable report; --report writes it', async () => {
    const dir = copyTree('examples/clinic');
    const reportFile = join(dir, 'report.json');
    const res = await runCliInProcess(['run', join(dir, 'mapping.yaml'), '--json', '--report', reportFile], { env: { ...env, CARE_TENANT_ID: 't-json' } });
    expect(res.code).toBe(1);
    const report = JSON.parse(res.stdout) as RunReport;
    expect(report.exitCode).toBe(1);
    expect(report.order).toEqual(['patient', 'practitioner', 'careteam']);
    expect(report.mappings.patient).toMatchObject({ read: 35, created: 30, rejected: 5 });
    expect(JSON.parse(readFileSync(reportFile, 'utf8'))).toEqual(report);
    expect(statSync(reportFile).mode & 0o777).toBe(0o600);
    expect(res.stdout).not.toContain(API_KEY);
  });

  it('exit codes: 0 all loaded, 2 broken mapping, 2 wrong key (nothing loaded, key not shown)', async () => {
    const clean = join(ROOT, 'test/fixtures/run/clean/mapping.yaml');
    const ok = await runCliInProcess(
      ['run', clean, '--state', join(copyTree('test/fixtures/run/clean'), 'state.db'), '--rejects', join(copyTree('test/fixtures/run/clean'), 'r.ndjson')],
      { env: { ...env, CARE_TENANT_ID: 't-exit' } },
    );
    expect(ok.code, ok.stderr).toBe(0);

    const broken = await runCliInProcess(['run', join(ROOT, 'test/fixtures/run/broken/mapping.yaml')], { env });
    expect(broken.code).toBe(2);
    expect(broken.stderr).toMatch(/mapping\.yaml:\d+:\d+/);

    const dir = copyTree('examples/clinic');
    const wrongKey = 'wrong-key-should-not-print-123';
    const before = sb.stats().requests;
    const denied = await runCliInProcess(['run', join(dir, 'mapping.yaml')], { env: { ...env, CARE_API_KEY: wrongKey } });
    expect(denied.code).toBe(2);
    expect(denied.stderr).toMatch(/401/);
    expect(denied.stderr).toMatch(/API key/);
    expect(denied.stderr + denied.stdout).not.toContain(wrongKey);
    expect(sb.stats().requests - before).toBe(1); // only the preflight request
  });

  it('with no target configured, loads into the embedded sandbox beside the mapping, durable across runs', async () => {
    const dir = copyTree('examples/clinic');
    const first = await runCliInProcess(['run', join(dir, 'mapping.yaml'), '--progress', 'lines']);
    expect(first.code, first.stderr).toBe(1);
    expect(first.stderr).toMatch(/No target configured: loading into the embedded sandbox/);
    expect(statSync(join(dir, '.care-etl', 'sandbox.db')).mode & 0o777).toBe(0o600);
    const second = await runCliInProcess(['run', join(dir, 'mapping.yaml'), '--json']);
    const report = JSON.parse(second.stdout) as RunReport;
    expect(report.target?.embedded).toBe(true);
    expect(report.totals).toMatchObject({ created: 0, updated: 0, unchanged: 64 });
  });
});

describe('care-etl run --max-errors', () => {
  it('stops once N rows were rejected (--max-errors N), and says so', async () => {
    const dir = copyTree('examples/clinic');
    const res = await runCliInProcess(['run', join(dir, 'mapping.yaml'), '--dry-run', '--max-errors', '2', '--json']);
    expect(res.code).toBe(1);
    const report = JSON.parse(res.stdout) as RunReport;
    expect(report.stoppedEarly).toMatch(/--max-errors/);
    expect(report.totals.rejected).toBe(2);
    expect(report.mappings.careteam.read).toBe(0);
  });
});
