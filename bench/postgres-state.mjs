// Shared PostgreSQL state (issue 24 items 1+2), in one run: (a) the load throughput of a run whose ledger is on
// PostgreSQL, as a ratio to the same run on the local SQLite file — same generated clinic, a fresh sandbox child
// (20 ms latency) per run, the built CLI as the loader; (b) the run lease's overhead on each backend: acquire +
// release, one heartbeat and one statement's round trip, in µs (median of many, in process). PostgreSQL: a
// throw-away local cluster (fsync on; the ledger's default commits with synchronous_commit off).
// Usage: npm run build && node bench/postgres-state.mjs [N] [ROUNDS]   (defaults 1000 2)
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadAvg, makePatientFixture, median, startSandboxProcess } from './_patients-fixture.mjs';
import { startPostgresCluster } from './_postgres-cluster.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));

async function cliRun(mapping, state, connection) {
  const env = {
    ...process.env,
    CARE_BASE_URL: connection.baseUrl,
    CARE_API_KEY: connection.apiKey,
    CARE_EMR_ID: connection.emrId,
    CARE_TENANT_ID: connection.tenantId,
  };
  delete env.CI;
  const child = spawn(process.execPath, ['bin/run.js', 'run', mapping, '--state', state, '--json', '--progress', 'none'], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const [code] = await once(child, 'exit');
  if (code !== 0) throw new Error(`run on ${state} exited ${code}`);
  const report = JSON.parse(out);
  return { created: report.totals.created, seconds: report.durationMs / 1000 };
}

async function loadRound(fx, state) {
  const sb = await startSandboxProcess(20);
  try {
    const r = await cliRun(fx.mapping, state, sb.connection);
    return { ...r, createsPerSec: Math.round(r.created / r.seconds) };
  } finally {
    await sb.stop();
  }
}

/** µs per lease acquire+release and per heartbeat statement, median of `n`. */
async function leaseCost(location, n) {
  const { Ledger } = await import('../dist/state/ledger.js');
  const { acquireLease } = await import('../dist/state/lease.js');
  const ledger = Ledger.open(location);
  try {
    const scopeId = ledger.scopeIdOf(ledger.scope('https://bench.example/api', 'lease'));
    const cycle = [];
    for (let i = 0; i < n; i++) {
      const t = process.hrtime.bigint();
      (await acquireLease(ledger, scopeId, { heartbeatMs: 3_600_000 })).release();
      cycle.push(Number(process.hrtime.bigint() - t) / 1000);
    }
    const held = await acquireLease(ledger, scopeId, { heartbeatMs: 3_600_000 });
    const beat = [];
    const stmt = ledger.stmt('UPDATE leases SET heartbeat_at = ? WHERE scope_id = ? AND token = ? AND released = 0');
    for (let i = 0; i < n; i++) {
      const t = process.hrtime.bigint();
      stmt.run(new Date().toISOString(), scopeId, held.token);
      beat.push(Number(process.hrtime.bigint() - t) / 1000);
    }
    held.release();
    // one statement's round trip (PostgreSQL: main thread → worker → server → back)
    const trip = [];
    const one = ledger.stmt('SELECT 1 AS one');
    for (let i = 0; i < n; i++) {
      const t = process.hrtime.bigint();
      one.get();
      trip.push(Number(process.hrtime.bigint() - t) / 1000);
    }
    return { acquireReleaseUs: Math.round(median(cycle)), heartbeatUs: Math.round(median(beat)), statementUs: Math.round(median(trip)) };
  } finally {
    ledger.close();
  }
}

async function main() {
  const N = Number(process.argv[2] ?? 1000);
  const ROUNDS = Number(process.argv[3] ?? 2);
  const loadBefore = loadAvg()[0];
  const fx = await makePatientFixture(N, 'care-etl-bench-pg-');
  const pg = await startPostgresCluster();
  const tmp = mkdtempSync(join(os.tmpdir(), 'care-etl-bench-pgstate-'));
  const rounds = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const sqlite = await loadRound(fx, join(tmp, `r${round}.db`));
      const postgres = await loadRound(fx, `${pg.url()}?schema=bench_r${round}`);
      rounds.push({ sqlite: sqlite.createsPerSec, postgres: postgres.createsPerSec, ratio: +(postgres.createsPerSec / sqlite.createsPerSec).toFixed(3) });
    }
    const lease = { sqlite: await leaseCost(join(tmp, 'lease.db'), 200), postgres: await leaseCost(`${pg.url()}?schema=bench_lease`, 200) };
    console.log(
      JSON.stringify({
        bench: 'postgres-state',
        patients: N,
        latencyMs: 20,
        rounds,
        medianRatio: median(rounds.map((r) => r.ratio)),
        lease,
        // one heartbeat every 10 s: its share of one core
        heartbeatShare: +(lease.postgres.heartbeatUs / 10_000_000).toExponential(2),
        load: [loadBefore, loadAvg()[0]],
      }),
    );
  } finally {
    fx.cleanup();
    rmSync(tmp, { recursive: true, force: true });
    await pg.stop();
  }
}

await main();
