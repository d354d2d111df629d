// Throughput of a load under a server rate limit (issue 4): the sandbox (child process, `care-etl sandbox
// --rate-limit 100`: a per-tenant token bucket of 100 req/s, burst 100, 429 + Retry-After beyond it) and
// runPipeline loading N patients — by default at the default flags (the concurrency discovered up to 32, issue 15;
// target: ≥ 90 % of the limit, no rejected row), or pinned with CONCURRENCY (issue 4 measured --concurrency 16
// against 85 %).
// A small loopback proxy in this process counts the answers by status (the 429s); it adds well under a
// millisecond per request. Achieved rate = 2xx answers / the run's wall time (report.durationMs: preflight,
// ledger and transform included).
// Usage: npm run build && node bench/rate-limit-throughput.mjs [N] [CONCURRENCY]   (env N / CONCURRENCY / RATE)
// Exits 1 when a row was rejected (it throws) or the achieved rate is under the target.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { Agent, createServer, request } from 'node:http';
import os from 'node:os';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { runPipeline } from '../dist/pipeline/run-pipeline.js';
import { loadAvg, makePatientFixture } from './_patients-fixture.mjs';

const N = Number(process.argv[2] ?? process.env.N ?? 3000);
const pinned = process.argv[3] ?? process.env.CONCURRENCY;
const CONCURRENCY = pinned === undefined ? undefined : Number(pinned);
const TARGET = CONCURRENCY === undefined ? 0.9 : 0.85;
const RATE = Number(process.env.RATE ?? 100);
const root = fileURLToPath(new URL('..', import.meta.url));

const child = spawn(process.execPath, ['bin/run.js', 'sandbox', '--port', '0', '--json', '--rate-limit', String(RATE), '--observations-per-patient', '0'], {
  cwd: root,
  stdio: ['ignore', 'pipe', 'inherit'],
});
const [line] = await once(createInterface({ input: child.stdout }), 'line');
const sb = JSON.parse(line);

// Counting proxy: forwards every request as is, tallies the sandbox's answers by status.
const target = new URL(sb.url);
const agent = new Agent({ keepAlive: true, maxSockets: 64 });
const byStatus = {};
let firstAt;
let lastAt;
const proxy = createServer((req, res) => {
  firstAt ??= performance.now();
  const up = request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers, agent }, (ur) => {
    byStatus[ur.statusCode] = (byStatus[ur.statusCode] ?? 0) + 1;
    lastAt = performance.now();
    res.writeHead(ur.statusCode, ur.headers);
    ur.pipe(res);
  });
  up.on('error', () => res.destroy());
  req.pipe(up);
});
proxy.keepAliveTimeout = 30_000;
await new Promise((r) => proxy.listen(0, '127.0.0.1', r));
const connection = { baseUrl: `http://127.0.0.1:${proxy.address().port}`, apiKey: sb.apiKey, emrId: sb.emrId, tenantId: sb.tenantId };

const loadBefore = loadAvg();
const fx = await makePatientFixture(N, 'care-etl-bench-rate-');
try {
  const report = await runPipeline({ mappingFile: fx.mapping, env: {}, connection, concurrency: CONCURRENCY });
  const c = report.mappings.patient;
  if (c.created + c.adopted !== N || c.rejected !== 0) throw new Error(`run: ${JSON.stringify(c)}`);
  const ok = Object.entries(byStatus)
    .filter(([s]) => s.startsWith('2'))
    .reduce((n, [, v]) => n + v, 0);
  const seconds = report.durationMs / 1000;
  const achieved = ok / seconds;
  const requests = Object.values(byStatus).reduce((a, b) => a + b, 0);
  if (achieved / RATE < TARGET) process.exitCode = 1; // the figures are printed all the same
  console.log(
    JSON.stringify({
      bench: 'rate-limit-throughput',
      patients: N,
      rateLimit: RATE,
      concurrency: CONCURRENCY ?? 'discovered',
      settledConcurrency: report.concurrency,
      runMs: report.durationMs,
      okRequests: ok,
      achievedReqPerSec: Math.round(achieved * 10) / 10,
      ratio: Math.round((achieved / RATE) * 1000) / 1000,
      target: TARGET,
      pass: achieved / RATE >= TARGET,
      achievedReqPerSecFirstToLastRequest: Math.round((ok / ((lastAt - firstAt) / 1000)) * 10) / 10,
      status429: byStatus[429] ?? 0,
      requests,
      byStatus,
      created: c.created,
      adopted: c.adopted,
      rejected: c.rejected,
      loadAvg1m: [loadBefore[0], loadAvg()[0]],
      node: process.version,
      cpus: os.cpus().length,
    }),
  );
} finally {
  fx.cleanup();
  await new Promise((r) => {
    proxy.close(r);
    proxy.closeAllConnections();
  });
  agent.destroy();
  child.kill('SIGTERM');
  await once(child, 'exit');
}
