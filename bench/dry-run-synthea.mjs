// Dry run of the shipped Synthea CSV mapping (mappings/synthea: function definitions, a regex, $map / $filter / $each,
// $fromMillis / $toMillis, a grouped care team) with its expressions compiled to JS (issue 28 item 4) vs JSONata's
// interpreter alone (CARE_JSONATA_COMPILE=0: "today" before the compiler took lambdas and regexes), on the bundled
// Synthea 3.0.0 sample replicated COPIES times with fresh ids (27 patients, 166 providers, 604 encounters a copy).
//   compiled     runPipeline({ dryRun: true }) as shipped
//   interpreter  the same with CARE_JSONATA_COMPILE=0
//   eval-compiled / eval-interpreter   the mapping's expressions alone: key, groupBy and map of every resource over
//                rows read beforehand (in memory, grouped as the pipeline groups them), to tell the expressions' share
//                from the rest of the per-row pipeline (CSV reading, lookups, validation, NDJSON)
// Each pair runs back to back in every round (order alternating), each run in a fresh child process;
// `compiledVsInterpreter` / `evaluationCompiledVsInterpreter` are compiled / interpreter per round ([min, max]) and of
// the medians; rows = source rows read (all three files). Every round checks the two dry runs' NDJSON files
// byte-identical (`outputIdentical`) and that no row was rejected.
// Usage: npm run build && node bench/dry-run-synthea.mjs [COPIES] [ROUNDS]   (default 60 copies ≈ 48k rows, 3 rounds;
// CPU_PROF=compiled,eval-compiled also profiles one child of each listed mode with --cpu-prof and prints its top
// self-time functions to stderr; BASELINE_DIST=<dir> adds `baseline`: runPipeline from another build's dist/ — e.g.
// the commit before issue 28 — in the same rounds, its NDJSON checked byte-identical too: `compiledVsBaseline`; and
// the pair `read` / `read-baseline`: the three CSV files read through openSource alone, `readVsBaseline`)
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { loadAvg, median, profileChild } from './_patients-fixture.mjs';

const self = fileURLToPath(import.meta.url);
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SAMPLE = join(ROOT, 'mappings/synthea/sample');
const FILES = ['patients.csv', 'providers.csv', 'encounters.csv'];
const BASELINE_DIST = process.env.BASELINE_DIST;
const PAIRS = [
  BASELINE_DIST ? ['compiled', 'interpreter', 'baseline'] : ['compiled', 'interpreter'],
  ['eval-compiled', 'eval-interpreter'],
  ...(BASELINE_DIST ? [['read', 'read-baseline']] : []),
];

