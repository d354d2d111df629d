/**
 * Issue 24 item 6: one state shared by the runners of several tenants and servers — `care-etl runs` lists them all,
 * `--tenant` / `--server` keep one's; CARE_STATE_SECRET (item 5) never reaches any output or the state itself.
 */
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { ROOT, runCliInProcess } from '../helpers/cli.js';

const SECRET = 'f00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeed';
let a: Sandbox;
let b: Sandbox;
beforeAll(async () => {
  [a, b] = await Promise.all([
    startSandbox({ tenants: ['clinic-1', 'clinic-2'], observationsPerPatient: 0 }),
    startSandbox({ tenants: ['clinic-1'], observationsPerPatient: 0 }),
  ]);
});
afterAll(async () => {
  await Promise.all([a.close(), b.close()]);
});

interface Listed {
  runs: { id: number; baseUrl: string; tenantId: string }[];
}

describe('care-etl runs on a state shared by several runners', () => {
  it('lists every tenant and server; --tenant and --server filter; the state secret is never shown', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-runs-filter-'));
    copyFileSync(join(ROOT, 'test/fixtures/hmac/name-birthdate-mapping.yaml'), join(dir, 'mapping.yaml'));
    writeFileSync(join(dir, 'patients.csv'), 'MRN,FIRST,LAST,DOB\nM1,Dulcinea,Quixotely,1980-01-02\nM2,Sancho,Panzabrook,1975-11-23\n');
    const mapping = join(dir, 'mapping.yaml');
    const state = join(dir, 'shared-state.db');
    const runner = (sb: Sandbox, tenant: string) => ({
      CARE_BASE_URL: sb.url,
      CARE_API_KEY: sb.credentials.apiKey,
      CARE_EMR_ID: sb.credentials.emrId,
      CARE_TENANT_ID: tenant,
      CARE_STATE_SECRET: SECRET,
    });
    const outputs: string[] = [];
    // Two runners in-process, the third through the CLI (its output is checked for the secret).
    for (const [sb, tenant] of [
      [a, 'clinic-1'],
      [a, 'clinic-2'],
    ] as const) {
      const report = await runPipeline({
        mappingFile: mapping,
        statePath: state,
        env: runner(sb, tenant),
        connection: { baseUrl: sb.url, apiKey: sb.credentials.apiKey, emrId: sb.credentials.emrId, tenantId: tenant },
      });
      expect(report.exitCode).toBe(0);
    }
    const third = await runCliInProcess(['run', mapping, '--state', state, '--json', '--verbose'], { env: runner(b, 'clinic-1') });
    expect(third.code, third.stderr).toBe(0);
    outputs.push(third.stdout, third.stderr);

    const list = async (...filters: string[]): Promise<[string, string][]> => {
      const r = await runCliInProcess(['runs', '--state', state, '--json', ...filters], { env: { CARE_STATE_SECRET: SECRET } });
      expect(r.code, r.stderr).toBe(0);
      outputs.push(r.stdout, r.stderr);
      return (JSON.parse(r.stdout) as Listed).runs.map((x) => [x.baseUrl, x.tenantId]);
    };
    const [all, tenant, server, none, short] = await Promise.all([
      list(),
      list('--tenant', 'clinic-1'),
      list('--server', `${a.url}/`, '--limit', '1'),
      runCliInProcess(['runs', '--state', state, '--tenant', 'clinic-9']),
      // A secret too short is refused (exit 2) without showing it.
      runCliInProcess(['run', mapping, '--state', state], { env: { ...runner(a, 'clinic-1'), CARE_STATE_SECRET: 'short-secret' } }),
    ]);
    expect(all).toEqual([
      [b.url, 'clinic-1'],
      [a.url, 'clinic-2'],
      [a.url, 'clinic-1'],
    ]);
    expect(tenant).toEqual([
      [b.url, 'clinic-1'],
      [a.url, 'clinic-1'],
    ]);
    expect(server).toEqual([[a.url, 'clinic-2']]);
    expect(none.stdout).toContain('No runs recorded');
    expect(none.stdout).toContain('for tenant clinic-9');
    expect(short.code).toBe(2);
    expect(short.stderr).toContain('CARE_STATE_SECRET is too short');
    outputs.push(short.stdout, short.stderr);
    for (const o of outputs) {
      expect(o).not.toContain(SECRET);
      expect(o).not.toContain('short-secret');
    }
    expect(readFileSync(state).toString('latin1')).not.toContain(SECRET);
  }, 60_000);
});
