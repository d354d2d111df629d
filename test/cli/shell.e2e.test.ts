/**
 * The CLI shell (src/cli/base-command.ts) on its error paths, through the built CLI: the API key — from a
 * flag, the environment or the mapping's `target:` — never appears in any output or file; every exit code of
 * the README's table comes from a real scenario (the sandbox, a hostile server, a dead port); a failed run
 * leaves the previous rejects file byte-identical; files holding patient rows are 0600 whatever they were.
 */
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { Ledger } from '../../src/state/ledger.js';
import { acquireLease } from '../../src/state/lease.js';
import { BIN, type CliResult, copyTree, ROOT, runCliInProcess, workerEnv } from '../helpers/cli.js';
import { deadPort, startEchoServer, type HostileServer } from '../helpers/hostile-server.js';

const KEY = 'sk-live-LEAKCANARY-5f2c9e1d';
const EMR = 'emr-shell';
let sb: Sandbox;
let echo500: HostileServer;
let echo400: HostileServer;
let dead: number;

beforeAll(async () => {
  sb = await startSandbox({ apiKey: KEY, emrId: EMR, tenants: ['t-shell', 't-keep', 't-modes', 't-int'] });
  echo500 = await startEchoServer({ status: 500, failReads: true });
  echo400 = await startEchoServer({ status: 400 });
  dead = await deadPort();
});
afterAll(async () => {
  await Promise.all([sb.close(), echo500.close(), echo400.close()]);
});

const target = (baseUrl: string, tenant = 't-shell') => ({ CARE_BASE_URL: baseUrl, CARE_EMR_ID: EMR, CARE_TENANT_ID: tenant });
const flags = (baseUrl: string, tenant = 't-shell') => ['--base-url', baseUrl, '--emr-id', EMR, '--tenant-id', tenant];

/** Every file under `dir` (state.db, rejects, reports…), read as bytes. */
function filesUnder(dir: string): { path: string; text: string }[] {
  const out: { path: string; text: string }[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile()) continue;
    const path = join(e.parentPath, e.name);
    out.push({ path, text: readFileSync(path).toString('latin1') });
  }
  return out;
}

/** The clinic example with the key written in its `target:` (the way the README warns against). */
function mappingWithKeyInFile(baseUrl: string): string {
  const dir = copyTree('examples/clinic');
  const file = join(dir, 'mapping.yaml');
  const text = readFileSync(file, 'utf8').replace(
    /^version: 1$/m,
    `version: 1\ntarget:\n  baseUrl: ${baseUrl}\n  apiKey: ${KEY}\n  emrId: ${EMR}\n  tenantId: t-shell`,
  );
  writeFileSync(file, text);
  return file;
}

interface Scenario {
  name: string;
  /** Builds the command line in a fresh copy of the clinic example. */
  setup(dir: string): { args: string[]; env?: Record<string, string> } | Promise<{ args: string[]; env?: Record<string, string> }>;
  code: number;
}

