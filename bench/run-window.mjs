// The window used across the whole run (issue 28 item 1): runPipeline loads a full three-type mapping — N patients,
// 50 practitioners, 2N care teams (each referring to a patient and a practitioner with `$ref`) — into a sandbox with
// 25 ms latency and no capacity limit, default flags (the window discovered, verify-after-load `auto`).
// Figures, from the server's own counters over the WHOLE run (first request admitted → last answered, listings and
// phase changes included):
//   meanInFlight / settled window   (target ≥ 0.9)   — `stats().capacity.meanInFlight`, the report's `concurrency.settled`
//   req/s / (settled / latency)      (target ≥ 0.8)
// and per run `windowUnderSettled`: the seconds the window spent under where it settled after first reaching it (from
// the progress events; cheap, always on) — a run far below its usual share with it near zero lost in transit, not window.
// Then a second run of the same target (same server URL and tenant, same state; N new patients and their care teams)
// shows the remembered window: `firstWindow` is the window of its first progress event (the first run starts at 4).
// Processes: this one orchestrates; the sandbox is a child (`--sandbox`, a SQLite data file so that it is restarted on
// the same port between the runs: per-run server counters); each load is a child (`--load`, runPipeline from dist/).
// Usage: npm run build && node bench/run-window.mjs [N]   (default 5000: ~15k requests; env N works too)
//   BASELINE_DIST=<another build>/dist: that build's two runs right after this one's (same fixture, a sandbox and a
//   state of their own), `baseline` in the output with the req/s ratios of the two builds measured under the same load.
//   TIMELINE=1: where the window went, per run on stderr — the sandbox's requests in flight per 100 ms against the
//   client's (undici's diagnostics channels), each bucket's unused window attributed to what the client was doing
//   (ramp, listings only, loads alongside a listing, loads only) and split into window below settled / not filled by
//   the client / sent but not (yet, or no longer) at the server; each request's hops matched by connection (queued in
//   the client before its headers were written, transit, at the server, answer transit), both event loops' delay and
//   utilisation, and the client's CPU time from a request's creation to its write; at each phase boundary (a load
//   starting after the first ones: care teams after patients), how long the server held under a quarter of the window.
//   COUNT_PARAM=ignore|reject PAGE_SIZE=n: the sandbox pages as some servers do (see SERVER_PAGING below).
//   CALIBRATE=1: before the builds, the machine's own ceiling — a bare undici loop (a small body built per request, answers parsed,
//   nothing recorded) keeping 32 POSTs in flight against the same sandbox, as many as a run sends: `bare` in the
//   output, with `firstRunVsBare` (the first run's in-flight share / the bare loop's). What the loader loses on top of
//   it is its own (ramp, phases, listings, CPU per request). Then this build's first run with its window pinned at the
//   bare loop's (`--concurrency 32`: no discovery, no ramp), before the default runs and never alternated with them:
//   `pinned` in the output, with `pinnedVsBare` (what the loader's phases, listings and work per request cost —
//   everything but discovery) and `firstRunVsPinned` (what discovering the window costs: the ramp, the step-downs).
// Exits 1 when a target is missed (the figures are printed all the same) or a row was rejected.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { HEADER, loadAvg, patientRow, runJsonChild, THREE_TYPE_MAPPING as MAPPING } from './_patients-fixture.mjs';

const self = fileURLToPath(import.meta.url);
/**
 * COUNT_PARAM=ignore|reject PAGE_SIZE=n: a sandbox that pages as some servers do — `_count` ignored (pages of n
 * whatever is asked) or refused — instead of honouring the 1,000 asked for (the spec shows no paging parameter).
 */
const SERVER_PAGING = {
  ...(process.env.COUNT_PARAM ? { countParam: process.env.COUNT_PARAM } : {}),
  ...(process.env.PAGE_SIZE ? { pageSize: Number(process.env.PAGE_SIZE) } : {}),
};
if (SERVER_PAGING.pageSize !== undefined && !(Number.isInteger(SERVER_PAGING.pageSize) && SERVER_PAGING.pageSize >= 1))
  throw new TypeError(`Expected \`PAGE_SIZE\` to be an integer ≥ 1, got \`${process.env.PAGE_SIZE}\``);
const LATENCY_MS = 25;
const PRACTITIONERS = 50;

