// A lost state (issue 10): the first run creates N patients; then `.care-etl/` is deleted (a fresh CI runner)
// and the same export is run again — it must write nothing (every patient found on the server by its
// identifier and adopted), at a small fraction of the first run's cost. Measured twice: with the server's own
// page size (no `_count`, the sandbox's default 50) and with the largest page the sandbox accepts (1000).
// The sandbox runs in a child process (`care-etl sandbox --latency 10`, in-memory); the loader in this process.
// Usage: npm run build && node bench/rerun-lost-state.mjs [N]   (env N / LATENCY / CONCURRENCY)
// Exits 1 when a re-run wrote anything (it throws) or its wall time exceeded 0.25 of the first run's.
import { rmSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { runPipeline } from '../dist/pipeline/run-pipeline.js';
import { loadAvg, makePatientFixture, serverPatientVersions, startSandboxProcess } from './_patients-fixture.mjs';

const N = Number(process.argv[2] ?? process.env.N ?? 50_000);
const LATENCY = Number(process.env.LATENCY ?? 10);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 8);
const TARGET = 0.25;

const sandbox = await startSandboxProcess(LATENCY);
const { connection } = sandbox;

const loadBefore = loadAvg();
const fx = await makePatientFixture(N, 'care-etl-bench-lost-');
const stateDir = join(dirname(fx.mapping), '.care-etl');
try {
  const timed = async (indexPageSize) => {
    const t0 = performance.now();
    const report = await runPipeline({ mappingFile: fx.mapping, env: {}, connection, concurrency: CONCURRENCY, indexPageSize });
    return { ms: performance.now() - t0, report };
  };
  const first = await timed();
  const c1 = first.report.mappings.patient;
  if (c1.created !== N || c1.rejected !== 0) throw new Error(`first run: ${JSON.stringify(c1)}`);
  // Requests of the first run: the preflight, one listing of the (empty) type, N creates.
  const firstRequests = 1 + first.report.indexes.reduce((n, b) => n + b.pages, 0) + N;

  const reruns = [];
  for (const [label, pageSize] of [
    ["server's default (no _count)", 0],
    ['_count=1000 (the largest the sandbox accepts)', 1000],
  ]) {
    rmSync(stateDir, { recursive: true, force: true });
    const r = await timed(pageSize);
    const c = r.report.mappings.patient;
    if (c.created || c.updated || c.rejected || c.unchanged !== N || c.adopted !== N)
      throw new Error(`re-run without state wrote something: ${JSON.stringify(c)}`);
    const pages = r.report.indexes.reduce((n, b) => n + b.pages, 0);
    reruns.push({
      pageSize: label,
      ms: Math.round(r.ms),
      pages,
      requests: 1 + pages,
      wallRatio: Math.round((r.ms / first.ms) * 10000) / 10000,
      requestRatio: Math.round(((1 + pages) / firstRequests) * 10000) / 10000,
    });
  }

  // The server's view: N patients, none written twice.
  const { count, notV1 } = await serverPatientVersions(connection);
  if (count !== N || notV1 !== 0) throw new Error(`server: ${count} patients, ${notV1} not at version 1`);
  const pass = reruns.every((r) => r.wallRatio <= TARGET);
  if (!pass) process.exitCode = 1;
  console.log(
    JSON.stringify({
      bench: 'rerun-lost-state',
      patients: N,
      latencyMs: LATENCY,
      concurrency: CONCURRENCY,
      firstRunMs: Math.round(first.ms),
      firstRunRequests: firstRequests,
      reruns,
      rerunWrites: { created: 0, updated: 0 },
      target: TARGET,
      pass,
      serverPatients: count,
      serverNotVersion1: notV1,
      loadAvg1m: [loadBefore[0], loadAvg()[0]],
      node: process.version,
      cpus: os.cpus().length,
    }),
  );
} finally {
  fx.cleanup();
  await sandbox.stop();
}