const m = (dir: string) => join(dir, 'mapping.yaml');
const SCENARIOS: Scenario[] = [
  { name: 'unknown flag --json (key from flag)', setup: (d) => ({ args: ['run', m(d), '--api-key', KEY, '--bogus', '--json'] }), code: 2 },
  { name: 'unknown flag, text (key from flag)', setup: (d) => ({ args: ['run', m(d), `--api-key=${KEY}`, '--bogus'] }), code: 2 },
  { name: 'missing argument --json', setup: () => ({ args: ['run', '--api-key', KEY, '--json'] }), code: 2 },
  { name: 'bad flag value', setup: (d) => ({ args: ['run', m(d), '--api-key', KEY, '--concurrency', 'many', '--json'] }), code: 2 },
  { name: 'flag a command does not have (its value would be an argument)', setup: (d) => ({ args: ['validate', m(d), '--api-key', KEY] }), code: 2 },
  { name: 'export: unknown flag', setup: (d) => ({ args: ['export', m(d), '--api-key', KEY, '--nope', '--json'] }), code: 2 },
  {
    name: 'init: unreadable export (key in env)',
    setup: (d) => ({ args: ['init', '--from', join(d, 'missing.csv'), '--out', join(d, 'm2.yaml'), '--json'], env: { CARE_API_KEY: KEY } }),
    code: 2,
  },
  {
    name: 'unreachable server --json (key from flag)',
    setup: (d) => ({ args: ['run', m(d), '--api-key', KEY, ...flags(`http://127.0.0.1:${dead}`), '--json'] }),
    code: 3,
  },
  {
    name: 'unreachable server (key from env)',
    setup: (d) => ({ args: ['run', m(d), '--verbose'], env: { ...target(`http://127.0.0.1:${dead}`), CARE_API_KEY: KEY } }),
    code: 3,
  },
  {
    name: 'state check, unreachable (key from env)',
    setup: (d) => ({ args: ['state', 'check', m(d), '--json'], env: { ...target(`http://127.0.0.1:${dead}`), CARE_API_KEY: KEY } }),
    code: 3,
  },
  {
    name: 'export, unreachable (key from env)',
    setup: (d) => ({ args: ['export', m(d), '--out', join(d, 'o.csv')], env: { ...target(`http://127.0.0.1:${dead}`), CARE_API_KEY: KEY } }),
    code: 3,
  },
  {
    name: 'wrong base path: 404 (key from env)',
    setup: (d) => ({ args: ['run', m(d), '--json'], env: { ...target(`${sb.url}/api/v9`), CARE_API_KEY: KEY } }),
    code: 3,
  },
  { name: '401 with a key the server does not know', setup: (d) => ({ args: ['run', m(d), '--api-key', `${KEY}-old`, ...flags(sb.url)] }), code: 2 },
  {
    name: '500 echoing the request, --json (key from flag)',
    setup: (d) => ({ args: ['run', m(d), '--api-key', KEY, ...flags(echo500.url), '--json'] }),
    code: 3,
  },
  {
    name: '500 echoing the request, --verbose (key from env)',
    setup: (d) => ({ args: ['run', m(d), '--verbose'], env: { ...target(echo500.url), CARE_API_KEY: KEY } }),
    code: 3,
  },
  {
    name: '400 echoing each create: rows rejected, rejects and state written',
    setup: (d) => ({ args: ['run', m(d), '--report', join(d, 'report.json')], env: { ...target(echo400.url), CARE_API_KEY: KEY } }),
    code: 1,
  },
  {
    name: 'export against a 500 echo server (key from flag)',
    setup: (d) => ({ args: ['export', m(d), '--api-key', KEY, ...flags(echo500.url), '--out', join(d, 'o.csv'), '--json'] }),
    code: 3,
  },
  {
    name: 'bad TLS: https to a plain-http port',
    setup: (d) => ({ args: ['run', m(d), '--json'], env: { ...target(`https://127.0.0.1:${echo400.port}`), CARE_API_KEY: KEY } }),
    code: 3,
  },
  {
    name: 'lease held by another run (key from env)',
    setup: (d) => {
      const state = join(d, 'held.db');
      holdLease(state, 't-shell');
      return { args: ['run', m(d), '--state', state, '--json'], env: { ...target(sb.url), CARE_API_KEY: KEY } };
    },
    code: 3,
  },
  {
    name: 'broken mapping with the key written in its target:',
    setup: (_d) => {
      const file = mappingWithKeyInFile(sb.url);
      writeFileSync(file, readFileSync(file, 'utf8').replace('"active": true,', '"active": true ],'));
      return { args: ['run', file, '--json'] };
    },
    code: 2,
  },
  {
    name: 'YAML syntax error next to the key written in the file',
    setup: () => {
      const file = mappingWithKeyInFile(sb.url);
      writeFileSync(file, readFileSync(file, 'utf8').replace(`  apiKey: ${KEY}`, `  apiKey: ${KEY}\n   emrId: [oops`));
      return { args: ['run', file] };
    },
    code: 2,
  },
  {
    name: 'key from the mapping file, server unreachable',
    setup: () => ({ args: ['run', mappingWithKeyInFile(`http://127.0.0.1:${dead}`), '--verbose'] }),
    code: 3,
  },
  { name: 'key from the mapping file, 400 echo', setup: () => ({ args: ['run', mappingWithKeyInFile(echo400.url)] }), code: 1 },
  { name: 'unknown command --json', setup: () => ({ args: ['runn', '--api-key', KEY, '--json'] }), code: 2 },
];
const held: Ledger[] = [];
afterAll(() => held.forEach((l) => l.close()));
/** Another run's lease on (sandbox, tenant) of `state`: taken before this returns (the first try is synchronous). */
function holdLease(state: string, tenant: string): Ledger {
  const ledger = Ledger.open(state);
  held.push(ledger);
  void acquireLease(ledger, ledger.scopeIdOf(ledger.scope(sb.url, tenant)));
  return ledger;
}

