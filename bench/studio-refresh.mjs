#!/usr/bin/env node
// Issue 29: the studio's refresh — an edit of the mapping → POST /api/evaluate → the refreshed results — on the example
// clinic with a 1,000-row patient source (generated: bench/_patients-fixture.mjs). Each edit changes an expression
// of the `patient` map (the address's country), so the text is compiled again and every sampled row mapped, validated
// and told again; the source rows, the schema validators and the lookups stay cached. Prints the median and worst of
// the round trip (client side: request sent → JSON answer parsed) and of the server's own `elapsedMs`, and the first
// (cold) evaluation apart, and the process's CPU time per refresh (server and client share the process). Needs the build (`npm run build`).
// Usage: node bench/studio-refresh.mjs [rows=1000] [edits=40]
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { HEADER, loadAvg, median, patientRow } from './_patients-fixture.mjs';

const rows = Number(process.argv[2] ?? 1000);
const edits = Number(process.argv[3] ?? 40);
const root = fileURLToPath(new URL('..', import.meta.url));
const { startStudio } = await import(join(root, 'dist/studio/server.js'));

const dir = mkdtempSync(join(os.tmpdir(), 'care-etl-bench-studio-'));
cpSync(join(root, 'examples/clinic'), dir, { recursive: true, filter: (src) => !src.includes('.care-etl') });
writeFileSync(join(dir, 'data/patients.csv'), `${[HEADER, ...Array.from({ length: rows }, (_, i) => patientRow(i + 1))].map((r) => r.join(',')).join('\n')}\n`);

const studio = await startStudio({ mappingFile: join(dir, 'mapping.yaml'), sampleSize: rows, staticDir: join(dir, 'no-page') });
const headers = { authorization: `Bearer ${studio.token}`, 'content-type': 'application/json' };
const mapping = await (await fetch(`${studio.origin}/api/mapping`, { headers })).json();

async function refresh(text) {
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const r = await fetch(`${studio.origin}/api/evaluate`, { method: 'POST', headers, body: JSON.stringify({ text, resource: 'patient' }) });
  const body = await r.json();
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  const cpu = (c.user + c.system) / 1000;
  if (r.status !== 200 || body.errors.length || body.totals.sampled !== rows)
    throw new Error(`unexpected answer: ${r.status} ${JSON.stringify(body.errors ?? body)}`);
  return { ms, cpu, server: body.elapsedMs, totals: body.totals };
}

try {
  const cold = await refresh(mapping.text);
  const client = [];
  const server = [];
  const cpu = [];
  let totals;
  for (let i = 1; i <= edits; i++) {
    const r = await refresh(mapping.text.replace('"country": "US"', `"country": "US-${i}"`));
    client.push(r.ms);
    server.push(r.server);
    cpu.push(r.cpu);
    totals = r.totals;
  }
  const round = (x) => Math.round(x * 10) / 10;
  const result = {
    bench: 'studio-refresh',
    rows,
    edits,
    totals,
    coldMs: round(cold.ms),
    refreshMs: { median: round(median(client)), worst: round(Math.max(...client)) },
    serverElapsedMs: { median: round(median(server)), worst: round(Math.max(...server)) },
    // CPU of this one process (server and client share it) per refresh: what a busy machine cannot inflate.
    cpuMs: { median: round(median(cpu)), worst: round(Math.max(...cpu)) },
    target: '≤ ~300 ms for 1,000 rows',
    loadAvg: loadAvg(),
  };
  console.log(JSON.stringify(result));
} finally {
  await studio.close();
  rmSync(dir, { recursive: true, force: true });
}
