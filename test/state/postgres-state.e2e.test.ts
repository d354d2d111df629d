/**
 * Issue 24 items 1+2 on a shared PostgreSQL state: the built CLI on copies of examples/clinic in separate folders,
 * against the sandbox over HTTP (20 ms latency), with one `--state postgres://…` (a password-protected role: the
 * password must never be printed). Two runs at once: one loads, the other exits 3 naming the holder, or waits with
 * --wait-for-lock and then writes nothing; a kill -9'd holder frees the lease at once (its connection closed).
 * Needs `npm run build` and PostgreSQL server binaries (test/helpers/postgres.ts).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { BIN, cleanEnv, copyTree, ROOT, runCli, type CliResult } from '../helpers/cli.js';
import type { RunReport } from '../../src/pipeline/run-report.js';
import { PG_PASSWORD, startPostgres, type PgCluster } from '../helpers/postgres.js';
import { countBy, duplicates, identifierValue, listAll, until } from '../sync/helpers.js';

let sb: Sandbox;
let pg: PgCluster;
beforeAll(async () => {
  [sb, pg] = await Promise.all([startSandbox({ tenants: ['t-race', 't-wait', 't-kill', 't-digest', 't-window'], observationsPerPatient: 1 }), startPostgres()]);
  sb.setFaults({ latencyMs: 20 });
});
afterAll(async () => {
  await Promise.all([sb?.close(), pg?.stop()]);
});

// A shared state keys its match digests with CARE_STATE_SECRET (src/load/match-digest.ts): required on PostgreSQL.
const STATE_SECRET = 'e2e-state-secret-0123456789abcdef';
const env = (tenant: string) => ({
  CARE_BASE_URL: sb.url,
  CARE_API_KEY: sb.credentials.apiKey,
  CARE_EMR_ID: sb.credentials.emrId,
  CARE_TENANT_ID: tenant,
  CARE_STATE_SECRET: STATE_SECRET,
});
const count = (tenant: string, type = 'Patient'): number => sb.stats().resources[tenant]?.[type] ?? 0;

/** A fresh database, as the URL of the password-protected role (password in the URL: the redaction is tested). */
async function sharedState(): Promise<string> {
  const db = new URL(await pg.createDatabase()).pathname.slice(1);
  return pg.passwordUrl(db);
}

