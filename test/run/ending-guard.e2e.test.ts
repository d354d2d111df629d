/**
 * Issue 22, item 8: no mass ending by accident. The example clinic is loaded with `onMissing: end` (on the care
 * team mapping, and separately on the patient mapping), then its export is damaged — emptied, cut to its header,
 * cut to a tenth of its rows: the built CLI ends nothing (checked on the sandbox over HTTP), exits 5 naming the
 * count and the limit, and `plan` shows the same numbers; with `--allow-ending 100%` the ends happen.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CareClient } from '../../src/api/client.js';
import { connectionFromEnv, resolveConnection } from '../../src/api/connection.js';
import type { Resource } from '../../src/api/types.js';
import type { PlanDocument } from '../../src/pipeline/plan.js';
import type { RunReport } from '../../src/pipeline/run-report.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { copyTree, runCliInProcess } from '../helpers/cli.js';

const API_KEY = 'ending-guard-key-5c1e';
let sb: Sandbox;
const envOf = (tenant: string) => ({ CARE_BASE_URL: sb.url, CARE_API_KEY: API_KEY, CARE_EMR_ID: 'emr-ending', CARE_TENANT_ID: tenant });

beforeAll(async () => {
  sb = await startSandbox({ apiKey: API_KEY, emrId: 'emr-ending', tenants: ['t-teams', 't-patients'], observationsPerPatient: 0 });
});
afterAll(async () => {
  await sb.close();
});

async function list(tenant: string, type: 'Patient' | 'CareTeam'): Promise<Resource[]> {
  const client = new CareClient(resolveConnection(connectionFromEnv(envOf(tenant))), { retry: false });
  try {
    const out: Resource[] = [];
    for await (const r of client.list(type, { pageSize: 1000 })) out.push(r);
    return out;
  } finally {
    await client.close();
  }
}
const endedTeams = async (tenant: string) => (await list(tenant, 'CareTeam')).filter((t) => (t.period as { end?: string } | undefined)?.end).length;
const inactivePatients = async (tenant: string) => (await list(tenant, 'Patient')).filter((p) => p.active === false).length;

/** A copy of examples/clinic loaded once into `tenant`; `patientEnd` adds `onMissing: end` to the patient mapping. */
async function loadedClinic(tenant: string, patientEnd: boolean) {
  const dir = copyTree('examples/clinic', 'care-etl-ending-');
  const mapping = join(dir, 'mapping.yaml');
  if (patientEnd) {
    const text = readFileSync(mapping, 'utf8');
    writeFileSync(mapping, text.replace('    from: patients\n    key: MRN\n', '    from: patients\n    key: MRN\n    onMissing: end\n'));
    expect(readFileSync(mapping, 'utf8')).toContain('key: MRN\n    onMissing: end\n');
  }
  const env = envOf(tenant);
  const first = await runCliInProcess(['run', mapping, '--progress', 'none'], { env });
  expect(first.code, first.stderr).toBe(1); // the example's deliberately bad rows
  const run = async (...extra: string[]) => {
    const r = await runCliInProcess(['run', mapping, '--progress', 'none', '--json', ...extra], { env });
    return { code: r.code, stderr: r.stderr, report: JSON.parse(r.stdout) as RunReport };
  };
  const plan = async (...extra: string[]) => {
    const r = await runCliInProcess(['plan', mapping, '--progress', 'none', ...extra], { env });
    const j = await runCliInProcess(['plan', mapping, '--progress', 'none', '--json', ...extra], { env });
    return { code: r.code, text: r.stdout, jsonCode: j.code, doc: JSON.parse(j.stdout) as PlanDocument };
  };
  return { dir, run, plan };
}

/** The file's header line and its data lines. */
function split(file: string): { header: string; rows: string[] } {
  const [header, ...rows] = readFileSync(file, 'utf8').split('\n').filter(Boolean);
  return { header: header!, rows };
}

