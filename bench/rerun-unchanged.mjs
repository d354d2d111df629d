// Re-run of an unchanged export (issue 4): the first run creates N patients, each re-run must write nothing
// and take a small fraction of the first run's time (target: ≤ 5 %).
// The sandbox runs in a child process (`care-etl sandbox --latency 10`, no generated Observations, in-memory
// store); the loader runs in this process through runPipeline (dist/). After the re-runs the server is listed:
// still exactly N patients, every one at versionId 1 (no update, no create reached it).
// Usage: npm run build && node bench/rerun-unchanged.mjs [N] [RERUNS]   (env N / RERUNS / LATENCY / CONCURRENCY)
// Exits 1 when a re-run wrote anything (it throws) or the median re-run took more than 5 % of the first run.
import os from 'node:os';
import { runPipeline } from '../dist/pipeline/run-pipeline.js';
import { loadAvg, makePatientFixture, median, serverPatientVersions, startSandboxProcess } from './_patients-fixture.mjs';

const N = Number(process.argv[2] ?? process.env.N ?? 50_000);
const RERUNS = Number(process.argv[3] ?? process.env.RERUNS ?? 3);
const LATENCY = Number(process.env.LATENCY ?? 10);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 8); // the CLI's default --concurrency

const sandbox = await startSandboxProcess(LATENCY);
const { connection } = sandbox;

const loadBefore = loadAvg();
const fx = await makePatientFixture(N, 'care-etl-bench-rerun-');
try {
  const timed = async () => {
    const t0 = performance.now();
    const report = await runPipeline({ mappingFile: fx.mapping, env: {}, connection, concurrency: CONCURRENCY });
    return { ms: performance.now() - t0, report };
  };

  const first = await timed();
  const c1 = first.report.mappings.patient;
  if (c1.created !== N || c1.rejected !== 0) throw new Error(`first run: ${JSON.stringify(c1)}`);

  const reruns = [];
  for (let i = 0; i < RERUNS; i++) {
    const r = await timed();
    const c = r.report.mappings.patient;
    if (c.created || c.updated || c.adopted || c.rejected || c.unchanged !== N) throw new Error(`re-run ${i + 1} was not a no-op: ${JSON.stringify(c)}`);
    reruns.push(r.ms);
  }

  // The server's view: N patients, none written twice.
  const { count, notV1 } = await serverPatientVersions(connection);
  if (count !== N || notV1 !== 0) throw new Error(`server: ${count} patients, ${notV1} not at version 1`);
  if (median(reruns) / first.ms > 0.05) process.exitCode = 1; // the figures are printed all the same

  const rerunMs = median(reruns);
  console.log(
    JSON.stringify({
      bench: 'rerun-unchanged',
      patients: N,
      latencyMs: LATENCY,
      concurrency: CONCURRENCY,
      firstRunMs: Math.round(first.ms),
      firstRunCreatesPerSec: Math.round(N / (first.ms / 1000)),
      rerunMs: reruns.map(Math.round),
      medianRerunMs: Math.round(rerunMs),
      rerunRowsPerSec: Math.round(N / (rerunMs / 1000)),
      ratio: Math.round((rerunMs / first.ms) * 10000) / 10000,
      target: 0.05,
      pass: rerunMs / first.ms <= 0.05,
      rerunWrites: { created: 0, updated: 0 },
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
