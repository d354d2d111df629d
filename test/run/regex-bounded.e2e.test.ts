/*
 * Issue 22, item 7, end to end (built CLI against the sandbox over 127.0.0.1):
 *  - `$match(FIRST, /(a+)+$/)` on a cell of 40 × "a" then "!": the run ends, every row loads — that row too,
 *    correctly (the pattern does not match it: active = true), since the linear-time engine has no backtracking
 *    to time out. Before, the run hung (JavaScript's RegExp: 2^40 steps inside one JSONata step);
 *  - a pattern RE2 cannot run is a `validate` error at file:line:col, and `run` stops before sending anything;
 *  - a CSV source of NUL bytes: `validate` and `run` exit 2 naming the file, nothing sent.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CareClient } from '../../src/api/client.js';
import { connectionFromEnv, resolveConnection } from '../../src/api/connection.js';
import type { Resource } from '../../src/api/types.js';
import type { RunReport } from '../../src/pipeline/run-report.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { copyTree, ROOT, runCli } from '../helpers/cli.js';

const API_KEY = 'e2e-regex-bounded-key';
// A hang is killed after this long and fails the test (no timing assertion beyond that).
const KILL_AFTER_MS = 45_000;
let sb: Sandbox;
let env: Record<string, string>;

beforeAll(async () => {
  if (!existsSync(join(ROOT, 'dist/commands/run.js'))) throw new Error('dist/ is missing: run `npm run build` first');
  sb = await startSandbox({ port: 0, apiKey: API_KEY, emrId: 'emr-rx', tenants: ['t-rx', 't-rx-nul'] });
  env = { CARE_BASE_URL: sb.url, CARE_API_KEY: API_KEY, CARE_EMR_ID: 'emr-rx', CARE_TENANT_ID: 't-rx', NO_COLOR: '1' };
});
afterAll(async () => {
  await sb.close();
});

async function patientsOnServer(tenant: string): Promise<Resource[]> {
  const client = new CareClient(resolveConnection(connectionFromEnv({ ...env, CARE_TENANT_ID: tenant })), { retry: false });
  try {
    const out: Resource[] = [];
    for await (const r of client.list('Patient', { pageSize: 200 })) out.push(r);
    return out;
  } finally {
    await client.close();
  }
}

describe('every regular expression is bounded (built CLI, sandbox over HTTP)', { timeout: 120_000 }, () => {
  it('a backtracking pattern on 40 × "a" + "!" costs nothing: the run ends, all 10 rows load, that one correctly', async () => {
    const dir = copyTree('test/fixtures/regex', 'care-etl-regex-');
    const r = await runCli(['run', join(dir, 'mapping.yaml'), '--progress', 'none', '--json'], { env, timeoutMs: KILL_AFTER_MS });
    expect(r.signal, 'the run hung and was killed').toBeNull();
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as RunReport;
    expect(report.totals).toMatchObject({ read: 10, rejected: 0 });

    const patients = await patientsOnServer('t-rx');
    expect(patients).toHaveLength(10);
    const byMrn = new Map(patients.map((p) => [(p.identifier as { value: string }[])[0]!.value, p]));
    const hard = byMrn.get('000004')!;
    expect(hard.name).toEqual([{ family: 'Nakamura', given: [`${'a'.repeat(40)}!`] }]);
    expect(hard.active).toBe(true); // /(a+)+$/ does not match a name ending in "!"
    expect(byMrn.get('000001')!.active).toBe(false); // "Sofia" ends in an "a"
    expect(byMrn.get('000002')!.active).toBe(true); // "Liam"
  });

  it('a pattern RE2 cannot run: validate exits 2 at file:line:col with the fix; run and plan send nothing', async () => {
    const mapping = join(ROOT, 'test/fixtures/regex/unsupported.yaml');
    const v = await runCli(['validate', mapping], { timeoutMs: KILL_AFTER_MS });
    expect(v.code, v.stdout).toBe(2);
    expect(v.stderr).toMatch(
      /test\/fixtures\/regex\/unsupported\.yaml:14:\d+: error \[regex-unsupported\] at \/resources\/0\/map: mapping `patient` map: the regular expression \/\(\?<!\^\)a\/ uses a lookbehind/,
    );
    expect(v.stderr).toMatch(
      /unsupported\.yaml:\d+:\d+: error \[regex-unsupported\] at \/resources\/0\/key: mapping `patient` key: the regular expression \/\(0\)\\1\(\\d\+\)\/ uses a backreference/,
    );

    const before = sb.stats().requests;
    const run = await runCli(['run', join(copyTree('test/fixtures/regex', 'care-etl-regex-'), 'unsupported.yaml'), '--progress', 'none'], {
      env,
      timeoutMs: KILL_AFTER_MS,
    });
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toContain('[regex-unsupported]');
    const plan = await runCli(['plan', join(ROOT, 'test/fixtures/regex/unsupported.yaml'), '--progress', 'none'], { env, timeoutMs: KILL_AFTER_MS });
    expect(plan.code, plan.stderr).toBe(2);
    expect(plan.stderr).toContain('[regex-unsupported]');
    expect(sb.stats().requests - before).toBe(0);
  });

  it('a CSV source of NUL bytes: validate and run exit 2 naming the file, nothing sent', async () => {
    const dir = copyTree('test/fixtures/regex', 'care-etl-regex-nul-');
    const file = join(dir, 'data', 'patients.csv');
    writeFileSync(file, Buffer.alloc(8192));
    const v = await runCli(['validate', join(dir, 'mapping.yaml')], { timeoutMs: KILL_AFTER_MS });
    expect(v.code, v.stdout).toBe(2);
    expect(v.stderr).toContain(
      `error [source-not-text] at /sources/patients/path: source \`patients\`: ${file}: not a text file: all its 8192 bytes are NUL bytes`,
    );

    const before = sb.stats().requests;
    const run = await runCli(['run', join(dir, 'mapping.yaml'), '--progress', 'none', '--json'], {
      env: { ...env, CARE_TENANT_ID: 't-rx-nul' },
      timeoutMs: KILL_AFTER_MS,
    });
    expect(run.code, run.stderr).toBe(2);
    expect(run.stdout).toContain('source-not-text');
    expect(run.stdout).toContain(file);
    expect(sb.stats().requests - before).toBe(0);
    expect(await patientsOnServer('t-rx-nul')).toHaveLength(0);
  });
});