/** `dir` with the mapping and its three sources: patients `from`…`from + n - 1`, two care teams each. */
async function writeFixture(dir, from, n) {
  writeFileSync(join(dir, 'mapping.yaml'), MAPPING);
  let staff = 'NPI,FIRST,LAST\n';
  for (let i = 1; i <= PRACTITIONERS; i++) staff += `${1000000000 + i},Pat${i},Clinician${i}\n`;
  writeFileSync(join(dir, 'practitioners.csv'), staff);
  const patients = createWriteStream(join(dir, 'patients.csv'));
  const teams = createWriteStream(join(dir, 'teams.csv'));
  let p = `${HEADER.join(',')}\n`;
  let t = 'TEAM,MRN,NPI\n';
  for (let i = from; i < from + n; i++) {
    const row = patientRow(i);
    p += `${row.join(',')}\n`;
    for (const k of ['a', 'b']) t += `${row[0]}-${k},${row[0]},${1000000000 + 1 + ((i * (k === 'a' ? 7 : 13)) % PRACTITIONERS)}\n`;
    if (p.length > 1 << 16) {
      if (!patients.write(p)) await once(patients, 'drain');
      if (!teams.write(t)) await once(teams, 'drain');
      p = t = '';
    }
  }
  patients.end(p);
  teams.end(t);
  await Promise.all([once(patients, 'finish'), once(teams, 'finish')]);
  return join(dir, 'mapping.yaml');
}

