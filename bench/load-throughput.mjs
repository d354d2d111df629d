// Load throughput (issue 3): runPipeline loads N generated patients (the example's `patient` mapping) into a
// sandbox with injected latency, at a fixed concurrency. Creates/s is compared with the bound
// CONCURRENCY / LATENCY (16 / 0.020 s = 800 req/s): the loader should keep its window full.
// Per round: a fresh sandbox (in-memory) in its own child process (startSandbox({ faults: { latencyMs } })),
// a fresh state file, and the pipeline in another fresh child process. A third, "probed" load of this build
// records, through undici's diagnostics channels, how many requests were really in flight (sampled every 2 ms), the
// client-side latency of each request and the event-loop delay — to tell a window that is not kept full from a slow
// server. CPU per request (issue 28 item 3): user+sys of the whole pipeline child (start-up included) / the
// requests the server saw, from the loads WITHOUT that probe (its subscribers, WeakMap, latency array, 2 ms sampler
// and loop-delay monitor ran in the measured process: probedCpuMsPerRequest and probeCpuRatio say what they add).
// BASELINE_DIST=<dir> (a dist/ built from another commit, e.g. today's main, inside a checkout whose
// node_modules resolves) runs that build too, alternately with this one in every round: cpuRatioToBaselineDist
// is then measured in one run, on the same machine load.
// Usage: npm run build && node bench/load-throughput.mjs [N] [CONCURRENCY] [LATENCY_MS] [ROUNDS]
//        (defaults 3000 16 20 3; env N / CONCURRENCY / LATENCY_MS / ROUNDS work too; CPU_PROF=1 profiles the
//        last round's pipeline child instead of counting it; CPU_PROF=<dir> also keeps its .cpuprofile there;
//        ALLOC_PROF=1 runs the last round's loads of both builds under V8's sampling heap profiler, collected
//        objects included, and prints allocKbPerRequest — bytes allocated during the phase / requests — instead of
//        counting their CPU)
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { loadAvg, makePatientFixture, median, runJsonChild, summarizeCpuProfile } from './_patients-fixture.mjs';

const self = fileURLToPath(import.meta.url);

