// Capacity discovery (issue 15): runPipeline loads N generated patients into a sandbox with 50 ms latency, at the
// default flags (the window discovered from 4 up to --max-concurrency 32) and pinned at `--concurrency 8` (the old
// default), in the same run:
//   (a) `--max-in-flight 24`: the sandbox serves 24 requests at once and queues the rest (bound 24 / 50 ms = 480/s);
//       target: default ≥ 0.85 of the bound;
//   (b) no capacity limit: target: default ≥ 3× the pinned 8, and never more than the ceiling (32) in flight at the
//       server (its own counter, `stats().capacity.maxInFlight`);
//   (c) the fault profile (15 % 503, 5 % resets, 3 % ambiguous creates) over (a), default flags: every patient
//       exactly once on the server.
// Processes: this one orchestrates; each sandbox is a fresh child (`--sandbox`: startSandbox from dist/, answers
// `stats` on stdin), each load a fresh child (`--load`: runPipeline from dist/, fresh state). creates/s = creates /
// the patient phase's wall time (phase-start → phase-end: the ramp-up of the discovery included).
// Usage: npm run build && node bench/capacity-discovery.mjs [N] [FAULT_N]   (defaults 5000 2000; env N / FAULT_N)
// Exits 1 when a target is missed (the figures are printed all the same) or a row was rejected.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { loadAvg, makePatientFixture, runJsonChild } from './_patients-fixture.mjs';

const self = fileURLToPath(import.meta.url);
const LATENCY_MS = 50;
const CAPACITY = 24;
const CEILING = 32;
const FAULTS = { error503Rate: 0.15, dropRate: 0.05, ambiguousCreateRate: 0.03, seed: 15 };

async function main() {
  const N = Number(process.argv[2] ?? process.env.N ?? 5000);
  const FAULT_N = Number(process.argv[3] ?? process.env.FAULT_N ?? 2000);
  const bound = CAPACITY / (LATENCY_MS / 1000);
  const fx = await makePatientFixture(N, 'care-etl-bench-capacity-');
  const faultFx = await makePatientFixture(FAULT_N, 'care-etl-bench-capacity-faults-');
  const runs = {};
  try {
    for (const [label, sandbox] of [
      ['capacity24', { latencyMs: LATENCY_MS, maxInFlight: CAPACITY }],
      ['unlimited', { latencyMs: LATENCY_MS }],
    ]) {
      for (const [flags, opts] of [
        ['--concurrency 8', { concurrency: 8 }],
        ['default', {}],
      ]) {
        runs[`${label} ${flags}`] = await measured(sandbox, fx.mapping, opts);
        process.stderr.write(`${label} ${flags}: ${JSON.stringify(runs[`${label} ${flags}`])}\n`);
      }
    }
    // Retries as the fault test (test/sync/faults-onboarding.test.ts): 15 % 503s make 6 failures in a row likely somewhere.
    const retry = { attempts: 12, baseDelayMs: 50, maxDelayMs: 2000 };
    runs['faults default'] = await measured({ latencyMs: LATENCY_MS, maxInFlight: CAPACITY, ...FAULTS }, faultFx.mapping, { retry }, FAULT_N);
    process.stderr.write(`faults default: ${JSON.stringify(runs['faults default'])}\n`);
  } finally {
    fx.cleanup();
    faultFx.cleanup();
  }
  const cps = (k) => runs[k].createsPerSec;
  const result = {
    bench: 'capacity-discovery',
    creates: N,
    latencyMs: LATENCY_MS,
    // (a) a server that serves 24 at once
    capacity: CAPACITY,
    boundPerSec: bound,
    capacity24PinnedRatio: round(cps('capacity24 --concurrency 8') / bound),
    capacity24DefaultRatio: round(cps('capacity24 default') / bound),
    capacity24DefaultSettled: runs['capacity24 default'].concurrency.settled,
    // (b) a server with room for more than the ceiling
    unlimitedDefaultVsPinned8: round(cps('unlimited default') / cps('unlimited --concurrency 8')),
    unlimitedServerMaxInFlight: runs['unlimited default'].server.maxInFlight,
    ceiling: CEILING,
    // (c) the fault profile, default flags
    faults: { ...FAULTS, patients: FAULT_N, ...runs['faults default'].exactlyOnce },
    targets: { capacity24DefaultRatio: 0.85, unlimitedDefaultVsPinned8: 3, unlimitedServerMaxInFlight: CEILING },
    runs,
    node: process.version,
    cpus: os.cpus().length,
  };
  const f = result.faults;
  result.pass =
    result.capacity24DefaultRatio >= 0.85 &&
    result.unlimitedDefaultVsPinned8 >= 3 &&
    result.unlimitedServerMaxInFlight <= CEILING &&
    f.onServer === FAULT_N &&
    f.distinctMrns === FAULT_N &&
    Object.values(runs).every((r) => r.rejected === 0);
  if (!result.pass) process.exitCode = 1;
  console.log(JSON.stringify(result));
}