async function main() {
  const N = Number(process.argv[2] ?? process.env.N ?? 5000);
  const root = mkdtempSync(join(os.tmpdir(), 'care-etl-bench-window-'));
  // BASELINE_DIST=<other build>/dist: that build's two runs too, right after this one's (the same fixture, a sandbox
  // and a state of its own): the ratios of the two builds measured under the same load.
  const builds = [{ label: 'this build', dist: join(dirname(self), '..', 'dist') }];
  if (process.env.BASELINE_DIST) builds.push({ label: 'baseline', dist: resolve(process.env.BASELINE_DIST) });
  const byBuild = [];
  let bare;
  let pinned;
  try {
    if (process.env.CALIBRATE) bare = await calibrate(join(root, 'bare'), 3 * N + PRACTITIONERS);
    const first = await writeFixture(mkdtempSync(join(root, 'a-')), 1, N);
    const second = await writeFixture(mkdtempSync(join(root, 'b-')), N + 1, N);
    if (bare) pinned = await pinnedRun(join(root, 'pinned'), first, builds[0], bare.window);
    for (const [i, build] of builds.entries()) byBuild.push(await runPair(build, join(root, `build-${i}`), first, second));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  const runs = byBuild[0];
  const [a, b] = runs;
  const base = byBuild[1];
  const result = {
    bench: 'run-window',
    patients: N,
    practitioners: PRACTITIONERS,
    careTeams: 2 * N,
    latencyMs: LATENCY_MS,
    inFlightVsWindow: a.inFlightVsWindow,
    reqPerSecVsBound: a.reqPerSecVsBound,
    secondRunFirstWindow: b.firstWindow,
    secondRunInFlightVsWindow: b.inFlightVsWindow,
    secondRunReqPerSecVsBound: b.reqPerSecVsBound,
    targets: { inFlightVsWindow: 0.9, reqPerSecVsBound: 0.8 },
    ...(base
      ? {
          baseline: {
            dist: builds[1].dist,
            inFlightVsWindow: base[0].inFlightVsWindow,
            reqPerSecVsBound: base[0].reqPerSecVsBound,
            secondRunInFlightVsWindow: base[1].inFlightVsWindow,
            secondRunReqPerSecVsBound: base[1].reqPerSecVsBound,
            reqPerSecRatio: [round(a.reqPerSec / base[0].reqPerSec), round(b.reqPerSec / base[1].reqPerSec)],
            runs: base,
          },
        }
      : {}),
    // The first run's share of its window against the bare loop's share of its own: what the loader loses on top of
    // the machine's transit, measured in the same invocation.
    ...(bare ? { bare: { ...bare, firstRunVsBare: round(a.serverMeanInFlight / a.concurrency.settled / (bare.meanInFlight / bare.window)) } } : {}),
    // The same first run with the window pinned at the bare loop's: against the bare loop, what everything but
    // discovery costs (phases, listings, work per request); the discovered first run against it, what discovery costs.
    ...(pinned
      ? {
          pinned: {
            window: pinned.concurrency.settled,
            meanInFlight: pinned.serverMeanInFlight,
            inFlightVsWindow: pinned.inFlightVsWindow,
            runSeconds: pinned.runSeconds,
            pinnedVsBare: round(pinned.serverMeanInFlight / pinned.concurrency.settled / (bare.meanInFlight / bare.window)),
            firstRunVsPinned: round(a.serverMeanInFlight / a.concurrency.settled / (pinned.serverMeanInFlight / pinned.concurrency.settled)),
          },
        }
      : {}),
    runs,
    loadAvg1m: loadAvg(),
    node: process.version,
    cpus: os.cpus().length,
  };
  result.pass = runs.every((r) => r.inFlightVsWindow >= 0.9 && r.reqPerSecVsBound >= 0.8 && r.rejected === 0);
  if (!result.pass) process.exitCode = 1;
  console.log(JSON.stringify(result));
}

/** One build's first run and second run of the same target (`dir`: its sandbox data file and state). */
async function runPair(build, dir, first, second) {
  mkdirSync(dir);
  const runs = [];
  let port = 0;
  for (const [label, mapping] of [
    ['first', first],
    ['second (same target)', second],
  ]) {
    const { run, sandboxPort } = await measuredRun({ build, label, dir, port, mapping });
    runs.push(run);
    port = sandboxPort;
  }
  return runs;
}

/** CALIBRATE=1: this build's first run with its window pinned (`--concurrency window`), into a sandbox and a state of its own. */
async function pinnedRun(dir, mapping, build, window) {
  mkdirSync(dir);
  return (await measuredRun({ build, label: `pinned at ${window}`, dir, port: 0, mapping, pinned: window })).run;
}

/**
 * One load child against a sandbox child over `dir`'s data file and state (`port` 0: any), its figures printed and
 * returned. CPU_PROF=<dir>: both children run under --cpu-prof, their profiles kept in <dir>; TIMELINE=1: the
 * breakdown of where the window went. `pinned`: `--concurrency` at that window instead of the discovered one.
 */
async function measuredRun({ build, label, dir, port, mapping, pinned }) {
  const prof = process.env.CPU_PROF
    ? ['--cpu-prof', `--cpu-prof-dir=${process.env.CPU_PROF}`, `--cpu-prof-interval=${process.env.CPU_PROF_INTERVAL ?? 1000}`]
    : [];
  const sb = await sandboxProcess(join(dir, 'sandbox.db'), port, prof);
  try {
    const args = [...prof, self, '--load', mapping, join(dir, 'state.db'), JSON.stringify(sb.conn), build.dist, ...(pinned ? [String(pinned)] : [])];
    const load = await runJsonChild(args);
    const stats = await sb.ask('stats');
    if (process.env.TIMELINE) {
      process.stderr.write(`${build.label}, ${label}:\n${breakdown(await sb.ask('timeline'), load, stats)}\n`);
      delete load.timeline;
    }
    const run = figures(pinned ? 'pinned' : label, load, stats);
    process.stderr.write(`${build.label}, ${label}: ${JSON.stringify(run)}\n`);
    return { run, sandboxPort: sb.conn.port };
  } finally {
    await sb.stop();
  }
}

const round = (x) => Math.round(x * 100) / 100;

/** CALIBRATE=1: a bare undici loop's mean in flight at the sandbox over its window (32), `n` creates. */
async function calibrate(dir, n) {
  mkdirSync(dir);
  const sb = await sandboxProcess(join(dir, 'sandbox.db'), 0, []);
  try {
    const { conn } = sb;
    const { Agent, request } = await import('undici');
    const window = 32;
    const agent = new Agent({ connections: window });
    const headers = {
      'content-type': 'application/json',
      'service-subscriptionkey': conn.apiKey,
      'service-emrid': conn.emrId,
      'service-tenantid': conn.tenantId,
    };
    let next = 0;
    const worker = async () => {
      while (next < n) {
        const i = next++;
        const body = JSON.stringify({
          resourceType: 'Patient',
          identifier: [{ system: 'urn:bench:bare', value: `b${i}` }],
          name: [{ family: `F${i}`, given: ['G'] }],
          gender: 'female',
          birthDate: '1980-01-01',
        });
        const res = await request(`${conn.baseUrl}/Patient`, { method: 'POST', body, headers, dispatcher: agent });
        const answer = await res.body.json();
        if (res.statusCode !== 200 || typeof answer.id !== 'string') throw new Error(`bare loop: create answered ${res.statusCode}`);
      }
    };
    await Promise.all(Array.from({ length: window }, worker));
    await agent.close();
    const { capacity } = await sb.ask('stats');
    return { window, creates: n, meanInFlight: capacity.meanInFlight, inFlightVsWindow: round(capacity.meanInFlight / window) };
  } finally {
    await sb.stop();
  }
}

/**
 * The `--sandbox` child over `dataFile` on `port` (0: any; node flags `prof`): its connection, `ask` (a command on its
 * stdin, `stats` or `timeline`, → the JSON line it answers) and `stop` (its stdin closed, its exit awaited).
 */
async function sandboxProcess(dataFile, port, prof) {
  const child = spawn(process.execPath, [...prof, self, '--sandbox', JSON.stringify({ dataFile, port })], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => JSON.parse((await lines.next()).value);
  const stop = async () => {
    child.stdin.end();
    if (child.exitCode === null) await once(child, 'exit');
  };
  try {
    return {
      conn: await next(),
      ask: (command) => {
        child.stdin.write(`${command}\n`);
        return next();
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

function figures(label, load, stats) {
  const { meanInFlight, spanMs, maxInFlight } = stats.capacity;
  const settled = load.concurrency.settled;
  const reqPerSec = stats.requests / (spanMs / 1000);
  return {
    run: label,
    ...load,
    serverRequests: stats.requests,
    serverSpanSeconds: round(spanMs / 1000),
    serverMeanInFlight: meanInFlight,
    serverMaxInFlight: maxInFlight,
    reqPerSec: Math.round(reqPerSec),
    inFlightVsWindow: round(meanInFlight / settled),
    reqPerSecVsBound: round(reqPerSec / (settled / (LATENCY_MS / 1000))),
  };
}

/** Child: the sandbox (25 ms, no capacity limit) on `cfg.port` (0: any) over `cfg.dataFile`; `stats` on stdin → its counters. */
async function sandboxChild(cfg) {
  const { monitorEventLoopDelay } = await import('node:perf_hooks');
  const eld = monitorEventLoopDelay({ resolution: 1 });
  eld.enable();
  const dc = await import('node:diagnostics_channel');
  const hops = {};
  const epoch = () => performance.timeOrigin + performance.now();
  const open = new WeakMap();
  dc.subscribe('http.server.request.start', ({ request, socket }) => {
    const r = [epoch()];
    open.set(request, r);
    (hops[socket.remotePort] ??= []).push(r);
  });
  dc.subscribe('http.server.response.finish', ({ request }) => open.get(request)?.push(epoch()));
  const { startSandbox } = await import('../dist/sandbox/server.js');
  const sb = await startSandbox({
    tenants: ['bench'],
    observationsPerPatient: 0,
    dataFile: cfg.dataFile,
    port: cfg.port,
    faults: { latencyMs: LATENCY_MS },
    ...SERVER_PAGING,
  });
  const { apiKey, emrId } = sb.credentials;
  process.stdout.write(`${JSON.stringify({ baseUrl: sb.url, port: sb.port, apiKey, emrId, tenantId: 'bench' })}\n`);
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === 'stats') process.stdout.write(`${JSON.stringify(sb.stats())}\n`);
    if (line === 'timeline')
      process.stderr.write(
        `sandbox: ELU ${performance.eventLoopUtilization().utilization.toFixed(2)} since its start; loop delay p50 ${(eld.percentile(50) / 1e6).toFixed(1)} p90 ${(eld.percentile(90) / 1e6).toFixed(1)} p99 ${(eld.percentile(99) / 1e6).toFixed(1)} ms\n`,
      );
    if (line === 'timeline') process.stdout.write(`${JSON.stringify({ ...sb.capacityTimeline(), hops })}\n`);
  }
  await sb.close();
}

/** Child: one run through runPipeline (default flags; `pinned`: `--concurrency` at that window); prints one JSON line. */
async function loadChild(mappingFile, statePath, connJson, dist, pinned) {
  const { runPipeline } = await import(pathToFileURL(join(dist, 'pipeline', 'run-pipeline.js')).href);
  const { baseUrl, apiKey, emrId, tenantId } = JSON.parse(connJson);
  let firstWindow;
  let t0;
  const timeline = process.env.TIMELINE ? await clientTimeline() : undefined;
  /** [time, window] at each change the progress events show: how long the window stayed under where it settled. */
  const limits = [];
  let lastProgressAt;
  const cpu0 = process.cpuUsage();
  const report = await runPipeline({
    mappingFile,
    connection: { baseUrl, apiKey, emrId, tenantId },
    ...(pinned ? { concurrency: Number(pinned) } : {}),
    statePath,
    rejectsFile: join(mkdtempSync(join(dirname(statePath), 'rejects-')), 'rejects.ndjson'), // under the bench's root: removed with it
    env: {},
    onEvent(e) {
      if (e.type === 'progress' && firstWindow === undefined && e.limit !== undefined) firstWindow = e.limit;
      if (e.type === 'progress') lastProgressAt = performance.now();
      if (e.type === 'progress' && e.limit !== undefined && e.limit !== limits.at(-1)?.[1]) limits.push([lastProgressAt, e.limit]);
      timeline?.event(e);
      // TRACE=1: when each phase and listing starts and ends (ms since the first event), to see the gaps.
      if (process.env.TRACE && ['phase-start', 'phase-end', 'index'].includes(e.type)) {
        t0 ??= performance.now();
        const what = e.type === 'index' ? `${e.purpose ?? 'lookup'} listing ${e.build.resourceType} ${e.phase}` : `${e.mapping} ${e.type}`;
        process.stderr.write(`${Math.round(performance.now() - t0)} ms  ${what}\n`);
      }
    },
  });
  const t = report.totals;
  const cpu = process.cpuUsage(cpu0);
  // The client's CPU per request (the whole child: transform, ledger, HTTP): a starved client cannot fill a window.
  const clientCpuMsPerCreate = Math.round(((cpu.user + cpu.system) / 1000 / Math.max(1, t.created)) * 100) / 100;
  return {
    created: t.created,
    rejected: t.rejected,
    runSeconds: report.durationMs / 1000,
    clientCpuMsPerCreate,
    firstWindow,
    concurrency: report.concurrency,
    windowUnderSettled: underSettled(limits, report.concurrency?.settled, lastProgressAt),
    ...(timeline ? { timeline: timeline.done() } : {}),
  };
}

/**
 * Seconds the window spent under `settled` once it had reached it (the ramp left out) until the last progress event
 * (the run's busy time, as `settled` is), and the lowest it went then:
 * a run far below its usual share with these at zero lost its window in transit (the machine), not to the window.
 */
function underSettled(limits, settled, end) {
  const from = settled === undefined ? -1 : limits.findIndex(([, w]) => w >= settled);
  if (from < 0) return undefined; // never reached: nothing to tell
  let ms = 0;
  let lowest = settled;
  for (let i = from; i < limits.length; i++) {
    const [t, w] = limits[i];
    if (w < settled) ms += (limits[i + 1]?.[0] ?? end) - t;
    lowest = Math.min(lowest, w);
  }
  return { seconds: round(ms / 1000), lowest };
}

/**
 * TIMELINE=1: the client's side of the picture, on the epoch clock — HTTP requests in flight (undici's diagnostics
 * channels: created → trailers or error) per 100 ms bucket, the window of the progress events, and when each phase
 * and listing started and ended.
 */
async function clientTimeline() {
  const dc = await import('node:diagnostics_channel');
  const { monitorEventLoopDelay } = await import('node:perf_hooks');
  const BUCKET = 100;
  const epoch = () => performance.timeOrigin + performance.now();
  const start = epoch();
  const area = [];
  const limit = [];
  const spans = [];
  const open = new Map();
  let n = 0;
  let at = start;
  const mark = () => {
    const t = epoch();
    for (let from = at - start; from < t - start;) {
      const i = Math.floor(from / BUCKET);
      const end = Math.min(t - start, (i + 1) * BUCKET);
      area[i] = (area[i] ?? 0) + n * (end - from);
      from = end;
    }
    at = t;
  };
  const elu0 = performance.eventLoopUtilization();
  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  loopDelay.enable();
  // Per connection (local port), each request's hops on the epoch clock: created, headers written, answer's headers, answer's end;
  // and the client's CPU time from its creation to its write (the work that held it back, whatever else runs on the machine).
  const hops = {};
  const rec = new WeakMap();
  const cpuBeforeWrite = [];
  const cpuNow = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  dc.subscribe('undici:request:create', ({ request }) => {
    mark();
    n++;
    rec.set(request, { at: [epoch()], cpu: cpuNow() });
  });
  dc.subscribe('undici:client:sendHeaders', ({ request, socket }) => {
    const r = rec.get(request);
    cpuBeforeWrite.push(cpuNow() - r.cpu);
    r.at.push(epoch());
    (hops[socket.localPort] ??= []).push(r.at);
  });
  dc.subscribe('undici:request:headers', ({ request }) => rec.get(request)?.at.push(epoch()));
  dc.subscribe('undici:request:trailers', ({ request }) => {
    mark();
    n--;
    rec.get(request)?.at.push(epoch());
  });
  dc.subscribe('undici:request:error', () => (mark(), n--));
  const ms = (ns) => (ns / 1e6).toFixed(1);
  return {
    event(e) {
      if (e.type === 'progress' && e.limit !== undefined) limit[Math.floor((epoch() - start) / BUCKET)] = e.limit;
      const what =
        e.type === 'index' ? `${e.purpose ?? 'lookup'} listing ${e.build.resourceType}` : e.type.startsWith('phase-') ? `load ${e.mapping}` : undefined;
      if (!what) return;
      // A listing by its build (a re-read may run alongside the listing it reads again: two spans of one name).
      const id = e.type === 'index' ? e.build : what;
      if (e.phase === 'start' || e.type === 'phase-start') open.set(id, epoch());
      else if (open.has(id)) {
        spans.push({ what, from: Math.round(open.get(id)), to: Math.round(epoch()) });
        open.delete(id);
      }
    },
    done() {
      mark();
      const elu = performance.eventLoopUtilization(elu0).utilization;
      const cpu = [...cpuBeforeWrite].sort((a, b) => a - b);
      process.stderr.write(
        `client: ELU ${elu.toFixed(2)}; loop delay p50 ${ms(loopDelay.percentile(50))} p90 ${ms(loopDelay.percentile(90))} p99 ${ms(loopDelay.percentile(99))} ms; ` +
          `CPU from a request's creation to its write: mean ${(cpu.reduce((a, b) => a + b, 0) / cpu.length).toFixed(2)} p50 ${cpu[cpu.length >> 1].toFixed(2)} p90 ${cpu[Math.floor(cpu.length * 0.9)].toFixed(2)} ms\n`,
      );
      return { hops, startEpochMs: Math.round(start), bucketMs: BUCKET, inFlight: area.map((a) => Math.round(((a ?? 0) / BUCKET) * 10) / 10), limit, spans };
    },
  };
}

/**
 * Where the server's in-flight went (TIMELINE=1): per 100 ms bucket of the server's span, the window unused
 * (settled − served at once), attributed to what the client was doing then.
 */
function breakdown(server, load, stats) {
  const settled = load.concurrency.settled;
  const c = load.timeline;
  const shift = Math.round((server.startEpochMs - c.startEpochMs) / c.bucketMs); // client bucket of server bucket 0
  const lost = {};
  let lim;
  let reached = false;
  const rows = [];
  server.meanInFlight.forEach((s, i) => {
    const tEpoch = server.startEpochMs + (i + 0.5) * server.bucketMs;
    const active = c.spans.filter((x) => x.from <= tEpoch && tEpoch < x.to).map((x) => x.what);
    lim = c.limit[i + shift] ?? lim;
    if (lim !== undefined && lim >= settled) reached = true;
    const client = c.inFlight[i + shift] ?? 0;
    const gap = Math.max(0, settled - s);
    const loads = active.filter((a) => a.startsWith('load'));
    let cause;
    if (!loads.length)
      cause = active.some((a) => a.startsWith('verify')) ? 'verify listings only' : active.length ? 'pre-create listings only' : 'nothing running';
    else if (!reached) cause = 'ramp';
    else if (active.some((a) => a.includes('listing'))) cause = 'loads + a listing';
    else cause = 'loads only';
    // The gap split: window below settled | the window not filled by the client | sent, not yet (or no longer) at the server.
    const w = Math.min(settled, lim ?? settled);
    const parts = [settled - w, Math.max(0, w - Math.max(client, s)), Math.max(0, Math.min(w, client) - s)];
    const k = parts.reduce((a, b) => a + b, 0);
    const scale = k > 0 ? gap / k : 0;
    lost[cause] ??= [0, 0, 0, 0];
    lost[cause][0] += 1;
    parts.forEach((p, j) => (lost[cause][j + 1] += p * scale));
    if (process.env.TIMELINE === 'rows' && i % Number(process.env.TIMELINE_EVERY ?? 5) === 0)
      rows.push(
        `${String(i * 100).padStart(6)} ms  server ${s.toFixed(1).padStart(5)}  client ${client.toFixed(1).padStart(5)}  limit ${lim ?? '-'}  ${active.join(', ')}`,
      );
  });
  const total = settled * server.meanInFlight.length;
  const d = { queuedInClient: [], requestTransit: [], atServer: [], answerTransit: [], answerRead: [] };
  for (const [port, list] of Object.entries(c.hops)) {
    const sv = server.hops[port] ?? [];
    list.forEach((r, i) => {
      const v = sv[i];
      if (!v || r.length < 4 || v.length < 2) return;
      d.queuedInClient.push(r[1] - r[0]);
      d.requestTransit.push(v[0] - r[1]);
      d.atServer.push(v[1] - v[0]);
      d.answerTransit.push(r[2] - v[1]);
      d.answerRead.push(r[3] - r[2]);
    });
  }
  const hopLine = Object.entries(d).map(([k, xs]) => {
    xs.sort((a, b) => a - b);
    const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
    return `  ${k.padEnd(16)} mean ${mean.toFixed(2)}  p50 ${xs[xs.length >> 1]?.toFixed(2)}  p90 ${xs[Math.floor(xs.length * 0.9)]?.toFixed(2)} ms`;
  });
  const pct = (v) => `${((v / total) * 100).toFixed(1).padStart(5)} %`;
  const lines = Object.entries(lost).map(
    ([k, [n, a, b, c2]]) =>
      `  ${k.padEnd(26)} ${(n / 10).toFixed(1).padStart(5)} s  lost ${pct(a + b + c2)} = window<settled ${pct(a)} + client under-fill ${pct(b)} + sent, not at server ${pct(c2)}`,
  );
  const spans = c.spans.map(
    (x) => `  ${x.what}: ${((x.from - server.startEpochMs) / 1000).toFixed(2)} → ${((x.to - server.startEpochMs) / 1000).toFixed(2)} s`,
  );
  // Phase boundaries: around each load that starts after the run's first ones (care teams after patients), the time
  // the server held under a quarter of the window, from its 10 ms buckets (each request's span at the server).
  const atServer = Object.values(server.hops)
    .flat()
    .filter((r) => r.length >= 2);
  const served = (from) => atServer.reduce((a, r) => a + Math.max(0, Math.min(from + 10, r[1]) - Math.max(from, r[0])), 0) / 10;
  const firstLoad = Math.min(...c.spans.filter((x) => x.what.startsWith('load')).map((x) => x.from));
  const boundaries = c.spans
    .filter((x) => x.what.startsWith('load') && x.from > firstLoad + 100)
    .map((x) => {
      let from = x.from;
      let to = x.from;
      while (from > x.from - 1000 && served(from - 10) < settled / 4) from -= 10;
      while (to < x.from + 1000 && served(to) < settled / 4) to += 10;
      return `  ${x.what} starts: the server under ${settled / 4} in flight for ${to - from} ms (${from - x.from} → +${to - x.from} ms around its start, 10 ms buckets)`;
    });
  return [
    ...rows,
    `per request (${d.atServer.length} matched by connection, ${Object.keys(c.hops).length} sockets):`,
    ...hopLine,
    `settled ${settled}, server mean ${stats.capacity.meanInFlight}, span ${(stats.capacity.spanMs / 1000).toFixed(1)} s; window lost (% of settled × span):`,
    ...lines,
    'spans (s from the first request):',
    ...spans,
    'phase boundaries:',
    ...boundaries,
  ].join('\n');
}

const [, , mode, ...args] = process.argv;
if (mode === '--sandbox') await sandboxChild(JSON.parse(args[0]));
else if (mode === '--load') process.stdout.write(`${JSON.stringify(await loadChild(...args))}\n`);
else await main();