async function main() {
  const N = Number(process.argv[2] ?? process.env.N ?? 3000);
  const CONCURRENCY = Number(process.argv[3] ?? process.env.CONCURRENCY ?? 16);
  const LATENCY_MS = Number(process.argv[4] ?? process.env.LATENCY_MS ?? 20);
  const ROUNDS = Number(process.argv[5] ?? process.env.ROUNDS ?? 3);
  const bound = CONCURRENCY / (LATENCY_MS / 1000);
  const loadBefore = loadAvg()[0];
  const fx = await makePatientFixture(N, 'care-etl-bench-load-');
  const baseDist = process.env.BASELINE_DIST ? resolve(process.env.BASELINE_DIST) : undefined;
  const runs = [];
  const baselines = [];
  const baseDistRuns = [];
  const probedRuns = [];
  const allocKbPerRequest = {};
  let ledger;
  try {
    for (let round = 0; round < ROUNDS; round++) {
      // the two builds alternate (which one goes first too), so a change of machine load hits both alike
      const builds = baseDist ? (round % 2 ? ['base-dist', 'pipeline'] : ['pipeline', 'base-dist']) : ['pipeline'];
      for (const kind of [...builds, 'probed', 'baseline']) {
        const sandbox = spawn(process.execPath, [self, '--sandbox', String(LATENCY_MS)], { stdio: ['pipe', 'pipe', 'inherit'] });
        const lines = createInterface({ input: sandbox.stdout })[Symbol.asyncIterator]();
        try {
          const sb = JSON.parse((await lines.next()).value);
          const stateDir = mkdtempSync(join(os.tmpdir(), 'care-etl-bench-state-'));
          try {
            const conn = [sb.url, sb.apiKey, sb.emrId, sb.tenantId, String(CONCURRENCY)];
            // CPU_PROF=1: the last round's pipeline child runs under --cpu-prof (its figures are then not counted).
            const profiled = process.env.CPU_PROF && kind === 'pipeline' && round === ROUNDS - 1;
            const keepProf = profiled && process.env.CPU_PROF !== '1' ? resolve(process.env.CPU_PROF) : undefined;
            const prof = profiled ? (keepProf ?? mkdtempSync(join(os.tmpdir(), 'care-etl-prof-'))) : undefined;
            const flags = prof ? ['--cpu-prof', '--cpu-prof-dir', prof] : [];
            const dist = kind === 'base-dist' ? baseDist : join(fileURLToPath(new URL('..', import.meta.url)), 'dist');
            // ALLOC_PROF: the last round's loads of both builds count what they allocate (their CPU is not counted).
            const allocProfiled = process.env.ALLOC_PROF && (kind === 'pipeline' || kind === 'base-dist') && round === ROUNDS - 1;
            const probe = kind === 'probed' ? 'probe' : allocProfiled ? 'alloc' : 'bare';
            const r = await runJsonChild(
              kind === 'baseline' ? [self, '--baseline', String(N), ...conn] : [...flags, self, '--load', fx.mapping, stateDir, dist, probe, ...conn],
            );
            if (prof) {
              process.stderr.write(
                `\n--cpu-prof of one load (${r.createsPerSec} creates/s under the profiler), top self time:\n${summarizeCpuProfile(prof, 30)}\n`,
              );
              if (!keepProf) rmSync(prof, { recursive: true, force: true });
              continue;
            }
            sandbox.stdin.write('stats\n');
            const stats = JSON.parse((await lines.next()).value);
            if (allocProfiled) {
              allocKbPerRequest[kind] = Math.round(r.allocatedBytes / stats.requests / 10.24) / 100;
              continue;
            }
            const serverCpuUsPerRequest = Math.round(stats.cpuUs / stats.requests);
            const cpuMsPerRequest = r.processCpuUs === undefined ? undefined : Math.round(r.processCpuUs / stats.requests) / 1000;
            const to = { pipeline: runs, 'base-dist': baseDistRuns, probed: probedRuns, baseline: baselines }[kind];
            to.push({ ...r, cpuMsPerRequest, serverRequests: stats.requests, serverByStatus: stats.byStatus, serverCpuUsPerRequest });
          } finally {
            rmSync(stateDir, { recursive: true, force: true });
          }
        } finally {
          sandbox.stdin.end();
          if (sandbox.exitCode === null) await once(sandbox, 'exit');
        }
      }
    }
    const stateDir = mkdtempSync(join(os.tmpdir(), 'care-etl-bench-ledger-'));
    try {
      ledger = await runJsonChild([self, '--ledger', String(N), stateDir]);
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  } finally {
    fx.cleanup();
  }
  const rps = runs.map((r) => r.createsPerSec);
  const base = baselines.map((r) => r.createsPerSec);
  const cpu = runs.map((r) => r.cpuMsPerRequest);
  const baseCpu = baseDistRuns.map((r) => r.cpuMsPerRequest);
  const ratio = (a, b) => Math.round((a / b) * 100) / 100;
  console.log(
    JSON.stringify({
      bench: 'load-throughput',
      creates: N,
      concurrency: CONCURRENCY,
      latencyMs: LATENCY_MS,
      boundPerSec: bound,
      createsPerSec: rps,
      ratioToBound: rps.map((x) => Math.round((x / bound) * 100) / 100),
      medianRatio: Math.round((median(rps) / bound) * 100) / 100,
      // The same number of POST /Patient from a bare undici loop (no pipeline), same concurrency, fresh sandbox:
      // what the machine allows right now. pipelineVsBaseline isolates the pipeline from the machine's load.
      baselinePerSec: base,
      pipelineVsBaseline: rps.map((x, i) => Math.round((x / base[i]) * 100) / 100),
      // from the probed round (this build with the probe on): the window's own rate, in flight, latency, loop delay
      steadyPerSec: probedRuns.map((r) => r.steadyPerSec),
      steadyRatioToBound: probedRuns.map((r) => Math.round((r.steadyPerSec / bound) * 100) / 100),
      probedAvgInFlight: probedRuns.map((r) => r.avgInFlight),
      // user+sys of the whole pipeline child / requests the server saw (issue 28 item 3: ≤ 0.4 ms), probe off
      cpuMsPerRequest: cpu,
      medianCpuMsPerRequest: median(cpu),
      // the same with the probe on (the figure before session 31), and what the probe adds per round
      probedCpuMsPerRequest: probedRuns.map((r) => r.cpuMsPerRequest),
      probeCpuRatio: probedRuns.map((r, i) => ratio(r.cpuMsPerRequest, cpu[i])),
      ...(baseDist
        ? {
            baselineDist: baseDist,
            baselineDistCpuMsPerRequest: baseCpu,
            baselineDistCreatesPerSec: baseDistRuns.map((r) => r.createsPerSec),
            cpuRatioToBaselineDist: cpu.map((x, i) => ratio(x, baseCpu[i])),
            // the load phase alone (start-up excluded: module loading is the same in both builds)
            phaseCpuRatioToBaselineDist: runs.map((r, i) => ratio(r.clientCpuUsPerCreate, baseDistRuns[i].clientCpuUsPerCreate)),
            medianCpuRatioToBaselineDist: ratio(median(cpu), median(baseCpu)),
            baselineDistRuns: baseDistRuns,
          }
        : {}),
      ...(process.env.ALLOC_PROF ? { allocKbPerRequest } : {}),
      ledger,
      runs,
      probedRuns,
      baselines,
      loadAvg1m: [loadBefore, loadAvg()[0]],
      node: process.version,
      cpus: os.cpus().length,
    }),
  );
}

/** Child: the sandbox, in memory, with latency; prints its URL line, answers `stats` on stdin, exits on EOF. */
async function sandboxChild(latencyMs) {
  const { startSandbox } = await import('../dist/sandbox/server.js');
  const sb = await startSandbox({ faults: { latencyMs } });
  const c0 = process.cpuUsage();
  const { apiKey, emrId, tenants } = sb.credentials;
  process.stdout.write(`${JSON.stringify({ url: sb.url, apiKey, emrId, tenantId: tenants[0] })}\n`);
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === 'stats') {
      const c = process.cpuUsage(c0);
      process.stdout.write(`${JSON.stringify({ ...sb.stats(), cpuUs: c.user + c.system })}\n`);
    }
  }
  await sb.close();
}

