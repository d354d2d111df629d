// Capacity discovery on a busy machine (issue 28 item 2): scenario (a) of bench/capacity-discovery.mjs — a sandbox
// child with 50 ms latency serving 24 requests at once (bound 24 / 50 ms = 480 req/s), default flags (the window
// discovered from 4 up to 32) — once on the machine as it is and once with `--burners K` CPU burners (child processes
// spinning) running for the whole load. Target: ≥ 0.85 of the bound with the burners.
// `--baseline-dist DIR` (e.g. the main checkout's dist/) loads the same two cases through that build as well, in the
// same run, for the ratio of this build to it. Each load reports the event-loop delay its process saw
// (perf_hooks.monitorEventLoopDelay: mean, p99, max) and the 1-minute load average before and after.
// Processes: the sandbox child is `bench/capacity-discovery.mjs --sandbox` (answers `stats` on stdin), each load a
// fresh child of this file (`--load`: runPipeline from the build, fresh state).
// Usage: npm run build && node bench/capacity-under-load.mjs [--burners 1] [--creates 5000] [--baseline-dist ../main/dist]
// Exits 1 when the target is missed (the figures are printed all the same) or a row was rejected.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { loadAvg, makePatientFixture, runJsonChild } from './_patients-fixture.mjs';

const self = fileURLToPath(import.meta.url);
const capacityBench = fileURLToPath(new URL('capacity-discovery.mjs', import.meta.url));
const ownDist = fileURLToPath(new URL('../dist', import.meta.url));
const LATENCY_MS = 50;
const CAPACITY = 24;
const TARGET = 0.85;

async function main() {
  const { values } = parseArgs({
    options: { burners: { type: 'string', default: '1' }, creates: { type: 'string', default: '5000' }, 'baseline-dist': { type: 'string' } },
  });
  const burners = Number(values.burners);
  const N = Number(values.creates);
  const bound = CAPACITY / (LATENCY_MS / 1000);
  const builds = [['this', ownDist]];
  if (values['baseline-dist']) builds.push(['baseline', resolve(values['baseline-dist'])]);
  const fx = await makePatientFixture(N, 'care-etl-bench-capacity-load-');
  const runs = {};
  try {
    for (const [build, dist] of builds) {
      for (const k of [0, burners]) {
        const key = `${build} burners=${k}`;
        runs[key] = await withBurners(k, () => measured(dist, fx.mapping));
        runs[key].ratio = round(runs[key].createsPerSec / bound);
        process.stderr.write(`${key}: ${JSON.stringify(runs[key])}\n`);
      }
    }
  } finally {
    fx.cleanup();
  }
  const ratio = (k) => runs[k]?.ratio;
  const result = {
    bench: 'capacity-under-load',
    creates: N,
    latencyMs: LATENCY_MS,
    capacity: CAPACITY,
    boundPerSec: bound,
    burners,
    noBurnersRatio: ratio('this burners=0'),
    burnersRatio: ratio(`this burners=${burners}`),
    ...(values['baseline-dist']
      ? {
          baselineNoBurnersRatio: ratio('baseline burners=0'),
          baselineBurnersRatio: ratio(`baseline burners=${burners}`),
          burnersVsBaseline: round(runs[`this burners=${burners}`].createsPerSec / runs[`baseline burners=${burners}`].createsPerSec),
        }
      : {}),
    target: { burnersRatio: TARGET },
    runs,
    node: process.version,
    cpus: os.cpus().length,
  };
  result.pass = result.burnersRatio >= TARGET && Object.values(runs).every((r) => r.rejected === 0);
  if (!result.pass) process.exitCode = 1;
  console.log(JSON.stringify(result));
}

const round = (x) => Math.round(x * 100) / 100;

/** Runs `fn` while `k` child processes spin (a busy loop each), then stops them. */
async function withBurners(k, fn) {
  const kids = Array.from({ length: k }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
  try {
    return await fn();
  } finally {
    for (const c of kids) c.kill('SIGKILL');
  }
}

/** One load of the fixture into a fresh capacity-limited sandbox child, through the build in `dist`. */
async function measured(dist, mapping) {
  const cfg = { latencyMs: LATENCY_MS, maxInFlight: CAPACITY };
  const sb = spawn(process.execPath, [capacityBench, '--sandbox', JSON.stringify(cfg)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: sb.stdout })[Symbol.asyncIterator]();
  const stateDir = mkdtempSync(join(os.tmpdir(), 'care-etl-bench-capacity-load-state-'));
  try {
    const { url, apiKey, emrId, tenantId } = JSON.parse((await lines.next()).value);
    const loadBefore = loadAvg()[0];
    const r = await runJsonChild([self, '--load', dist, mapping, stateDir, JSON.stringify({ connection: { baseUrl: url, apiKey, emrId, tenantId } })]);
    const loadAfter = loadAvg()[0];
    sb.stdin.write('stats\n');
    const stats = JSON.parse((await lines.next()).value);
    return { ...r, server: { maxInFlight: stats.capacity.maxInFlight, maxQueued: stats.capacity.maxQueued }, loadAvg1m: [loadBefore, loadAfter] };
  } finally {
    sb.stdin.end();
    if (sb.exitCode === null) await new Promise((r) => sb.once('exit', r));
    rmSync(stateDir, { recursive: true, force: true });
  }
}

/** Child: one load through runPipeline of the build in `dist`; prints one JSON line with the loop delay it saw. */
async function loadChild(dist, mappingFile, stateDir, optsJson) {
  const { runPipeline } = await import(pathToFileURL(join(dist, 'pipeline/run-pipeline.js')).href);
  const loop = monitorEventLoopDelay({ resolution: 10 });
  let t0;
  let t1;
  const report = await runPipeline({
    mappingFile,
    statePath: join(stateDir, 'state.db'),
    rejectsFile: join(stateDir, 'rejects.ndjson'),
    env: {},
    ...JSON.parse(optsJson),
    onEvent(e) {
      if (e.type === 'phase-start') {
        t0 = performance.now();
        loop.enable();
      }
      if (e.type === 'phase-end') {
        t1 = performance.now();
        loop.disable();
      }
    },
  });
  const t = report.totals;
  const seconds = (t1 - t0) / 1000;
  const ms = (ns) => Math.round(ns / 1e5) / 10;
  return {
    created: t.created,
    rejected: t.rejected,
    phaseSeconds: round(seconds),
    createsPerSec: Math.round(t.created / seconds),
    concurrency: report.concurrency,
    loopDelayMs: { mean: ms(loop.mean), p99: ms(loop.percentile(99)), max: ms(loop.max) },
  };
}

const [, , mode, ...args] = process.argv;
if (mode === '--load') process.stdout.write(`${JSON.stringify(await loadChild(...args))}\n`);
else await main();
