/**
 * Issue 24 item 2 (local state): the run lease, through the built CLI on copies of examples/clinic against the
 * sandbox over HTTP. A second run on the same (server, tenant) exits 3 at once naming the holder, or waits with
 * --wait-for-lock; a SIGKILLed holder's lease is taken over and nothing is created twice; two tenants on one
 * state file run side by side. Needs `npm run build`.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { BIN, cleanEnv, copyTree, ROOT, runCli } from '../helpers/cli.js';
import { countBy, duplicates, identifierValue, listAll, until } from './helpers.js';

let sb: Sandbox;
beforeAll(async () => {
  sb = await startSandbox({ tenants: ['t-held', 't-stale', 't-a', 't-b'], observationsPerPatient: 0 });
});
afterAll(async () => {
  await sb.close();
});

const env = (tenant: string) => ({ CARE_BASE_URL: sb.url, CARE_API_KEY: sb.credentials.apiKey, CARE_EMR_ID: sb.credentials.emrId, CARE_TENANT_ID: tenant });
const count = (tenant: string, type = 'Patient'): number => sb.stats().resources[tenant]?.[type] ?? 0;

/** The built CLI in the background (the run that holds the lease). */
function start(args: string[], tenant: string) {
  const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: { ...cleanEnv(), ...env(tenant) }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  child.stdout!.resume();
  let exited = false;
  const done = once(child, 'close').then(([code, signal]) => {
    exited = true;
    return { code: code as number | null, signal: signal as NodeJS.Signals | null, stderr };
  });
  return { child, done, exited: () => exited };
}

async function expectEachOnce(tenant: string): Promise<void> {
  for (const type of ['Patient', 'Practitioner'] as const) expect(duplicates(countBy(await listAll(sb, tenant, type), identifierValue)), type).toEqual([]);
  const teams = await listAll(sb, tenant, 'CareTeam');
  expect(duplicates(countBy(teams, (t) => (t.subject as { reference: string }).reference)), 'CareTeam').toEqual([]);
}

describe('the run lease on the local state', () => {
  it('a second run exits 3 at once naming the holder; with --wait-for-lock 2m it waits and then completes', async () => {
    const dir = copyTree('examples/clinic');
    const mapping = join(dir, 'mapping.yaml');
    sb.setFaults({ latencyMs: 150 }); // the first run stays in its patient phase for seconds
    try {
      const first = start(['run', mapping, '--concurrency', '1', '--progress', 'none'], 't-held');
      await until(() => first.exited() || count('t-held') >= 2, 10);
      const [second, rebuild, check] = await Promise.all(
        [
          ['run', mapping],
          ['state', 'rebuild', mapping],
          ['state', 'check', mapping],
        ].map((a) => runCli([...a, '--progress', 'none'], { env: env('t-held') })),
      );
      expect(first.exited(), 'the first run was still running when the others ended').toBe(false);
      // state rebuild writes the ledger: it needs the lease; state check writes nothing: it reads beside the run.
      expect(rebuild.code, rebuild.stderr).toBe(3);
      expect(rebuild.stderr).toMatch(/another run holds this state: run 1 on host/);
      expect(check.stderr).not.toMatch(/another run holds/);
      expect(check.code, check.stderr).not.toBe(3);
      expect(second.code, second.stderr).toBe(3);
      expect(second.stderr).toMatch(
        new RegExp(
          `another run holds this state: run 1 on host ${hostname()} \\(pid ${first.child.pid}\\) since \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ, last seen \\d+ s ago`,
        ),
      );
      expect(second.stderr).toMatch(/--wait-for-lock 10m/);

      const waiting = runCli(['run', mapping, '--progress', 'none', '--wait-for-lock', '2m'], { env: env('t-held') });
      const firstDone = await first.done;
      expect(firstDone.code, firstDone.stderr).toBe(1); // the example's rows with errors
      const third = await waiting;
      expect(third.code, third.stderr).toBe(1);
      expect(third.stderr).toMatch(/waiting for the lease: run 1 on host/);
      expect(third.stdout).toMatch(/^patient\s+\d+\s+0\s/m); // created 0: the first run made them all
    } finally {
      sb.setFaults(undefined);
    }
    await expectEachOnce('t-held');
  }, 120_000);

  it('--wait-for-lock takes a duration: anything else is a usage error (exit 2)', async () => {
    const r = await runCli(['run', join(copyTree('examples/clinic'), 'mapping.yaml'), '--wait-for-lock', 'soon'], { env: env('t-held') });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/Expected `--wait-for-lock` to be a duration like 30s, 10m or 1h, got `soon`/);
  });

  it("a SIGKILLed holder's lease is taken over: the next run completes and creates nothing twice", async () => {
    const dir = copyTree('examples/clinic');
    const mapping = join(dir, 'mapping.yaml');
    sb.setFaults({ latencyMs: 100 });
    try {
      const first = start(['run', mapping, '--concurrency', '2', '--progress', 'none'], 't-stale');
      await until(() => first.exited() || count('t-stale') >= 5, 10);
      first.child.kill('SIGKILL');
      expect((await first.done).signal).toBe('SIGKILL');
    } finally {
      sb.setFaults(undefined);
    }
    const next = await runCli(['run', mapping, '--progress', 'none'], { env: env('t-stale') });
    expect(next.code, next.stderr).toBe(1);
    expect(next.stderr).toMatch(/took over a stale lease: run 1 on host/);
    await expectEachOnce('t-stale');
    const again = await runCli(['run', mapping, '--progress', 'none'], { env: env('t-stale') });
    expect(again.code, again.stderr).toBe(1);
    expect(again.stderr).not.toMatch(/stale lease/);
  }, 120_000);

  it('two tenants on one state file run at the same time, both complete', async () => {
    const dir = copyTree('examples/clinic');
    const mapping = join(dir, 'mapping.yaml');
    const state = join(dir, 'shared-state.db');
    const args = (t: string) => ['run', mapping, '--concurrency', '1', '--progress', 'none', '--state', state, '--rejects', join(dir, `${t}.rejects.ndjson`)];
    sb.setFaults({ latencyMs: 150 }); // each run lasts seconds: they overlap
    try {
      const a = start(args('t-a'), 't-a');
      await until(() => a.exited() || count('t-a') >= 2, 10);
      const b = start(args('t-b'), 't-b');
      await until(() => b.exited() || count('t-b') >= 2, 10);
      expect(a.exited(), 'both runs were loading at the same time').toBe(false);
      const [ra, rb] = await Promise.all([a.done, b.done]);
      expect(ra.code, ra.stderr).toBe(1); // the example's rows with errors
      expect(rb.code, rb.stderr).toBe(1);
    } finally {
      sb.setFaults(undefined);
    }
    expect(count('t-a')).toBeGreaterThan(0);
    expect(count('t-a')).toBe(count('t-b'));
    await expectEachOnce('t-a');
    await expectEachOnce('t-b');
  }, 120_000);
});