/** Synthea's ids are UUIDs: copy k gets the same ones with their first 8 hex digits replaced (consistent across files). */
function replicate(dir, copies) {
  let rows = 0;
  for (const file of FILES) {
    const [header, ...lines] = readFileSync(join(SAMPLE, file), 'utf8').trimEnd().split('\n');
    const out = [header];
    for (let k = 0; k < copies; k++) {
      const prefix = k.toString(16).padStart(8, '0');
      for (const line of lines) out.push(line.replace(/\b[0-9a-f]{8}(-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b/g, `${prefix}$1`));
    }
    rows += out.length - 1;
    writeFileSync(join(dir, file), `${out.join('\n')}\n`);
  }
  return rows;
}

function main() {
  const COPIES = Number(process.argv[2] ?? process.env.COPIES ?? 60);
  const ROUNDS = Number(process.argv[3] ?? process.env.ROUNDS ?? 3);
  const loadBefore = loadAvg();
  const dir = mkdtempSync(join(os.tmpdir(), 'care-etl-bench-synthea-'));
  try {
    const rows = replicate(dir, COPIES);
    const wall = Object.fromEntries(PAIRS.flat().map((m) => [m, []]));
    const cpu = Object.fromEntries(PAIRS.flat().map((m) => [m, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const mode of PAIRS.flatMap((p) => (round % 2 === 0 ? p : [...p].reverse()))) {
        const r = spawnChild(mode, dir);
        if (r.read !== rows) throw new Error(`${mode}: read ${r.read} rows of ${rows}`);
        wall[mode].push(r.rowsPerSec);
        cpu[mode].push(r.rowsPerCpuSec);
      }
      const [a, ...others] = PAIRS[0].map((m) => digestOf(join(dir, `out-${m}`)));
      if (others.some((o) => o !== a)) throw new Error(`round ${round + 1}: the dry runs (${PAIRS[0].join(', ')}) wrote different NDJSON`);
    }
    for (const m of (process.env.CPU_PROF ?? '').split(',').filter(Boolean)) profile(m === '1' ? 'compiled' : m, dir);
    const ratio = (x, y) => Math.round((x / y) * 100) / 100;
    const compare = (x, y) => {
      const range = (o) => {
        const r = o[x].map((v, i) => ratio(v, o[y][i]));
        return [Math.min(...r), Math.max(...r)];
      };
      return { wall: range(wall), cpu: range(cpu), medianWall: ratio(median(wall[x]), median(wall[y])), medianCpu: ratio(median(cpu[x]), median(cpu[y])) };
    };
    const med = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, Math.round(median(v))]));
    console.log(
      JSON.stringify({
        bench: 'dry-run-synthea',
        copies: COPIES,
        rows,
        rounds: ROUNDS,
        rowsPerSec: wall,
        rowsPerCpuSec: cpu,
        medianRowsPerSec: med(wall),
        compiledVsInterpreter: compare('compiled', 'interpreter'),
        evaluationCompiledVsInterpreter: compare('eval-compiled', 'eval-interpreter'),
        ...(BASELINE_DIST
          ? { compiledVsBaseline: compare('compiled', 'baseline'), readVsBaseline: compare('read', 'read-baseline'), baselineDist: BASELINE_DIST }
          : {}),
        outputIdentical: true,
        loadAvg1m: [loadBefore[0], loadAvg()[0]],
        node: process.version,
        cpus: os.cpus().length,
      }),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One digest over every NDJSON file the dry run wrote (name and bytes). */
function digestOf(outDir) {
  const h = createHash('sha256');
  for (const f of readdirSync(outDir).sort()) h.update(`${f}\n`).update(readFileSync(join(outDir, f)));
  return h.digest('hex');
}

/** One extra child of `mode` under --cpu-prof; prints its top self-time functions (stderr). */
function profile(mode, dir) {
  profileChild(mode, (nodeArgs) => spawnChild(mode, dir, nodeArgs));
}

function spawnChild(mode, dir, nodeFlags = []) {
  const r = spawnSync(process.execPath, [...nodeFlags, self, '--child', mode, dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (r.status !== 0) throw new Error(`${mode} child failed (${r.status})`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

async function child(mode, dir) {
  if (mode.endsWith('interpreter')) process.env.CARE_JSONATA_COMPILE = '0';
  if (mode.startsWith('eval-')) return evaluation(mode, dir);
  if (mode.startsWith('read')) return readOnly(mode, dir);
  const dist = mode === 'baseline' ? pathToFileURL(`${resolve(BASELINE_DIST)}/`).href : new URL('../dist/', import.meta.url).href;
  const { runPipeline } = await import(`${dist}pipeline/run-pipeline.js`);
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const report = await runPipeline({
    mappingFile: join(ROOT, 'mappings/synthea/mapping.yaml'),
    dryRun: true,
    outDir: join(dir, `out-${mode}`),
    rejectsFile: join(dir, `rejects-${mode}.ndjson`),
    statePath: join(dir, `state-${mode}.db`),
    env: { SYNTHEA_CSV_DIR: dir },
  });
  const seconds = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  const cpuSeconds = (c.user + c.system) / 1e6;
  const t = report.totals;
  if (t.rejected) throw new Error(`${mode}: ${t.rejected} rows rejected (${report.rejectsFile})`);
  return {
    mode,
    read: t.read,
    written: t.written,
    seconds,
    rowsPerSec: Math.round(t.read / seconds),
    cpuSeconds,
    rowsPerCpuSec: Math.round(t.read / cpuSeconds),
  };
}

/** Key, groupBy and map of every resource over the rows of its source, read (and grouped) beforehand. */
async function evaluation(mode, dir) {
  const { loadMapping } = await import('../dist/mapping/load-mapping.js');
  const { compileMapping } = await import('../dist/mapping/compile-mapping.js');
  const { openSource } = await import('../dist/sources/open-source.js');
  const mapping = await loadMapping(join(ROOT, 'mappings/synthea/mapping.yaml'), { env: { SYNTHEA_CSV_DIR: dir } });
  const compiled = compileMapping(mapping);
  const ctx = { now: new Date(), resolveRef: (name, key) => `${name}/${key}` };
  const inputs = [];
  for (const name of compiled.order) {
    const res = compiled.resources.get(name);
    const rows = [];
    for await (const item of openSource(mapping.sources[res.def.from])) if (item.ok) rows.push(item.data);
    inputs.push({ res, rows });
  }
  // As the pipeline calls them (transform-source.ts): keyNow / mapNow, awaited only when they answer a promise
  // (evalKey / evalMap: a build before them).
  const keyOf = (res, row) => (res.keyNow ? res.keyNow(row) : res.evalKey(row));
  const mapOf = (res, input) => (res.mapNow ? res.mapNow(input, ctx) : res.evalMap(input, ctx));
  let read = 0;
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  for (const { res, rows } of inputs) {
    read += rows.length;
    if (!res.evalGroupKey) {
      for (const row of rows) {
        let key = keyOf(res, row);
        if (key instanceof Promise) key = await key;
        let resource = key ? mapOf(res, row) : null;
        if (resource instanceof Promise) resource = await resource;
        if (key && resource === undefined) throw new Error('no resource');
      }
      continue;
    }
    const groups = new Map();
    for (const row of rows) {
      const key = await res.evalGroupKey(row);
      const group = groups.get(key);
      if (group) group.push(row);
      else groups.set(key, [row]);
    }
    for (const group of groups.values()) {
      let resource = mapOf(res, group);
      if (resource instanceof Promise) resource = await resource;
      if (resource === undefined) throw new Error('no resource');
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  const cpuSeconds = (c.user + c.system) / 1e6;
  return { mode, read, seconds, rowsPerSec: Math.round(read / seconds), cpuSeconds, rowsPerCpuSec: Math.round(read / cpuSeconds) };
}

/** The three CSV sources read (openSource), nothing else: the CSV reader's share, this build vs BASELINE_DIST's. */
async function readOnly(mode, dir) {
  const dist = mode === 'read-baseline' ? pathToFileURL(`${resolve(BASELINE_DIST)}/`).href : new URL('../dist/', import.meta.url).href;
  const { openSource } = await import(`${dist}sources/open-source.js`);
  let read = 0;
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  for (const file of FILES) {
    for await (const item of openSource({ name: file, path: join(dir, file) })) {
      if (!item.ok) throw new Error(`${mode}: ${file} line ${item.origin.line} rejected`);
      read++;
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  const cpuSeconds = (c.user + c.system) / 1e6;
  return { mode, read, seconds, rowsPerSec: Math.round(read / seconds), cpuSeconds, rowsPerCpuSec: Math.round(read / cpuSeconds) };
}

if (process.argv[2] === '--child') {
  child(process.argv[3], process.argv[4]).then(
    (r) => console.log(JSON.stringify(r)),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
} else {
  main();
}
