// The CSV reader on records near the 4 MiB record limit, as they arrive: 64 KiB chunks (part Q, session 31).
// A record held across chunks must cost linear time: each stage that keeps the open record's bytes (the quote guard,
// the span parser) used to concatenate them again per chunk — 64 copies of up to 4 MiB per record.
// Compares CPU per MB of long records against the same bytes in short records, in one run, per dialect (the common
// one: split from the guard's spans; `comment: '#'`: csv-parse's path). Each case in a fresh child process.
// Usage: npm run build && node bench/csv-long-records.mjs [RECORDS] [ROUNDS]   (default 8 records, 3 rounds;
// BASELINE_DIST=<other build>/dist runs that build's reader too, in the same rounds; CPU_PROF=dir writes a profile per child)
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { loadAvg } from './_patients-fixture.mjs';

const self = fileURLToPath(import.meta.url);
const RECORD_BYTES = 4 * 1024 * 1024 - 64;

/** `records` records of ~4 MiB (a quoted field with commas and doubled quotes, no line break) or the same bytes in short records. */
function makeFile(path, records, long) {
  const unit = 'lorem ipsum, ""dolor"" sit amet ';
  const body = long ? unit.repeat(Math.floor(RECORD_BYTES / unit.length)) : unit.repeat(8);
  const count = long ? records : Math.floor((records * RECORD_BYTES) / (body.length + 8));
  const parts = ['id,note\n'];
  for (let i = 0; i < count; i++) parts.push(`${i},"${body}"\n`);
  writeFileSync(path, parts.join(''));
  return count;
}

async function child(path, dialect, dist) {
  const { readCsv } = await import(pathToFileURL(join(dist, 'sources/csv-source.js')).href);
  const csv = dialect === 'comment' ? { comment: '#' } : {};
  const t0 = process.cpuUsage();
  let rows = 0;
  let rejects = 0;
  for await (const item of readCsv({ name: 'notes', path, csv })) {
    if (item.ok) rows++;
    else rejects++;
  }
  const u = process.cpuUsage(t0);
  console.log(JSON.stringify({ rows, rejects, cpuMs: (u.user + u.system) / 1000, maxRssMB: Math.round(process.resourceUsage().maxRSS / 1024) }));
}

const DIST = fileURLToPath(new URL('../dist', import.meta.url));

function run(path, dialect, dist) {
  const prof = process.env.CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.CPU_PROF}`] : [];
  const r = spawnSync(process.execPath, [...prof, self, '--child', path, dialect, dist], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (r.status !== 0) throw new Error(`child failed (${r.status})`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const records = Number(process.argv[2] ?? 8);
  const rounds = Number(process.argv[3] ?? 3);
  const dir = mkdtempSync(join(os.tmpdir(), 'care-etl-bench-long-'));
  const loadBefore = loadAvg()[0];
  try {
    const long = join(dir, 'long.csv');
    const short = join(dir, 'short.csv');
    const counts = { long: makeFile(long, records, true), short: makeFile(short, records, false) };
    const builds = { build: DIST, ...(process.env.BASELINE_DIST ? { baseline: process.env.BASELINE_DIST } : {}) };
    const mb = (records * RECORD_BYTES) / 1024 / 1024;
    const result = {};
    for (const dialect of ['common', 'comment']) {
      const cpu = {};
      const rss = {};
      for (let i = 0; i < rounds; i++) {
        for (const [build, dist] of Object.entries(builds)) {
          for (const kind of ['long', 'short']) {
            const r = run(kind === 'long' ? long : short, dialect, dist);
            if (r.rows !== counts[kind] || r.rejects !== 0) throw new Error(`${build} ${dialect}/${kind}: ${r.rows} rows, ${r.rejects} rejects`);
            (cpu[`${build} ${kind}`] ??= []).push(r.cpuMs);
            rss[`${build} ${kind}`] = r.maxRssMB;
          }
        }
      }
      const med = (key) => median(cpu[key]);
      result[dialect] = {
        longMsPerMB: +(med('build long') / mb).toFixed(2),
        shortMsPerMB: +(med('build short') / mb).toFixed(2),
        longOverShort: +(med('build long') / med('build short')).toFixed(2),
        ...(builds.baseline
          ? {
              baselineLongOverShort: +(med('baseline long') / med('baseline short')).toFixed(2),
              longVsBaseline: +(med('build long') / med('baseline long')).toFixed(2),
              shortVsBaseline: +(med('build short') / med('baseline short')).toFixed(2),
            }
          : {}),
        cpuMs: cpu,
        maxRssMB: rss,
      };
    }
    console.log(
      JSON.stringify({
        bench: 'csv-long-records',
        records,
        recordBytes: RECORD_BYTES,
        rounds,
        ...result,
        loadAvg1m: [loadBefore, loadAvg()[0]],
        node: process.version,
      }),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--child') await child(process.argv[3], process.argv[4], process.argv[5] ?? DIST);
else await main();
