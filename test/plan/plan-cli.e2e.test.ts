/**
 * Issue 14 item 1 through the built CLI: `care-etl plan` exit codes (0 no changes, 4 changes, 2 usage), the
 * bounded terminal summary with field diffs, `--json`, and `--out` (mode 0600). Every request goes through a
 * recording proxy in front of the sandbox: a plan sends GETs only.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PlanDocument } from '../../src/pipeline/plan.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { copyTree, runCli, runCliInProcess } from '../helpers/cli.js';
import { makeClinic, mrn, patientsCsv, startRecordingProxy } from '../sync/helpers.js';

const N = 12;
const M = 3;
const TENANT = 't-plan-cli';
let sb: Sandbox;
let proxy: Awaited<ReturnType<typeof startRecordingProxy>>;

beforeAll(async () => {
  sb = await startSandbox({ tenants: [TENANT, 't-plan-example'], observationsPerPatient: 0 });
  proxy = await startRecordingProxy(sb.url);
});
afterAll(async () => {
  await proxy?.close();
  await sb?.close();
});

describe('care-etl plan (built CLI)', () => {
  const clinic = makeClinic(N, M, 'care-etl-plan-cli-');
  const teams = new Set(clinic.assignments.map((a) => a.mrn)).size;
  const env = () => ({ CARE_BASE_URL: proxy.url, CARE_API_KEY: sb.credentials.apiKey, CARE_EMR_ID: sb.credentials.emrId, CARE_TENANT_ID: TENANT });
  const methodsSince = (from: number) => [...new Set(proxy.log.slice(from).map((l) => l.split(' ')[0]))];

  it('before any run: exit 4, creates in the summary, --out written 0600 with the whole plan, GETs only, no state file', async () => {
    const out = join(clinic.dir, 'plan.json');
    const from = proxy.log.length;
    const res = await runCli(['plan', clinic.mapping, '--out', out, '--progress', 'none'], { env: env() });
    expect(res.code, res.stderr).toBe(4);
    expect(methodsSince(from)).toEqual(['GET']);
    expect(existsSync(clinic.state)).toBe(false);
    expect(res.stdout).toMatch(/^mapping\s+type\s+read\s+create\s+update\s+unchanged\s+adopt\s+end\s+reject\s+drifted$/m);
    expect(res.stdout).toMatch(new RegExp(`^\\s+\\+ create ${mrn(1)} \\(line 2\\)$`, 'm'));
    expect(res.stderr).toContain(`Plan: ${N + M + teams} to create, 0 to update, 0 to end`); // the verdict line (stderr)
    expect(res.stdout).toContain('Exit code 4: the run would write to the server.');
    expect(statSync(out).mode & 0o777).toBe(0o600);
    const doc = JSON.parse(readFileSync(out, 'utf8')) as PlanDocument;
    expect(doc).toMatchObject({ kind: 'care-etl-plan', version: 2, changes: true, totals: { created: N + M + teams } });
    expect(doc.mappings.patient!.creates).toHaveLength(N); // the whole plan, not the --limit shown
    expect(JSON.stringify(doc)).not.toContain(sb.credentials.apiKey);
  });

  it('on the loaded tenant: exit 0, "No changes"', async () => {
    const load = await runCliInProcess(['run', clinic.mapping, '--progress', 'none'], { env: env() });
    expect(load.code, load.stderr).toBe(0);
    const from = proxy.log.length;
    const res = await runCliInProcess(['plan', clinic.mapping, '--progress', 'none'], { env: env() });
    expect(res.code, res.stderr).toBe(0);
    expect(methodsSince(from)).toEqual(['GET']);
    expect(res.stderr).toContain(`0 to create, 0 to update, 0 to end; 0 adopted from the server, ${N + M + teams} unchanged`);
    expect(res.stdout).toContain('No changes: the run would send nothing.');
  });

  it('after editing 5 rows: exit 4, 5 updates with their field diffs (--json), the terminal shows the first --limit', async () => {
    const edited = [1, 4, 6, 9, 12];
    clinic.writePatients(patientsCsv(N, (i) => (edited.includes(i) ? 1 : 0)));
    const stateBefore = readFileSync(clinic.state);
    const from = proxy.log.length;
    const [json, text] = await Promise.all([
      runCliInProcess(['plan', clinic.mapping, '--json'], { env: env() }),
      runCliInProcess(['plan', clinic.mapping, '--limit', '2', '--progress', 'none'], { env: env() }),
    ]);
    expect(json.code, json.stderr).toBe(4);
    expect(methodsSince(from)).toEqual(['GET']);
    expect(readFileSync(clinic.state).equals(stateBefore)).toBe(true);
    const doc = JSON.parse(json.stdout) as PlanDocument & { exitCode: number };
    expect(doc.exitCode).toBe(4);
    expect(doc.totals).toMatchObject({ created: 0, updated: 5, ended: 0, adopted: 0, rejected: 0 });
    expect(doc.mappings.patient!.updates.map((u) => [u.key, u.diff.map((d) => d.path)])).toEqual(edited.map((i) => [mrn(i), ['/telecom/0/value']]));

    expect(text.code, text.stderr).toBe(4);
    expect(text.stdout.match(/^\s+~ update /gm)).toHaveLength(2);
    expect(text.stdout).toMatch(new RegExp(`~ update ${mrn(1)} Patient/\\S+ \\(line 2\\)\\n\\s+/telecom/0/value: "\\+1[0-9]+" → "\\+1[0-9]+"`));
    expect(text.stdout).toContain('… and 3 more update(s)');
    expect(text.stdout).toContain('patient (Patient): 5 to update');
  });

  it('the example clinic, loaded: exit 1 — no changes, but its 9 bad rows would be rejected', async () => {
    const dir = copyTree('examples/clinic', 'care-etl-plan-example-');
    const mapping = join(dir, 'mapping.yaml');
    const e = { ...env(), CARE_TENANT_ID: 't-plan-example' };
    const load = await runCliInProcess(['run', mapping, '--progress', 'none'], { env: e });
    expect(load.code, load.stderr).toBe(1);
    const res = await runCliInProcess(['plan', mapping, '--progress', 'none', '--limit', '0'], { env: e });
    expect(res.code, res.stderr).toBe(1);
    expect(res.stderr).toContain('0 to create, 0 to update, 0 to end; 0 adopted from the server, 64 unchanged, 9 row(s) would be rejected');
    expect(res.stdout).toContain('No changes to the server; 9 rows would be rejected (exit code 1).');
    expect(res.stdout).not.toMatch(/^\s+! reject/m); // --limit 0: the table and the verdict only
  });

  it('a usage error exits 2', async () => {
    const res = await runCliInProcess(['plan', clinic.mapping, '--limit', '-1', '--json'], { env: env() });
    expect(res.code).toBe(2);
    expect(JSON.parse(res.stdout)).toMatchObject({ error: { name: 'UsageError' }, exitCode: 2 });
  });
});