describe('care teams (onMissing: end on the assignments)', () => {
  const T = 't-teams';
  let clinic: Awaited<ReturnType<typeof loadedClinic>>;
  let file: string;
  let original: { header: string; rows: string[] };
  let loaded: number;

  beforeAll(async () => {
    clinic = await loadedClinic(T, false);
    file = join(clinic.dir, 'data', 'assignments.csv');
    original = split(file);
    loaded = (await list(T, 'CareTeam')).length;
    expect(loaded).toBe(28);
    expect(await endedTeams(T)).toBe(0);
  }, 60_000);

  it('an emptied file (0 bytes) ends nothing and exits non-zero', async () => {
    writeFileSync(file, '');
    const { code, report, stderr } = await clinic.run();
    // A zero-byte source may also be refused up front as a source error (exit 2): either way nothing is ended.
    expect([2, 5], stderr).toContain(code);
    if (code === 5) {
      expect(report.endingGuard!.careteam).toMatchObject({ wouldEnd: 28, loaded: 28, rowsRead: 0, allowed: false, reason: 'empty-source' });
      expect(report.warnings.join('\n')).toContain('careteam: would end 28 of 28 care teams (100 %), but its source has no data rows');
      expect(report.mappings.careteam.ended).toBe(0);
    }
    expect(await endedTeams(T)).toBe(0);
  }, 60_000);

  it('a file cut to its header ends nothing, exits 5 and says why', async () => {
    writeFileSync(file, `${original.header}\n`);
    const { code, report, stderr } = await clinic.run();
    expect(code).toBe(5);
    expect(stderr).toContain('warning: careteam: would end 28 of 28 care teams'); // never silent, even under --json
    expect(report.exitCode).toBe(5);
    expect(report.endingGuard!.careteam).toMatchObject({ wouldEnd: 28, loaded: 28, rowsRead: 0, allowed: false, reason: 'empty-source' });
    expect(report.warnings.join('\n')).toContain('--allow-ending 100%');
    expect(report.mappings.careteam.ended).toBe(0);
    expect(report.ended).toEqual([]);
    expect(await endedTeams(T)).toBe(0);
  }, 60_000);

  it('a header-only file with --allow-ending 50% still ends nothing (only 100% lets an empty export end)', async () => {
    const { code, report } = await clinic.run('--allow-ending', '50%');
    expect(code).toBe(5);
    expect(report.endingGuard!.careteam).toMatchObject({ allowed: false, reason: 'empty-source', from: 'flag', allowance: '50%' });
    expect(await endedTeams(T)).toBe(0);
  }, 60_000);

  it('a file cut to a tenth of its rows: plan and run show the same numbers; nothing is ended; the rows still load', async () => {
    writeFileSync(file, `${[original.header, ...original.rows.slice(0, Math.ceil(original.rows.length / 10))].join('\n')}\n`);
    const p = await clinic.plan();
    expect(p.code).toBe(5);
    expect(p.jsonCode).toBe(5);
    const planned = p.doc.mappings.careteam!;
    expect(planned.endingGuard).toMatchObject({ allowed: false, reason: 'above-limit', loaded: 28, limit: 3, allowance: '10%', from: 'default' });
    expect(planned.ends.filter((e) => !e.member)).toEqual([]); // the plan's ends list reflects the guard
    const wouldEnd = planned.endingGuard!.wouldEnd;
    expect(wouldEnd).toBeGreaterThan(20);
    const message = `careteam: would end ${wouldEnd} of 28 care teams (${Math.round((100 * wouldEnd) / 28)} %), above the limit of 10% (3; the default) — nothing ended`;
    expect(p.text).toContain(message);
    expect(p.text).toContain('Exit code 5');

    const { code, report } = await clinic.run();
    expect(code).toBe(5);
    expect(report.endingGuard!.careteam).toMatchObject({ wouldEnd, loaded: 28, limit: 3, allowed: false, reason: 'above-limit' });
    expect(report.warnings.join('\n')).toContain(message);
    expect(report.warnings.join('\n')).toContain(`re-run with --allow-ending ${wouldEnd} (or 100%)`);
    expect(report.ended.filter((e) => !e.member)).toEqual([]);
    expect((await list(T, 'CareTeam')).filter((t) => (t.period as { end?: string } | undefined)?.end)).toEqual([]);
    expect(report.mappings.patient.unchanged).toBe(30); // the other mappings loaded as usual
  }, 60_000);

  it('with --allow-ending 100% the clinic closure goes through: the care teams are ended on the server', async () => {
    const p = await clinic.plan('--allow-ending', '100%');
    expect(p.code).toBe(4);
    const wouldEnd = p.doc.mappings.careteam!.endingGuard!.wouldEnd;
    expect(p.doc.mappings.careteam!.ends.filter((e) => !e.member)).toHaveLength(wouldEnd);
    const { code, report } = await clinic.run('--allow-ending', '100%');
    expect(code).toBe(1); // not 5: only the example's deliberately bad rows of the other mappings remain
    expect(report.endingGuard!.careteam).toMatchObject({ allowed: true, from: 'flag', allowance: '100%' });
    expect(report.ended.filter((e) => !e.member)).toHaveLength(wouldEnd);
    expect(await endedTeams(T)).toBe(wouldEnd);
  }, 60_000);
});

