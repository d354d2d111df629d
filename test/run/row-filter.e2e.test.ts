/**
 * Issue 22 item 2 through the built CLI against the sandbox over HTTP: a `where:` row filter, and "a map that
 * produces nothing skips the record" (plain and `groupBy`), counted as `skipped` — never rejected, never sent —
 * in the summary, `--json`, `plan`, the reports, the run history, `validate --sample` and `care-etl test`.
 * Fixture: test/fixtures/row-filter (10 patients, 3 deleted; 7 assignment rows, 4 of them ended).
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CareClient } from '../../src/api/client.js';
import { resolveConnection } from '../../src/api/connection.js';
import type { PlanDocument } from '../../src/pipeline/plan.js';
import type { RunReport } from '../../src/pipeline/run-report.js';
import type { ValidateReport } from '../../src/pipeline/validate-mapping.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { copyTree, runCliInProcess } from '../helpers/cli.js';

let sb: Sandbox;
beforeAll(async () => {
  sb = await startSandbox({ tenants: ['t-where', 't-empty-map'], observationsPerPatient: 0 });
});
afterAll(async () => {
  await sb?.close();
});

const envOf = (tenantId: string) => ({
  CARE_BASE_URL: sb.url,
  CARE_API_KEY: sb.credentials.apiKey,
  CARE_EMR_ID: sb.credentials.emrId,
  CARE_TENANT_ID: tenantId,
});
const LOADED = ['001', '002', '004', '005', '007', '008', '010'];
/** Names and MRNs of the deleted patients: in no output but the server's absence of them. */
const DELETED = ['003', '006', '009', 'Cleo', 'Marsh', 'Finn', 'Osei', 'Ivy', 'Castell'];

async function serverHolds(tenantId: string): Promise<{ patients: string[]; teams: string[] }> {
  const client = new CareClient(resolveConnection({ baseUrl: sb.url, apiKey: sb.credentials.apiKey, emrId: sb.credentials.emrId, tenantId }), { retry: false });
  try {
    const patients: string[] = [];
    for await (const p of client.list('Patient', { pageSize: 100 })) patients.push(String((p as { identifier?: { value?: string }[] }).identifier?.[0]?.value));
    const teams: string[] = [];
    for await (const t of client.list('CareTeam', { pageSize: 100 })) teams.push(String((t as { name?: string }).name));
    return { patients: patients.sort(), teams: teams.sort() };
  } finally {
    await client.close();
  }
}

/** Every file a run wrote beside the mapping (state, rejects, summary, reports), as text. */
function outputsOf(dir: string): string {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d)) {
      const p = join(d, e);
      if (statSync(p).isDirectory()) walk(p);
      else if (!p.includes('/data/') && !/\.ya?ml$/.test(p) && !p.endsWith('.db') && !p.endsWith('-wal') && !p.endsWith('-shm'))
        out.push(readFileSync(p, 'utf8'));
    }
  };
  walk(dir);
  return out.join('\n');
}

