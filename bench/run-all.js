#!/usr/bin/env node
// Runs every bench/*.mjs one after another (they need the build: `npm run build`) and prints their JSON lines.
// Pass names to run a subset: `npm run bench -- sandbox-throughput`, `npm run bench -- export-wide` (issue 13: wide vs
// long layout, peak RSS and wall time as ratios), `npm run bench -- capacity-discovery` (issue 15: the discovered concurrency
// against a sandbox of 24 in flight and one without limit, vs the pinned 8).
import { readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const wanted = process.argv.slice(2);
const benches = readdirSync(here)
  .filter((f) => f.endsWith('.mjs') && !f.startsWith('_'))
  .filter((f) => !wanted.length || wanted.some((w) => f.includes(w)))
  .sort();
let failed = 0;
for (const file of benches) {
  process.stderr.write(`\n== ${file}\n`);
  const r = spawnSync(process.execPath, ['--expose-gc', join(here, file)], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