/** The built CLI in the background. */
function start(args: string[], tenant: string, extraEnv: Record<string, string> = {}) {
  const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: { ...cleanEnv(), ...env(tenant), ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  let exited = false;
  const done = once(child, 'close').then(([code, signal]): CliResult => {
    exited = true;
    return { code: code as number | null, signal: signal as NodeJS.Signals | null, stdout, stderr };
  });
  return { child, done, exited: () => exited };
}

/**
 * A run of a fresh copy of the clinic (its own folder, so nothing local is shared) on the shared state, named by
 * `--state`, by CARE_STATE_URL, or by the mapping's `state:` key (`${STATE}`: the password stays out of the file).
 */
function clinicRun(state: string, tenant: string, extra: string[] = [], via: 'flag' | 'env' | 'mapping' = 'flag') {
  const mapping = join(copyTree('examples/clinic'), 'mapping.yaml');
  if (via === 'mapping') writeFileSync(mapping, readFileSync(mapping, 'utf8').replace(/^version: 1$/m, 'version: 1\nstate: ${STATE}'));
  const args = ['run', mapping, ...(via === 'flag' ? ['--state', state] : []), '--concurrency', '1', '--progress', 'none', ...extra];
  return start(args, tenant, via === 'env' ? { CARE_STATE_URL: state } : via === 'mapping' ? { STATE: state } : {});
}

async function expectEachOnce(tenant: string): Promise<void> {
  for (const type of ['Patient', 'Practitioner'] as const) expect(duplicates(countBy(await listAll(sb, tenant, type), identifierValue)), type).toEqual([]);
  const teams = await listAll(sb, tenant, 'CareTeam');
  expect(duplicates(countBy(teams, (t) => (t.subject as { reference: string }).reference)), 'CareTeam').toEqual([]);
}

function expectNoPassword(...results: CliResult[]): void {
  for (const r of results) expect(r.stdout + r.stderr).not.toContain(PG_PASSWORD);
}

describe('a shared PostgreSQL state', () => {
  it('remembers the window a runner settled at: the next run of the target, from another folder, starts there (issue 28)', async () => {
    const state = await sharedState();
    const discovered = (folder: string) =>
      runCli(['run', join(copyTree('examples/clinic', `care-etl-${folder}-`), 'mapping.yaml'), '--state', state, '--json', '--progress', 'none'], {
        env: env('t-window'),
      });
    const r1 = await discovered('window-a');
    const r2 = await discovered('window-b');
    expectNoPassword(r1, r2);
    const [one, two] = [r1, r2].map((r) => JSON.parse(r.stdout) as RunReport);
    expect(one.concurrency).toMatchObject({ mode: 'discovered', started: 4 });
    expect(two.concurrency).toMatchObject({ mode: 'discovered', started: one.concurrency!.settled, rememberedFrom: one.runId });
  }, 60_000);

  it('two runs at once from two folders: one loads, the other exits 3 naming the holder; a later run writes nothing', async () => {
    const state = await sharedState();
    const [a, b] = await Promise.all([clinicRun(state, 't-race').done, clinicRun(state, 't-race').done]);
    expectNoPassword(a, b);
    const [loaded, refused] = a.code === 3 ? [b, a] : [a, b];
    expect(loaded.code, loaded.stderr).toBe(1); // the example's rows with errors
    expect(refused.code, refused.stderr).toBe(3);
    expect(refused.stderr).toMatch(
      /another run holds this state: (run \d+|a run \(starting\)) (on host .* since|of another process, its lock taken at) \d{4}-\d\d-\d\dT[\d:]+Z/,
    );
    await expectEachOnce('t-race');

    const later = await clinicRun(state, 't-race').done;
    expectNoPassword(later);
    expect(later.code, later.stderr).toBe(1);
    expect(later.stdout).toMatch(/^patient\s+\d+\s+0\s/m); // created 0
    await expectEachOnce('t-race');

    const runs = await runCli(['runs', '--state', state, '--json']);
    expectNoPassword(runs);
    expect(runs.code, runs.stderr).toBe(0);
    expect(runs.stdout).toContain('care_pw@127.0.0.1'); // the state as shown: the URL without its password
    expect((JSON.parse(runs.stdout) as { runs: unknown[] }).runs).toHaveLength(2); // the refused run recorded nothing

    // plan and state check read the shared state from any folder: nothing left to create.
    const elsewhere = join(copyTree('examples/clinic'), 'mapping.yaml');
    const [plan, check] = await Promise.all(
      [
        ['plan', elsewhere, '--json'],
        ['state', 'check', elsewhere],
      ].map((a) => runCli([...a, '--state', state, '--progress', 'none'], { env: env('t-race') })),
    );
    expectNoPassword(plan, check);
    expect(plan.stdout).toMatch(/"changes": false/);
    expect(check.code, check.stderr).not.toBe(3);

    // export --since last: the watermark and delivered ids are shared, so a second runner's export has nothing new.
    const exportLast = (folder: string) =>
      runCli(['export', join(folder, 'mapping.yaml'), '--since', 'last', '--out', join(folder, 'obs.csv'), '--state', state, '--json'], { env: env('t-race') });
    const first = await exportLast(copyTree('examples/clinic'));
    const second = await exportLast(copyTree('examples/clinic'));
    expectNoPassword(first, second);
    // --json: an error is on stdout
    expect(first.code, first.stderr + first.stdout).toBe(0);
    expect(second.code, second.stderr + second.stdout).toBe(0);
    expect(first.stdout).toMatch(/"rows":\s*[1-9]/);
    expect(second.stdout).toMatch(/"rows":\s*0/);
  }, 120_000);

  it('with --wait-for-lock the second run waits for the first, then writes nothing', async () => {
    const state = await sharedState();
    sb.setFaults({ latencyMs: 100 }); // the first run lasts long enough for the second to start and wait
    let r1: CliResult, r2: CliResult;
    try {
      const first = clinicRun(state, 't-wait', [], 'mapping');
      await until(() => first.exited() || count('t-wait') >= 2, 20);
      const second = clinicRun(state, 't-wait', ['--wait-for-lock', '2m'], 'env');
      [r1, r2] = await Promise.all([first.done, second.done]);
    } finally {
      sb.setFaults({ latencyMs: 20 });
    }
    expectNoPassword(r1, r2);
    expect(r1.code, r1.stderr).toBe(1);
    expect(r2.code, r2.stderr).toBe(1);
    expect(r2.stderr).toMatch(/waiting for the lease: run \d+ on host/);
    expect(r2.stdout).toMatch(/^patient\s+\d+\s+0\s/m); // created 0: the first run made them all
    await expectEachOnce('t-wait');
  }, 120_000);

  it('a kill -9 of the holder mid-run: the next run takes the lease at once and completes, everything exactly once', async () => {
    const state = await sharedState();
    const first = clinicRun(state, 't-kill');
    await until(() => first.exited() || count('t-kill') >= 5, 20);
    first.child.kill('SIGKILL');
    expect((await first.done).signal).toBe('SIGKILL');
    const next = await clinicRun(state, 't-kill').done;
    expectNoPassword(next);
    expect(next.code, next.stderr).toBe(1);
    expect(next.stderr).toMatch(/took over (a|the) stale lease/);
    expect(next.stderr).not.toMatch(/waiting for the lease/);
    await expectEachOnce('t-kill');
  }, 120_000);

  it('a name|birthDate match rule: no family name or birth date readable in any table (keyed digests only)', async () => {
    const db = new URL(await pg.createDatabase()).pathname.slice(1);
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-pg-hmac-'));
    copyFileSync(join(ROOT, 'test/fixtures/hmac/name-birthdate-mapping.yaml'), join(dir, 'mapping.yaml'));
    const people = [
      ['M001', 'Dulcinea', 'Quixotely', '1980-01-02'],
      ['M002', 'Sancho', 'Panzabrook', '1975-11-23'],
    ];
    writeFileSync(join(dir, 'patients.csv'), `MRN,FIRST,LAST,DOB\n${people.map((p) => p.join(',')).join('\n')}\n`);
    const r = await start(['run', join(dir, 'mapping.yaml'), '--state', pg.passwordUrl(db), '--progress', 'none'], 't-digest').done;
    expect(r.code, r.stderr).toBe(0);
    expectNoPassword(r);
    // Every row of every table of care-etl's schema, as text (read with the superuser, outside care-etl).
    const tables = await pg.query(db, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'care_etl'");
    expect(tables.rows.length).toBeGreaterThan(3);
    let all = '';
    for (const { table_name } of tables.rows as { table_name: string }[])
      all += JSON.stringify((await pg.query(db, `SELECT * FROM care_etl."${table_name}"`)).rows);
    for (const [mrn, , family, birthDate] of people) {
      expect(all).toContain(mrn); // keys stay readable: state check, rejects and reports name them
      expect(all).not.toContain(family);
      expect(all).not.toContain(birthDate);
    }
    expect(all).not.toContain(STATE_SECRET);
  });
});
