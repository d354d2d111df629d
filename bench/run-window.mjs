// The window used across the whole run (issue 28 item 1): runPipeline loads a full three-type mapping — N patients,
// 50 practitioners, 2N care teams (each referring to a patient and a practitioner with `$ref`) — into a sandbox with
// 25 ms latency and no capacity limit, default flags (the window discovered, verify-after-load `auto`).
// Figures, from the server's own counters over the WHOLE run (first request admitted → last answered, listings and
// phase changes included):
//   meanInFlight / settled window   (target ≥ 0.9)   — `stats().capacity.meanInFlight`, the report's `concurrency.settled`
//   req/s / (settled / latency)      (target ≥ 0.8)
// Then a second run of the same target (same server URL and tenant, same state; N new patients and their care teams)
// shows the remembered window: `firstWindow` is the window of its first progress event (the first run starts at 4).
// Processes: this one orchestrates; the sandbox is a child (`--sandbox`, a SQLite data file so that it is restarted on
// the same port between the runs: per-run server counters); each load is a child (`--load`, runPipeline from dist/).
// Usage: npm run build && node bench/run-window.mjs [N]   (default 5000: ~15k requests; env N works too)
// Exits 1 when a target is missed (the figures are printed all the same) or a row was rejected.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { HEADER, loadAvg, PATIENT_MAP, patientRow, runJsonChild } from './_patients-fixture.mjs';

const self = fileURLToPath(import.meta.url);
const LATENCY_MS = 25;
const PRACTITIONERS = 50;

const indent = (s) =>
  s
    .split('\n')
    .map((l) => `      ${l}`)
    .join('\n');

const MAPPING = `version: 1
sources:
  patients: { path: patients.csv }
  staff: { path: practitioners.csv }
  teams: { path: teams.csv }
lookups:
  gender: { M: male, F: female, U: unknown }
resources:
  - name: patient
    type: Patient
    from: patients
    key: MRN
    map: |
${indent(PATIENT_MAP)}
  - name: practitioner
    type: Practitioner
    from: staff
    key: NPI
    map: |
      { "identifier": [{ "system": "http://hl7.org/fhir/sid/us-npi", "value": NPI }], "active": true, "name": [{ "family": LAST, "given": [FIRST] }] }
  - name: careteam
    type: CareTeam
    from: teams
    key: TEAM
    match: name
    map: |
      {
        "status": "active",
        "name": "Care team " & TEAM,
        "subject": { "reference": $ref("patient", MRN) },
        "participant": [{ "member": { "reference": $ref("practitioner", NPI) } }]
      }
`;

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
  const runs = [];
  try {
    const first = await writeFixture(mkdtempSync(join(root, 'a-')), 1, N);
    const second = await writeFixture(mkdtempSync(join(root, 'b-')), N + 1, N);
    const dataFile = join(root, 'sandbox.db');
    const statePath = join(root, 'state.db');
    let port = 0;
    for (const [label, mapping] of [
      ['first', first],
      ['second (same target)', second],
    ]) {
      const sb = spawn(process.execPath, [self, '--sandbox', JSON.stringify({ dataFile, port })], { stdio: ['pipe', 'pipe', 'inherit'] });
      const lines = createInterface({ input: sb.stdout })[Symbol.asyncIterator]();
      try {
        const conn = JSON.parse((await lines.next()).value);
        port = conn.port;
        const load = await runJsonChild([self, '--load', mapping, statePath, JSON.stringify(conn)]);
        sb.stdin.write('stats\n');
        const stats = JSON.parse((await lines.next()).value);
        runs.push(figures(label, load, stats));
        process.stderr.write(`${label}: ${JSON.stringify(runs.at(-1))}\n`);
      } finally {
        sb.stdin.end();
        if (sb.exitCode === null) await once(sb, 'exit');
      }
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  const [a, b] = runs;
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
    runs,
    loadAvg1m: loadAvg(),
    node: process.version,
    cpus: os.cpus().length,
  };
  result.pass = runs.every((r) => r.inFlightVsWindow >= 0.9 && r.reqPerSecVsBound >= 0.8 && r.rejected === 0);
  if (!result.pass) process.exitCode = 1;
  console.log(JSON.stringify(result));
}

const round = (x) => Math.round(x * 100) / 100;

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
  const { startSandbox } = await import('../dist/sandbox/server.js');
  const sb = await startSandbox({ tenants: ['bench'], observationsPerPatient: 0, dataFile: cfg.dataFile, port: cfg.port, faults: { latencyMs: LATENCY_MS } });
  const { apiKey, emrId } = sb.credentials;
  process.stdout.write(`${JSON.stringify({ baseUrl: sb.url, port: sb.port, apiKey, emrId, tenantId: 'bench' })}\n`);
  for await (const line of createInterface({ input: process.stdin })) if (line === 'stats') process.stdout.write(`${JSON.stringify(sb.stats())}\n`);
  await sb.close();
}

/** Child: one run through runPipeline (default flags); prints one JSON line. */
async function loadChild(mappingFile, statePath, connJson) {
  const { runPipeline } = await import('../dist/pipeline/run-pipeline.js');
  const { baseUrl, apiKey, emrId, tenantId } = JSON.parse(connJson);
  let firstWindow;
  let t0;
  const cpu0 = process.cpuUsage();
  const report = await runPipeline({
    mappingFile,
    connection: { baseUrl, apiKey, emrId, tenantId },
    statePath,
    rejectsFile: join(mkdtempSync(join(os.tmpdir(), 'care-etl-bench-window-rejects-')), 'rejects.ndjson'),
    env: {},
    onEvent(e) {
      if (e.type === 'progress' && firstWindow === undefined && e.limit !== undefined) firstWindow = e.limit;
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
  return { created: t.created, rejected: t.rejected, runSeconds: report.durationMs / 1000, clientCpuMsPerCreate, firstWindow, concurrency: report.concurrency };
}

const [, , mode, ...args] = process.argv;
if (mode === '--sandbox') await sandboxChild(JSON.parse(args[0]));
else if (mode === '--load') process.stdout.write(`${JSON.stringify(await loadChild(...args))}\n`);
else await main();