describe('where: a row filter — rows left out are skipped, not rejected, not sent', () => {
  const dir = copyTree('test/fixtures/row-filter', 'care-etl-where-');
  const mapping = join(dir, 'where.yaml');
  const env = () => envOf('t-where');

  it('validate --sample and plan (before the run) count the skipped rows', async () => {
    const v = await runCliInProcess(['validate', mapping, '--sample', '10', '--json']);
    expect(v.code, v.stderr).toBe(0);
    const samples = (JSON.parse(v.stdout) as ValidateReport).samples!;
    expect(samples.patient).toMatchObject({ rows: 10, skipped: 3, valid: 7, rejects: [] });
    expect(samples.careteam).toMatchObject({ rows: 7, skipped: 4, valid: 3, rejects: [] });
    const vText = await runCliInProcess(['validate', mapping, '--sample', '10']);
    expect(vText.stdout).toMatch(/^mapping\s+rows\s+skipped\s+valid\s+rejected$/m);
    expect(vText.stdout).toMatch(/^patient\s+10\s+3\s+7\s+0$/m);

    const plan = await runCliInProcess(['plan', mapping, '--json', '--progress', 'none'], { env: env() });
    expect(plan.code, plan.stderr).toBe(4);
    const doc = JSON.parse(plan.stdout) as PlanDocument;
    expect(doc.mappings.patient!.counts).toMatchObject({ read: 10, skipped: 3, created: 7, rejected: 0 });
    expect(doc.mappings.careteam!.counts).toMatchObject({ read: 7, skipped: 4, created: 3, rejected: 0 });
    expect(doc.totals).toMatchObject({ skipped: 7, rejected: 0 });
    const text = await runCliInProcess(['plan', mapping, '--progress', 'none'], { env: env() });
    expect(text.stdout).toMatch(/^mapping\s+type\s+read\s+skipped\s+create\s/m);
    expect(text.stdout).toMatch(/^patient\s+Patient\s+10\s+3\s+7\s/m);
    expect(text.stderr).toContain('7 skipped (where: or a map producing nothing)'); // the plan's verdict line, on stderr
    expect((await serverHolds('t-where')).patients).toEqual([]);
  });

  it('run: 7 patients and 3 care teams loaded (checked on the server), 3 + 4 rows skipped, 0 rejected, exit 0; summary, reports, history', async () => {
    const html = join(dir, 'report.html');
    const run = await runCliInProcess(['run', mapping, '--progress', 'none', '--report', html], { env: env() });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^mapping\s+read\s+skipped\s+created\s+updated\s+unchanged\s+adopted\s+rejected\s+ended$/m);
    expect(run.stdout).toMatch(/^patient\s+10\s+3\s+7\s+0\s+0\s+0\s+0\s+0$/m);
    expect(run.stdout).toMatch(/^careteam\s+7\s+4\s+3\s+0\s+0\s+0\s+0\s+0$/m);
    const held = await serverHolds('t-where');
    expect(held.patients).toEqual(LOADED);
    expect(held.teams).toEqual(['Care team of 001 (Psychiatrist)', 'Care team of 002 (Nurse)', 'Care team of 005 (Nurse)']);
    const page = readFileSync(html, 'utf8');
    const counts = /<table class="counts">[\s\S]*?<\/table>/
      .exec(page)![0]
      .replace(/<[^>]+>/g, ' ')
      .replace(/\s+/g, ' ');
    expect(counts).toContain('mapping read skipped created updated unchanged adopted rejected ended written');
    expect(counts).toContain('patient 10 3 7 0 0 0 0 0 0');
    expect(page).toContain('<title>patient: skipped 3</title>');

    // A second run: --json and the Markdown report; nothing new is sent, the skips are counted again.
    const md = join(dir, 'report.md');
    const again = await runCliInProcess(['run', mapping, '--json', '--report', md], { env: env() });
    expect(again.code, again.stderr).toBe(0);
    const report = JSON.parse(again.stdout) as RunReport;
    expect(report.mappings.patient).toMatchObject({ read: 10, skipped: 3, unchanged: 7, rejected: 0 });
    expect(report.mappings.careteam).toMatchObject({ read: 7, skipped: 4, unchanged: 3, rejected: 0 });
    expect(report.totals).toMatchObject({ skipped: 7, rejected: 0, ended: 0 });
    expect(report.exitCode).toBe(0);
    expect(readFileSync(md, 'utf8')).toMatch(/^\| mapping \| read \| skipped \| created \|.*\n.*\n\| patient \| 10 \| 3 \| 0 \| 0 \| 7 \|/m);
    expect(readFileSync(md, 'utf8')).toContain('skipped 3');

    const shown = await runCliInProcess(['runs', 'show', mapping, '1']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/^mapping\s+read\s+skipped\s+created\s/m);
    expect(shown.stdout).toMatch(/^patient\s+10\s+3\s+7\s/m);
    const history = JSON.parse((await runCliInProcess(['runs', mapping, '--json'])).stdout) as { runs: { summary: { totals: Record<string, number> } }[] };
    expect(history.runs.map((r) => r.summary.totals.skipped)).toEqual([7, 7]);

    // no cell of a skipped row in any file the runs wrote (rejects, summary, reports)
    // (as a whole token: the sandbox's port or a duration may hold the digits "009")
    const written = outputsOf(dir);
    for (const v of DELETED) expect(written, `outputs hold ${v}`).not.toMatch(new RegExp(`(?<![\\w.:])${v}(?![\\w])`));
  }, 60_000);

  it('dry run: the skipped rows are not written', async () => {
    const out = join(dir, 'dry');
    const dry = await runCliInProcess(['run', mapping, '--dry-run', '--out', out, '--json']);
    expect(dry.code, dry.stderr).toBe(0);
    expect((JSON.parse(dry.stdout) as RunReport).totals).toMatchObject({ skipped: 7, written: 10, rejected: 0 });
    const patients = readFileSync(join(out, 'Patient.ndjson'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { identifier: { value: string }[] }).identifier[0]!.value);
    expect(patients).toEqual(LOADED);
  });
});

describe('a map that produces nothing skips its record (plain) or group (groupBy)', () => {
  const dir = copyTree('test/fixtures/row-filter', 'care-etl-empty-map-');
  const mapping = join(dir, 'empty-map.yaml');
  const env = () => envOf('t-empty-map');

  it('care-etl test: `expect: []` passes for a deleted patient and for a care team whose assignments all ended', async () => {
    const res = await runCliInProcess(['test', join(dir, 'empty-map.test.yaml'), '--json']);
    expect(res.code, res.stdout).toBe(0);
    expect((JSON.parse(res.stdout) as { totals: Record<string, number> }).totals).toMatchObject({ cases: 4, passed: 4, failed: 0, errors: 0 });
  });

  it('dry run and run: skipped, not rejected, exit 0; the server holds the 7 patients and 3 care teams', async () => {
    const out = join(dir, 'dry');
    const dry = await runCliInProcess(['run', mapping, '--dry-run', '--out', out, '--json']);
    expect(dry.code, dry.stderr).toBe(0);
    const d = JSON.parse(dry.stdout) as RunReport;
    expect(d.mappings.patient).toMatchObject({ read: 10, skipped: 3, written: 7, rejected: 0 });
    expect(d.mappings.careteam).toMatchObject({ read: 7, skipped: 3, written: 3, rejected: 0 }); // groups 003 (1 row), 004 (2 rows)
    expect(readFileSync(join(out, 'Patient.ndjson'), 'utf8').trim().split('\n')).toHaveLength(7);

    const run = await runCliInProcess(['run', mapping, '--json'], { env: env() });
    expect(run.code, run.stderr).toBe(0);
    const r = JSON.parse(run.stdout) as RunReport;
    expect(r.mappings.patient).toMatchObject({ read: 10, skipped: 3, created: 7, rejected: 0 });
    expect(r.mappings.careteam).toMatchObject({ read: 7, skipped: 3, created: 3, rejected: 0 });
    const held = await serverHolds('t-empty-map');
    expect(held.patients).toEqual(LOADED);
    expect(held.teams).toHaveLength(3);
  }, 60_000);
});