/** Child: one load through runPipeline (of the build in `dist`); prints one JSON line. */
async function loadChild(mappingFile, stateDir, dist, probeMode, baseUrl, apiKey, emrId, tenantId, concurrency) {
  const { runPipeline } = await import(pathToFileURL(join(dist, 'pipeline/run-pipeline.js')).href);
  const probe = probeMode === 'probe' ? await probes() : probeMode === 'alloc' ? await allocationSampler() : phaseTimer();
  const report = await runPipeline({
    mappingFile,
    connection: { baseUrl, apiKey, emrId, tenantId },
    statePath: join(stateDir, 'state.db'),
    rejectsFile: join(stateDir, 'rejects.ndjson'),
    concurrency: Number(concurrency),
    env: {},
    onEvent(e) {
      if (e.type === 'phase-start') probe.start();
      if (e.type === 'phase-end') probe.stop();
    },
  });
  const t = report.totals;
  if (t.rejected || t.created !== t.read) throw new Error(`expected ${t.read} creates, got ${JSON.stringify(t)}`);
  const c = process.cpuUsage(); // the whole process, from its start: module loading included
  return { created: t.created, runSeconds: report.durationMs / 1000, processCpuUs: c.user + c.system, ...(await probe.result(t.created)) };
}

/** Child: N creates from a bare undici Agent + `concurrency` workers (no transform, no ledger): the control. */
async function baselineChild(n, baseUrl, apiKey, emrId, tenantId, concurrency) {
  const { Agent, request } = await import('undici');
  const C = Number(concurrency);
  const agent = new Agent({ connections: 32, keepAliveTimeout: 10_000 });
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json',
    'service-subscriptionkey': apiKey,
    'service-emrid': emrId,
    'service-tenantid': tenantId,
  };
  const { patientRow } = await import('./_patients-fixture.mjs');
  const body = (i) => {
    const [mrn, first, last, , , , email, address, city, state, zip] = patientRow(i);
    return JSON.stringify({
      resourceType: 'Patient',
      identifier: [{ system: 'urn:lakeside:mrn', value: mrn }],
      active: true,
      name: [{ use: 'official', family: last, given: [first] }],
      gender: 'female',
      birthDate: '1980-01-02',
      telecom: [
        { system: 'phone', value: '+15552001234', use: 'home' },
        { system: 'email', value: email },
      ],
      address: [{ use: 'home', line: [address], city, state, postalCode: zip, country: 'US' }],
    });
  };
  const probe = await probes();
  let next = 1;
  probe.start();
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (next <= Number(n)) {
        const res = await request(`${baseUrl}/Patient`, { dispatcher: agent, method: 'POST', headers, body: body(next++) });
        await res.body.text();
        if (res.statusCode !== 200) throw new Error(`create → ${res.statusCode}`);
      }
    }),
  );
  probe.stop();
  await agent.close();
  return { created: Number(n), ...probe.result(Number(n)) };
}