describe('the API key never leaves the process', () => {
  it(`holds for ${SCENARIOS.length} error paths: stdout, stderr and every file written`, async () => {
    expect(SCENARIOS.length).toBeGreaterThanOrEqual(20);
    const results = new Map<Scenario, { dir: string; args: string[]; res: CliResult }>();
    // A pool of 8, not batches of 6: the unreachable-server and lock paths wait idle for seconds (retry back-off,
    // busy timeout); a batch waited for its slowest, a pool lets the quick ones run meanwhile.
    const queue = [...SCENARIOS];
    const worker = async () => {
      for (let s = queue.shift(); s; s = queue.shift()) {
        const dir = copyTree('examples/clinic');
        const { args, env } = await s.setup(dir);
        results.set(s, { dir, args, res: await runCliInProcess(args, { env, cwd: dir }) });
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    for (const s of SCENARIOS) {
      const { dir, args, res } = results.get(s)!;
      const context = `${s.name}\n--- stdout\n${res.stdout.slice(0, 2000)}\n--- stderr\n${res.stderr.slice(0, 2000)}`;
      expect(res.code, context).toBe(s.code);
      expect(res.stdout + res.stderr, context).not.toContain(KEY.slice(8)); // nor a prefix-stripped part of it
      for (const f of filesUnder(dir)) {
        if (f.path.endsWith('mapping.yaml')) continue; // the user's own file
        expect(f.text.includes(KEY), `${s.name}: ${f.path}`).toBe(false);
      }
      if (args.includes('--json')) {
        // One small JSON object: the envelope, never oclif's internals.
        const body = JSON.parse(res.stdout) as { error?: { name: string; message: string }; exitCode: number };
        expect(body.exitCode, context).toBe(s.code);
        if (s.code >= 2) expect(body.error?.message, context).toBeTruthy();
        expect(res.stdout.length, context).toBeLessThan(4096);
      }
    }
  }, 240_000);

  it('a 400 echoing the request: the key and the patient values it echoes reach no output, no reason and no ledger row', async () => {
    const dir = copyTree('examples/clinic');
    const res = await runCliInProcess(['run', m(dir), '--json'], { env: { ...target(echo400.url), CARE_API_KEY: KEY }, cwd: dir });
    expect(res.code).toBe(1);
    const rejects = readFileSync(join(dir, '.care-etl', 'rejects.ndjson'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { stage: string; row?: Record<string, string>; issues: { message: string }[] });
    const loadRejects = rejects.filter((r) => r.stage === 'load');
    expect(loadRejects.length).toBeGreaterThan(20);
    const reasons = JSON.stringify(rejects.map((r) => r.issues));
    expect(reasons).toContain('service-subscriptionkey'); // the echo is really there (the test is not vacuous)…
    expect(reasons).toContain('[redacted]'); // …with the key replaced
    // Patient values the server echoed back: names, birth dates, addresses (the row itself stays, 0600, for re-processing).
    const patients = readFileSync(join(dir, 'data', 'patients.csv'), 'utf8')
      .trim()
      .split('\n')
      .slice(1)
      .map((l) => l.split(','));
    // The ledger's bytes, WAL and journal included (a value could sit in state.db-wal until a checkpoint).
    const ledger = readdirSync(join(dir, '.care-etl'))
      .filter((f) => f.startsWith('state.db'))
      .map((f) => readFileSync(join(dir, '.care-etl', f)).toString('latin1'))
      .join('\n');
    for (const [, first, last, , , , email, address] of patients) {
      for (const value of [first, last, email, address]) {
        if (!value || value.length < 3) continue;
        expect(reasons, value).not.toContain(value);
        expect(res.stdout + res.stderr, value).not.toContain(value);
        expect(ledger.includes(value), `state.db holds ${value}`).toBe(false);
      }
    }
  });
});

describe('exit codes (README table)', () => {
  it('0: every row loaded — --verbose logs each request without secrets, --quiet prints nothing', async () => {
    const dir = copyTree('test/fixtures/run/clean');
    const env = { ...target(sb.url, 't-shell'), CARE_API_KEY: KEY };
    const res = await runCliInProcess(['run', m(dir), '--verbose'], { env });
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \[http\] GET \/Patient\?_count=1 → 200 \d+ ms$/m); // in a log: stamped
    expect(res.stderr).not.toContain(KEY);
    const quiet = await runCliInProcess(['run', m(dir), '--quiet'], { env });
    expect(quiet.code).toBe(0);
    expect(quiet.stdout + quiet.stderr).toBe('');
  });

  it('3: a server that dies mid-run ends the run cleanly (no unhandled rejection), the run recorded as failed', async () => {
    const dying = await startEchoServer({ status: 503, readsBeforeFailing: 1 }); // the preflight passes, the listing fails
    try {
      const dir = copyTree('examples/clinic');
      const res = await runCliInProcess(['run', m(dir), '--json'], { env: { ...target(dying.url), CARE_API_KEY: KEY } });
      expect(res.code, res.stderr).toBe(3);
      const body = JSON.parse(res.stdout) as { error: { name: string; message: string; hint: string }; exitCode: number };
      expect(body.error.message).toMatch(/HTTP 503/);
      expect(body.error.hint).toMatch(/run again later/);
      expect(res.stderr).not.toMatch(/Unhandled|at async|node:internal/);
      const ledger = Ledger.open(join(dir, '.care-etl', 'state.db'));
      try {
        expect(
          ledger
            .scope(dying.url, 't-shell')
            .recentRuns()
            .map((r) => r.outcome),
        ).toEqual(['failed']);
      } finally {
        ledger.close();
      }
    } finally {
      await dying.close();
    }
  }, 60_000);

  it('1: some rows rejected, the rest loaded — and --max-errors N stops after exactly N', async () => {
    const dir = copyTree('examples/clinic');
    const all = await runCliInProcess(['run', m(dir), '--dry-run', '--json']);
    expect(all.code).toBe(1);
    expect((JSON.parse(all.stdout) as { totals: { rejected: number } }).totals.rejected).toBe(9);
    const capped = await runCliInProcess(['run', m(dir), '--dry-run', '--json', '--max-errors', '2']);
    expect(capped.code).toBe(1);
    expect((JSON.parse(capped.stdout) as { totals: { rejected: number } }).totals.rejected).toBe(2);
    const zero = await runCliInProcess(['run', m(dir), '--dry-run', '--max-errors', '0']);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toMatch(/--max-errors/);
  });

  it('3: interrupted (SIGINT) — bookkeeping done, the next run creates nothing twice', async () => {
    const slow = await startSandbox({ apiKey: KEY, emrId: EMR, tenants: ['t-int'], faults: { latencyMs: 40 } });
    try {
      const dir = copyTree('examples/clinic');
      const env = { ...workerEnv(), ...target(slow.url, 't-int'), CARE_API_KEY: KEY };
      const child = spawn(process.execPath, [BIN, 'run', m(dir), '--concurrency', '1', '--json'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      const code = new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
      // Interrupt once some patients are on the server.
      while ((slow.stats().resources['t-int']?.Patient ?? 0) < 3) await new Promise((r) => setTimeout(r, 20));
      child.kill('SIGINT');
      expect(await code).toBe(3);
      const report = JSON.parse(stdout) as { interrupted: boolean; mappings: { patient: { created: number } }; exitCode: number; rejectsFile: string };
      expect(report).toMatchObject({ interrupted: true, exitCode: 3 });
      expect(report.mappings.patient.created).toBeGreaterThan(0);
      expect(report.mappings.patient.created).toBeLessThan(30);
      expect(existsSync(report.rejectsFile)).toBe(true); // written at the end, not lost

      const again = await runCliInProcess(['run', m(dir), '--json'], { env: { ...target(slow.url, 't-int'), CARE_API_KEY: KEY } });
      const second = JSON.parse(again.stdout) as { mappings: { patient: { created: number; adopted: number } } };
      // A create cut off by the cancel may still have been stored: the next run adopts it instead of creating it.
      expect(report.mappings.patient.created + second.mappings.patient.created + second.mappings.patient.adopted).toBe(30);
      expect(slow.stats().resources['t-int']?.Patient).toBe(30);
    } finally {
      await slow.close();
    }
  }, 60_000);
});

describe('a failed run destroys nothing', () => {
  it('a second run failing on credentials, the lock or an unreachable server — and a dry run — leave the rejects file byte-identical', async () => {
    const dir = copyTree('examples/clinic');
    const env = { ...target(sb.url, 't-keep'), CARE_API_KEY: KEY };
    const first = await runCliInProcess(['run', m(dir)], { env });
    expect(first.code).toBe(1);
    const rejectsFile = join(dir, '.care-etl', 'rejects.ndjson');
    const good = readFileSync(rejectsFile);
    expect(good.toString().trim().split('\n')).toHaveLength(9);

    const failures: [string, Promise<CliResult>, number][] = [];
    failures.push(['credentials', runCliInProcess(['run', m(dir)], { env: { ...env, CARE_API_KEY: 'not-the-key' } }), 2]);
    failures.push(['unreachable', runCliInProcess(['run', m(dir)], { env: { ...env, CARE_BASE_URL: `http://127.0.0.1:${dead}` } }), 3]);
    for (const [what, p, code] of failures) {
      const r = await p;
      expect(r.code, `${what}: ${r.stderr}`).toBe(code);
      expect(readFileSync(rejectsFile).equals(good), what).toBe(true);
    }
    const lock = holdLease(join(dir, '.care-etl', 'state.db'), 't-keep');
    try {
      const r = await runCliInProcess(['run', m(dir)], { env });
      expect(r.code, r.stderr).toBe(3);
      expect(r.stderr).toMatch(/another run holds this state/);
      expect(readFileSync(rejectsFile).equals(good), 'lock').toBe(true);
    } finally {
      lock.close();
    }
    const dry = await runCliInProcess(['run', m(dir), '--dry-run']);
    expect(dry.code).toBe(1);
    expect(readFileSync(rejectsFile).equals(good), 'dry run').toBe(true);
    expect(existsSync(join(dir, '.care-etl', 'dry-run', 'rejects.ndjson'))).toBe(true);
    // No temporary file left behind by any of them.
    expect(readdirSync(join(dir, '.care-etl')).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  }, 60_000);

  it('rejects and report files that existed with mode 0644 are 0600 after a run', async () => {
    const dir = copyTree('examples/clinic');
    const rejectsFile = join(dir, 'rejects.ndjson');
    const reportFile = join(dir, 'report.json');
    for (const f of [rejectsFile, reportFile]) {
      writeFileSync(f, 'old\n');
      chmodSync(f, 0o644);
    }
    const r = await runCliInProcess(['run', m(dir), '--rejects', rejectsFile, '--report', reportFile], {
      env: { ...target(sb.url, 't-modes'), CARE_API_KEY: KEY },
    });
    expect(r.code).toBe(1);
    for (const f of [rejectsFile, reportFile]) {
      expect(statSync(f).mode & 0o777, f).toBe(0o600);
      expect(readFileSync(f, 'utf8')).not.toBe('old\n');
    }
  });
});