const round = (x) => Math.round(x * 100) / 100;

/** One load into a fresh sandbox child: the pipeline child's figures, the server's counters, the machine's load. */
async function measured(sandboxCfg, mapping, opts, expected) {
  const sb = spawn(process.execPath, [self, '--sandbox', JSON.stringify(sandboxCfg)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: sb.stdout })[Symbol.asyncIterator]();
  const stateDir = mkdtempSync(join(os.tmpdir(), 'care-etl-bench-capacity-state-'));
  try {
    const { url, apiKey, emrId, tenantId } = JSON.parse((await lines.next()).value);
    const loadBefore = loadAvg()[0];
    const r = await runJsonChild([self, '--load', mapping, stateDir, JSON.stringify({ connection: { baseUrl: url, apiKey, emrId, tenantId }, ...opts })]);
    const loadAfter = loadAvg()[0];
    sb.stdin.write('stats\n');
    const stats = JSON.parse((await lines.next()).value);
    if (expected !== undefined) r.exactlyOnce = stats.exactlyOnce;
    return {
      ...r,
      server: { maxInFlight: stats.capacity.maxInFlight, maxQueued: stats.capacity.maxQueued, byStatus: stats.byStatus },
      loadAvg1m: [loadBefore, loadAfter],
    };
  } finally {
    sb.stdin.end();
    if (sb.exitCode === null) await new Promise((r) => sb.once('exit', r));
    rmSync(stateDir, { recursive: true, force: true });
  }
}

/** Child: an in-memory sandbox with `faults`; prints its URL line; `stats` on stdin → its counters and, per MRN, how often it holds it. */
async function sandboxChild(faults) {
  const { startSandbox } = await import('../dist/sandbox/server.js');
  const sb = await startSandbox({ tenants: ['bench'], observationsPerPatient: 0, faults });
  const { apiKey, emrId } = sb.credentials;
  process.stdout.write(`${JSON.stringify({ url: sb.url, apiKey, emrId, tenantId: 'bench' })}\n`);
  for await (const line of createInterface({ input: process.stdin })) {
    if (line !== 'stats') continue;
    const s = sb.stats();
    sb.setFaults(undefined); // the listing below must not meet the faults
    const mrns = new Map();
    const { request } = await import('undici');
    let next = `${sb.url}/Patient?_count=1000`;
    while (next) {
      const res = await request(next, { headers: { 'service-subscriptionkey': apiKey, 'service-emrid': emrId, 'service-tenantid': 'bench' } });
      const page = await res.body.json();
      for (const e of page.entry) {
        const mrn = e.resource.identifier?.[0]?.value;
        mrns.set(mrn, (mrns.get(mrn) ?? 0) + 1);
      }
      next = page.link.find((l) => l.relation === 'next')?.url;
    }
    const onServer = [...mrns.values()].reduce((a, b) => a + b, 0);
    const duplicated = [...mrns.values()].filter((n) => n > 1).length;
    process.stdout.write(`${JSON.stringify({ ...s, exactlyOnce: { onServer, distinctMrns: mrns.size, duplicated } })}\n`);
  }
  await sb.close();
}

/** Child: one load through runPipeline; prints one JSON line. */
async function loadChild(mappingFile, stateDir, optsJson) {
  const { runPipeline } = await import('../dist/pipeline/run-pipeline.js');
  const opts = JSON.parse(optsJson);
  let t0;
  let t1;
  // TRACE=1: the window every 250 ms of the phase (from the progress events), to see the controller at work.
  const trace = [];
  let lastTrace = 0;
  const report = await runPipeline({
    mappingFile,
    statePath: join(stateDir, 'state.db'),
    rejectsFile: join(stateDir, 'rejects.ndjson'),
    env: {},
    ...opts,
    onEvent(e) {
      if (e.type === 'phase-start') t0 = performance.now();
      if (e.type === 'phase-end') t1 = performance.now();
      if (process.env.TRACE && e.type === 'progress' && e.limit !== undefined && performance.now() - lastTrace >= 250) {
        lastTrace = performance.now();
        trace.push(e.limit);
      }
    },
  });
  const t = report.totals;
  const seconds = (t1 - t0) / 1000;
  return {
    flags: opts.concurrency ? `--concurrency ${opts.concurrency}` : 'default',
    created: t.created,
    adopted: t.adopted,
    rejected: t.rejected,
    phaseSeconds: Math.round(seconds * 100) / 100,
    createsPerSec: Math.round(t.created / seconds),
    concurrency: report.concurrency,
    ...(process.env.TRACE ? { windowEvery250ms: trace.join(' ') } : {}),
  };
}

const [, , mode, ...args] = process.argv;
if (mode === '--sandbox') await sandboxChild(JSON.parse(args[0]));
else if (mode === '--load') process.stdout.write(`${JSON.stringify(await loadChild(...args))}\n`);
else await main();
