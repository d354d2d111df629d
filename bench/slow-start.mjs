// The start of a fresh run (issue 28 item 1, the ramp's share of the window): runPipeline loads a small three-type
// mapping (N patients, 50 practitioners, 2N care teams; as bench/run-window.mjs) into an empty sandbox tenant with
// 25 ms latency and no capacity limit, default flags (window discovered from 4 up to 32), no state. Per run, from the
// client's requests (undici's diagnostics channels, ms from its first request — the credentials check):
//   firstCreateMs   the first create (before it: the check, the state, the listings, the first rows' transform)
//   rampMs          first create → the ceiling (32) in flight for the first time: the slow start
//   lostSlotSeconds the window not used up to then: ∫ (32 − requests in flight) dt from the first request
// Each run is a fresh sandbox child and a fresh load child (a process's first requests cost more than later ones).
// Usage: npm run build && node bench/slow-start.mjs [rounds] [N]   (default 7 rounds, N = 300)
//   BASELINE_DIST=<another build>/dist: that build's runs alternate with this one's (same fixture, same machine
//   minutes), and `baseline` gives its medians and the ratios this / baseline of the medians.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { HEADER, loadAvg, median, patientRow, runJsonChild, startSandboxProcess, THREE_TYPE_MAPPING as MAPPING } from './_patients-fixture.mjs';

const self = fileURLToPath(import.meta.url);
const PRACTITIONERS = 50;
const CEILING = 32; // AdaptiveLimiter.DEFAULT_MAX_CONCURRENCY

function writeFixture(dir, n) {
  writeFileSync(join(dir, 'mapping.yaml'), MAPPING);
  let staff = 'NPI,FIRST,LAST\n';
  for (let i = 1; i <= PRACTITIONERS; i++) staff += `${1000000000 + i},Pat${i},Clinician${i}\n`;
  let p = `${HEADER.join(',')}\n`;
  let t = 'TEAM,MRN,NPI\n';
  for (let i = 1; i <= n; i++) {
    const row = patientRow(i);
    p += `${row.join(',')}\n`;
    for (const k of ['a', 'b']) t += `${row[0]}-${k},${row[0]},${1000000000 + 1 + ((i * (k === 'a' ? 7 : 13)) % PRACTITIONERS)}\n`;
  }
  writeFileSync(join(dir, 'practitioners.csv'), staff);
  writeFileSync(join(dir, 'patients.csv'), p);
  writeFileSync(join(dir, 'teams.csv'), t);
  return join(dir, 'mapping.yaml');
}

/** Child: one fresh run through runPipeline from `dist`; prints its start figures as one JSON line. */
async function loadChild(mappingFile, connJson, dist) {
  const dc = await import('node:diagnostics_channel');
  const { runPipeline } = await import(pathToFileURL(join(dist, 'pipeline', 'run-pipeline.js')).href);
  let t0;
  let inFlight = 0;
  let firstCreate;
  let reached;
  let lost = 0; // slot-ms
  let at;
  const mark = () => {
    const t = performance.now();
    if (t0 !== undefined && reached === undefined) lost += (CEILING - inFlight) * (t - at);
    at = t;
  };
  dc.subscribe('undici:request:create', ({ request }) => {
    if (t0 === undefined) at = t0 = performance.now();
    mark();
    inFlight++;
    if (request.method === 'POST') firstCreate ??= at - t0;
    if (inFlight >= CEILING) reached ??= at - t0;
  });
  const done = () => (mark(), inFlight--);
  dc.subscribe('undici:request:trailers', done);
  dc.subscribe('undici:request:error', done);
  const dir = dirname(mappingFile);
  const state = mkdtempSync(join(os.tmpdir(), 'care-etl-bench-slow-start-'));
  try {
    const report = await runPipeline({
      mappingFile,
      connection: JSON.parse(connJson),
      statePath: join(state, 'state.db'),
      rejectsFile: join(state, 'rejects.ndjson'),
      env: {},
    });
    const r1 = (x) => Math.round(x * 10) / 10;
    return {
      created: report.totals.created,
      rejected: report.totals.rejected,
      started: report.concurrency?.started,
      firstCreateMs: r1(firstCreate),
      rampMs: reached === undefined ? null : r1(reached - firstCreate),
      lostSlotSeconds: Math.round(lost) / 1000,
      dir,
    };
  } finally {
    rmSync(state, { recursive: true, force: true });
  }
}

async function main() {
  const rounds = Number(process.argv[2] ?? 7);
  const n = Number(process.argv[3] ?? 300);
  const builds = [{ label: 'this build', dist: join(dirname(self), '..', 'dist') }];
  if (process.env.BASELINE_DIST) builds.push({ label: 'baseline', dist: resolve(process.env.BASELINE_DIST) });
  const root = mkdtempSync(join(os.tmpdir(), 'care-etl-bench-slow-start-'));
  const runs = builds.map(() => []);
  const loadBefore = loadAvg();
  try {
    const mappingFile = writeFixture(root, n);
    for (let r = 0; r < rounds; r++) {
      // Alternate which build goes first: a machine getting busier or quieter favours neither.
      const order = r % 2 ? [...builds.keys()].reverse() : [...builds.keys()];
      for (const i of order) {
        const sb = await startSandboxProcess(25);
        try {
          const run = await runJsonChild([self, '--load', mappingFile, JSON.stringify(sb.connection), builds[i].dist]);
          delete run.dir;
          runs[i].push(run);
          process.stderr.write(`${builds[i].label}: ${JSON.stringify(run)}\n`);
        } finally {
          await sb.stop();
        }
      }
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  const medians = (list) => ({
    firstCreateMs: median(list.map((x) => x.firstCreateMs)),
    rampMs: median(list.map((x) => x.rampMs ?? Infinity)),
    lostSlotSeconds: median(list.map((x) => x.lostSlotSeconds)),
  });
  const mine = medians(runs[0]);
  const base = runs[1] && medians(runs[1]);
  const ratio = (k) => Math.round((mine[k] / base[k]) * 100) / 100;
  const result = {
    bench: 'slow-start',
    rounds,
    patients: n,
    latencyMs: 25,
    ceiling: CEILING,
    ...mine,
    startedFrom: [...new Set(runs[0].map((x) => x.started))],
    ...(base
      ? {
          baseline: {
            dist: builds[1].dist,
            ...base,
            ratios: { firstCreateMs: ratio('firstCreateMs'), rampMs: ratio('rampMs'), lostSlotSeconds: ratio('lostSlotSeconds') },
          },
        }
      : {}),
    loadAvg1m: [loadBefore[0], loadAvg()[0]],
    node: process.version,
    cpus: os.cpus().length,
  };
  result.pass = runs.flat().every((x) => x.rejected === 0 && x.created === n * 3 + PRACTITIONERS);
  if (!result.pass) process.exitCode = 1;
  console.log(JSON.stringify(result));
}

if (process.argv[2] === '--load') console.log(JSON.stringify(await loadChild(process.argv[3], process.argv[4], process.argv[5])));
else await main();
