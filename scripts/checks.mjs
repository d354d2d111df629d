#!/usr/bin/env node
// The static checks of `npm test` (lint, format, function lengths, unused exports, typecheck), run side by side:
// each is single-threaded and some wait on the disk, so on 2 cores they take about half the time one after another.
// Each check's output is printed whole when it ends; the exit code is 1 when any failed.
// Usage: node scripts/checks.mjs
import { spawn } from 'node:child_process';

const CHECKS = ['lint', 'format:check', 'check:function-lengths', 'check:unused-exports', 'typecheck', 'typecheck:studio'];
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

function run(script) {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(npm, ['run', '--silent', script], { stdio: ['ignore', 'pipe', 'pipe'], shell: process.platform === 'win32' });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('close', (code) => resolve({ script, code: code ?? 1, out, seconds: (Date.now() - started) / 1000 }));
  });
}

const results = await Promise.all(CHECKS.map(run));
for (const r of results) {
  const verdict = r.code === 0 ? 'ok' : `FAILED (exit ${r.code}) — run \`npm run ${r.script}\` to see it alone`;
  process.stdout.write(`${r.script}: ${verdict}, ${r.seconds.toFixed(1)} s\n`);
  if (r.code !== 0 && r.out.trim()) process.stdout.write(`${r.out.trimEnd()}\n`);
}
process.exitCode = results.some((r) => r.code !== 0) ? 1 : 0;