/**
 * Child: what the ledger costs per create, as ResourceSync uses it (get + recordIntent + recordSynced, each
 * statement its own autocommit transaction), against the same statements grouped in one transaction per
 * `batch` creates. Fresh WAL state file, synchronous=NORMAL (the defaults).
 */
async function ledgerChild(n, stateDir) {
  const [{ Ledger }, { contentHash }] = await Promise.all([import('../dist/state/ledger.js'), import('../dist/core/content-hash.js')]);
  const { patientRow } = await import('./_patients-fixture.mjs');
  const out = {};
  for (const batch of [1, 16]) {
    const ledger = Ledger.open(join(stateDir, `ledger-${batch}.db`));
    const scope = ledger.scope('http://127.0.0.1:1', 'demo-clinic');
    const runId = scope.beginRun({ mappingFile: 'bench', dryRun: false });
    const items = Array.from({ length: Number(n) }, (_, i) => ({
      key: patientRow(i + 1)[0],
      resource: { resourceType: 'Patient', identifier: [{ system: 'urn:lakeside:mrn', value: patientRow(i + 1)[0] }] },
    }));
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < items.length; i += batch) {
      const group = items.slice(i, i + batch);
      const work = (step) => () => {
        for (const it of group) {
          if (step === 'intent') {
            const hash = contentHash(it.resource);
            scope.get('patient', it.key);
            scope.recordIntent({ mapping: 'patient', key: it.key, resourceType: 'Patient', hash, matchValue: `urn:lakeside:mrn|${it.key}`, runId });
          } else {
            scope.recordSynced({ mapping: 'patient', key: it.key, resourceType: 'Patient', serverId: `id-${it.key}`, versionId: '1', hash: 'h', runId });
          }
        }
      };
      if (batch === 1) {
        work('intent')();
        work('synced')();
      } else {
        scope.transaction(work('intent'));
        scope.transaction(work('synced'));
      }
    }
    const wall = performance.now() - t0;
    const c = process.cpuUsage(c0);
    ledger.close();
    out[batch === 1 ? 'autocommit' : `batchesOf${batch}`] = {
      wallUsPerCreate: Math.round((wall * 1000) / n),
      cpuUsPerCreate: Math.round((c.user + c.system) / n),
    };
  }
  return out;
}

/** The bare load child's only measuring: wall time and CPU between the phase's start and end (no per-request work). */
function phaseTimer() {
  let t0, t1, c0, cpu;
  return {
    start() {
      t0 = performance.now();
      c0 = process.cpuUsage();
    },
    stop() {
      t1 = performance.now();
      cpu = process.cpuUsage(c0);
    },
    result(n) {
      const s = (t1 - t0) / 1000;
      return { seconds: Math.round(s * 1000) / 1000, createsPerSec: Math.round(n / s), clientCpuUsPerCreate: Math.round((cpu.user + cpu.system) / n) };
    },
  };
}

/**
 * ALLOC_PROF: bytes allocated between start() and stop() — V8's sampling heap profiler (one sample per 512 bytes on
 * average) with the objects collected by either GC kept, so the total is what was allocated, not what survived.
 */