describe('patients (onMissing: end on the patient mapping: deactivation)', () => {
  const T = 't-patients';
  let clinic: Awaited<ReturnType<typeof loadedClinic>>;
  let file: string;
  let original: { header: string; rows: string[] };

  beforeAll(async () => {
    clinic = await loadedClinic(T, true);
    file = join(clinic.dir, 'data', 'patients.csv');
    original = split(file);
    expect((await list(T, 'Patient')).length).toBe(30);
    expect(await inactivePatients(T)).toBe(0);
  }, 60_000);

  it('emptied, or cut to its header: nobody is deactivated, exit non-zero', async () => {
    writeFileSync(file, '');
    const empty = await clinic.run();
    expect([2, 5], empty.stderr).toContain(empty.code);
    expect(await inactivePatients(T)).toBe(0);

    writeFileSync(file, `${original.header}\n`);
    const { code, report, stderr } = await clinic.run();
    expect(code).toBe(5);
    expect(stderr).toContain('warning: patient: would deactivate 30 of 30 patients'); // never silent, even under --json
    expect(report.endingGuard!.patient).toMatchObject({ wouldEnd: 30, loaded: 30, rowsRead: 0, allowed: false, reason: 'empty-source' });
    expect(report.warnings.join('\n')).toContain('patient: would deactivate 30 of 30 patients (100 %), but its source has no data rows');
    expect(await inactivePatients(T)).toBe(0);
  }, 60_000);

  it('cut to a tenth: plan shows the numbers, the run deactivates nobody; with --allow-ending 100% it does', async () => {
    writeFileSync(file, `${[original.header, ...original.rows.slice(0, Math.ceil(original.rows.length / 10))].join('\n')}\n`);
    const p = await clinic.plan();
    expect(p.code).toBe(5);
    expect(p.doc.mappings.patient!.endingGuard).toMatchObject({ wouldEnd: 26, loaded: 30, limit: 3, allowed: false });
    expect(p.text).toContain('patient: would deactivate 26 of 30 patients (87 %), above the limit of 10% (3; the default) — nothing ended');

    const refused = await clinic.run();
    expect(refused.code).toBe(5);
    expect(refused.report.endingGuard!.patient).toMatchObject({ wouldEnd: 26, loaded: 30, limit: 3, allowed: false, reason: 'above-limit' });
    expect(await inactivePatients(T)).toBe(0);

    const allowed = await clinic.run('--allow-ending', '100%');
    expect(allowed.code).toBe(1); // not 5: only the example's deliberately bad rows of the other mappings remain
    expect(allowed.report.mappings.patient.ended).toBe(26);
    expect(await inactivePatients(T)).toBe(26);
  }, 60_000);
});
