// Peak memory of a dry run (issue 3): runPipeline({ dryRun: true }) on generated patient CSVs of 100,000 and
// 1,000,000 rows, each in a fresh child process. The child reports `process.resourceUsage().maxRSS` at the end,
// peaks of rss / heap / external sampled every 50 ms, and the *live* heap (after a forced GC) at 90 % of the
// rows — what the run really holds, as opposed to garbage not yet collected.
// A third child measures what the per-key collections cost at 1M keys: transformSource keeps a Map key → line
// (duplicate detection) and, in a dry run, runPhases keeps a Set of loaded keys (for `$ref`).
// Usage: npm run build && node bench/dry-run-memory.mjs [ROWS,ROWS...] [ROUNDS]   (default 100000,1000000 and 1;
// CHILD_FLAGS="--max-old-space-size=200" passes node flags to the pipeline children; the pipeline runs as shipped,
// expressions compiled to JS — CARE_JSONATA_COMPILE=0 measures the interpreter-only previous version)
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadAvg, makePatientFixture } from './_patients-fixture.mjs';

const self = fileURLToPath(import.meta.url);
const MB = 1024 * 1024;
const mb = (bytes) => Math.round((bytes / MB) * 10) / 10;

async function main() {
  const sizes = (process.argv[2] ?? process.env.ROWS ?? '100000,1000000').split(',').map(Number);
  const ROUNDS = Number(process.argv[3] ?? process.env.ROUNDS ?? 1);
  const loadBefore = loadAvg()[0];
  const runs = {};
  for (const n of sizes) {
    const fx = await makePatientFixture(n, 'care-etl-bench-mem-');
    try {
      runs[n] = [];
      for (let i = 0; i < ROUNDS; i++) runs[n].push(spawnChild(['pipeline', fx.dir, String(n)]));
    } finally {
      fx.cleanup();
    }
  }
  const keys = spawnChild(['keys', String(Math.max(...sizes))]);
  const maxRssMB = Object.fromEntries(Object.entries(runs).map(([n, r]) => [n, r.map((x) => x.maxRssMB)]));
  console.log(
    JSON.stringify({
      bench: 'dry-run-memory',
      maxRssMB,
      runs,
      keyCollections: keys,
      targetMB: 300,
      compiler: process.env.CARE_JSONATA_COMPILE?.trim() === '0' ? 'off' : 'on',
      childFlags: CHILD_FLAGS,
      loadAvg1m: [loadBefore, loadAvg()[0]],
      node: process.version,
      cpus: os.cpus().length,
    }),
  );
}

/** CHILD_FLAGS: extra node flags for the pipeline children, e.g. CHILD_FLAGS=--max-old-space-size=200. */
const CHILD_FLAGS = (process.env.CHILD_FLAGS ?? '').split(/\s+/).filter(Boolean);

function spawnChild(args) {
  const flags = args[0] === 'pipeline' ? CHILD_FLAGS : [];
  const r = spawnSync(process.execPath, ['--expose-gc', ...flags, self, '--child', ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (r.status !== 0) throw new Error(`child ${args[0]} failed (${r.status})`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

async function pipelineChild(dir, n) {
  const { runPipeline } = await import('../dist/pipeline/run-pipeline.js');
  const peak = { rss: 0, heapTotal: 0, heapUsed: 0, external: 0 };
  const sample = () => {
    const m = process.memoryUsage();
    for (const k of Object.keys(peak)) if (m[k] > peak[k]) peak[k] = m[k];
  };
  const timer = setInterval(sample, 50);
  let liveAt90;
  const at90 = Math.floor(n * 0.9);
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const report = await runPipeline({
    mappingFile: join(dir, 'mapping.yaml'),
    dryRun: true,
    outDir: join(dir, 'out'),
    rejectsFile: join(dir, 'rejects.ndjson'),
    env: {},
    onEvent(e) {
      if (e.type === 'progress' && e.counts.written === at90) {
        globalThis.gc();
        liveAt90 = process.memoryUsage().heapUsed;
      }
    },
  });
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(c0);
  clearInterval(timer);
  sample();
  if (report.totals.written !== n) throw new Error(`${report.totals.written} written out of ${n}`);
  return {
    rows: n,
    rowsPerSec: Math.round(n / seconds),
    rowsPerCpuSec: Math.round(n / ((cpu.user + cpu.system) / 1e6)),
    maxRssMB: Math.round(process.resourceUsage().maxRSS / 1024),
    peakMB: Object.fromEntries(Object.entries(peak).map(([k, v]) => [k, mb(v)])),
    liveHeapAt90pctMB: mb(liveAt90),
  };
}

/** Heap cost of the per-key collections of a dry run at n keys (8-digit MRNs, decoded from bytes like csv-parse's fields). */
function keysChild(n) {
  const used = () => {
    globalThis.gc();
    globalThis.gc();
    return process.memoryUsage().heapUsed;
  };
  const h0 = used();
  const buf = Buffer.alloc(8);
  const keys = new Array(n);
  for (let i = 0; i < n; i++) {
    buf.write(String(i + 1).padStart(8, '0'), 'latin1');
    keys[i] = buf.toString('utf8');
  }
  const h1 = used();
  const firstSeen = new Map();
  for (let i = 0; i < n; i++) firstSeen.set(keys[i], i + 2);
  const h2 = used();
  const loaded = new Set();
  for (let i = 0; i < n; i++) loaded.add(keys[i]);
  const h3 = used();
  const keysArray = 8 * n; // the array holding the strings in this measurement only
  return {
    keys: n,
    keyStringsMB: mb(h1 - h0 - keysArray),
    firstSeenMapMB: mb(h2 - h1),
    loadedSetMB: mb(h3 - h2),
    totalMB: mb(h3 - h0 - keysArray),
    // keep them alive until here
    check: firstSeen.size + loaded.size === 2 * n,
  };
}

if (process.argv[2] === '--child') {
  const [, , , mode, a, b] = process.argv;
  const out = mode === 'keys' ? keysChild(Number(a)) : await pipelineChild(a, Number(b));
  process.stdout.write(`${JSON.stringify(out)}\n`);
} else {
  await main();
}
