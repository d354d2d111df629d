// `$ref` look-ups (issue 28, session 32 part P): CPU per `LedgerScope.serverIdOf` call under the run lease, asked in
// the order bench/run-window.mjs's care teams ask them — two care teams per patient (5,000), each referring to its
// patient and to one of 50 practitioners. Three rounds; BASELINE_DIST=<another build>/dist alternates that build's
// ledger with this one's in every round (the ratio measured in one run).
// Usage: npm run build && node bench/ref-lookups.mjs
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { loadAvg, median } from './_patients-fixture.mjs';

const PATIENTS = 5000;
const PRACTITIONERS = 50;
const here = dirname(fileURLToPath(import.meta.url));
const dists = [join(here, '..', 'dist'), ...(process.env.BASELINE_DIST ? [resolve(process.env.BASELINE_DIST)] : [])];

/** µs of CPU per `$ref` look-up with `dist`'s ledger. */
async function round(dist) {
  const { Ledger } = await import(pathToFileURL(join(dist, 'state', 'ledger.js')).href);
  const { acquireLease } = await import(pathToFileURL(join(dist, 'state', 'lease.js')).href);
  const dir = mkdtempSync(join(os.tmpdir(), 'care-etl-bench-refs-'));
  const ledger = Ledger.open(join(dir, 'state.db'));
  try {
    const scope = ledger.scope('http://127.0.0.1:1', 'bench');
    const lease = await acquireLease(ledger, ledger.scopeIdOf(scope));
    const runId = scope.beginRun({ mappingFile: 'mapping.yaml', dryRun: false });
    const synced = [];
    for (let i = 1; i <= PATIENTS; i++) synced.push({ mapping: 'patient', key: `MRN${i}`, resourceType: 'Patient', serverId: `p-${i}`, hash: 'h', runId });
    for (let j = 1; j <= PRACTITIONERS; j++)
      synced.push({ mapping: 'practitioner', key: `NPI${j}`, resourceType: 'Practitioner', serverId: `n-${j}`, hash: 'h', runId });
    for (let i = 0; i < synced.length; i += 256) scope.recordBatch([], synced.slice(i, i + 256));
    const cpu0 = process.cpuUsage();
    let found = 0;
    for (let i = 1; i <= PATIENTS; i++)
      for (const k of [7, 13]) {
        if (scope.serverIdOf('patient', `MRN${i}`)) found++;
        if (scope.serverIdOf('practitioner', `NPI${1 + ((i * k) % PRACTITIONERS)}`)) found++;
      }
    const cpu = process.cpuUsage(cpu0);
    if (found !== 4 * PATIENTS) throw new Error(`${found} of ${4 * PATIENTS} references resolved`);
    lease.release();
    return (cpu.user + cpu.system) / (4 * PATIENTS);
  } finally {
    ledger.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const us = dists.map(() => []);
for (let r = 0; r < 3; r++) for (const [i, dist] of dists.entries()) us[i].push(Math.round((await round(dist)) * 100) / 100);
const result = { bench: 'ref-lookups', refs: 4 * PATIENTS, cpuUsPerRef: us[0], medianCpuUsPerRef: median(us[0]) };
if (us[1])
  Object.assign(result, { baselineDist: dists[1], baselineCpuUsPerRef: us[1], medianRatioToBaseline: Math.round((median(us[0]) / median(us[1])) * 100) / 100 });
console.log(JSON.stringify({ ...result, loadAvg1m: loadAvg(), node: process.version }));