async function allocationSampler() {
  const { Session } = await import('node:inspector/promises');
  const session = new Session();
  session.connect();
  const timer = phaseTimer();
  let started;
  let stopped;
  return {
    start() {
      timer.start();
      started = session.post('HeapProfiler.startSampling', {
        samplingInterval: 512,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
    },
    stop() {
      timer.stop();
      stopped = started.then(() => session.post('HeapProfiler.stopSampling'));
    },
    async result(n) {
      const { profile } = await stopped;
      let bytes = 0;
      const walk = (node) => {
        bytes += node.selfSize;
        for (const c of node.children) walk(c);
      };
      walk(profile.head);
      session.disconnect();
      return { ...timer.result(n), allocatedBytes: bytes };
    },
  };
}

/** Measures, between start() and stop(): requests in flight at the client (undici diagnostics channels, sampled
 * every 2 ms), their latency, the event-loop delay and the CPU time of this process. */
async function probes() {
  const dc = await import('node:diagnostics_channel');
  const { monitorEventLoopDelay } = await import('node:perf_hooks');

  // Requests really in flight at the client (undici), and their latency.
  const started = new WeakMap();
  let inFlight = 0;
  let maxInFlight = 0;
  const latencies = [];
  let firstRequestAt;
  let lastResponseAt;
  let cpuAtFirstRequest;
  dc.subscribe('undici:request:create', ({ request }) => {
    const now = performance.now();
    if (firstRequestAt === undefined && t0 !== undefined) {
      firstRequestAt = now;
      cpuAtFirstRequest = process.cpuUsage();
    }
    started.set(request, now);
    inFlight++;
    if (inFlight > maxInFlight) maxInFlight = inFlight;
  });
  const done = ({ request }) => {
    const t = started.get(request);
    if (t === undefined) return;
    started.delete(request);
    inFlight--;
    lastResponseAt = performance.now();
    latencies.push(lastResponseAt - t);
  };
  dc.subscribe('undici:request:trailers', done);
  dc.subscribe('undici:request:error', done);

  let samples = 0;
  let inFlightSum = 0;
  let t0;
  let t1;
  let c0;
  let cpu;
  let steadyCpu;
  const sampler = setInterval(() => {
    if (t0 !== undefined && t1 === undefined) {
      samples++;
      inFlightSum += inFlight;
    }
  }, 2);
  const eld = monitorEventLoopDelay({ resolution: 5 });
  return {
    start() {
      latencies.length = 0;
      t0 = performance.now();
      c0 = process.cpuUsage();
      eld.enable();
    },
    stop() {
      t1 = performance.now();
      cpu = process.cpuUsage(c0);
      steadyCpu = process.cpuUsage(cpuAtFirstRequest);
      eld.disable();
      clearInterval(sampler);
    },
    result(n) {
      const s = (t1 - t0) / 1000;
      latencies.sort((a, b) => a - b);
      const pct = (p) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] * 10) / 10;
      const ms = (ns) => Math.round(ns / 1e4) / 100;
      return {
        seconds: Math.round(s * 1000) / 1000,
        createsPerSec: Math.round(n / s),
        // from start() to the first request, and from the last answer to stop(): time with an empty window
        firstRequestMs: Math.round(firstRequestAt - t0),
        tailMs: Math.round(t1 - lastResponseAt),
        // first request → last answer: the window's own rate, without the phase's start-up
        steadyPerSec: Math.round(n / ((lastResponseAt - firstRequestAt) / 1000)),
        steadyCpuUsPerCreate: Math.round((steadyCpu.user + steadyCpu.system) / n),
        avgInFlight: Math.round((inFlightSum / samples) * 10) / 10,
        maxInFlight,
        clientLatencyMs: { p50: pct(0.5), p90: pct(0.9), p99: pct(0.99), max: pct(1) },
        eventLoopDelayMs: { p50: ms(eld.percentile(50)), p99: ms(eld.percentile(99)), max: ms(eld.max) },
        clientCpuUsPerCreate: Math.round((cpu.user + cpu.system) / n), // the phase, start-up included
      };
    },
  };
}

const [, , mode, ...args] = process.argv;
if (mode === '--sandbox') await sandboxChild(Number(args[0]));
else if (mode === '--load') process.stdout.write(`${JSON.stringify(await loadChild(...args))}\n`);
else if (mode === '--baseline') process.stdout.write(`${JSON.stringify(await baselineChild(...args))}\n`);
else if (mode === '--ledger') process.stdout.write(`${JSON.stringify(await ledgerChild(...args))}\n`);
else await main();
