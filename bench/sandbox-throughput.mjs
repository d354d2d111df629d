// Sandbox throughput: creates/s and gets/s over keep-alive connections.
// The sandbox runs in its own process (as in real use) so client and server do not share an event loop.
// Usage: npm run build && node bench/sandbox-throughput.mjs [N] [CONCURRENCY]   (env N / CONCURRENCY work too;
// SANDBOX_DATA=/tmp/x.db measures the file-backed store instead of :memory:)
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { Pool } from 'undici';

const N = Number(process.argv[2] ?? process.env.N ?? 5000);
const CONCURRENCY = Number(process.argv[3] ?? process.env.CONCURRENCY ?? 32);
const WARMUP = 300;
const root = fileURLToPath(new URL('..', import.meta.url));

const DATA = process.env.SANDBOX_DATA;
const child = spawn(process.execPath, ['bin/run.js', 'sandbox', '--port', '0', '--json', ...(DATA ? ['--data', DATA] : [])], {
  cwd: root,
  stdio: ['ignore', 'pipe', 'inherit'],
});
const [line] = await once(createInterface({ input: child.stdout }), 'line');
const sb = JSON.parse(line);

const pool = new Pool(sb.url, { connections: CONCURRENCY, keepAliveTimeout: 30_000, headersTimeout: 30_000, bodyTimeout: 30_000 });
const headers = {
  'content-type': 'application/json',
  'service-subscriptionkey': sb.apiKey,
  'service-emrid': sb.emrId,
  'service-tenantid': sb.tenantId,
};
const patient = (i) =>
  JSON.stringify({
    resourceType: 'Patient',
    identifier: [{ system: 'urn:bench:mrn', value: String(i).padStart(8, '0') }],
    active: true,
    name: [{ use: 'official', family: `Family${i}`, given: ['Given', `G${i % 97}`] }],
    telecom: [{ system: 'phone', value: `+1 555 ${String(i % 10000).padStart(4, '0')}`, use: 'mobile' }],
    gender: i % 2 ? 'female' : 'male',
    birthDate: `19${50 + (i % 50)}-0${1 + (i % 9)}-1${i % 10}`,
    address: [{ use: 'home', line: [`${i} Main St`], city: 'Springfield', postalCode: '01234', country: 'US' }],
  });

/** Runs n tasks with a fixed number of workers; returns elapsed seconds. */
async function drive(n, task) {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < n) await task(next++);
    }),
  );
  return (performance.now() - t0) / 1000;
}

const ids = [];
async function create(i) {
  const res = await pool.request({ path: '/Patient', method: 'POST', headers, body: patient(i) });
  const body = await res.body.json();
  if (res.statusCode !== 200) throw new Error(`create → ${res.statusCode} ${JSON.stringify(body)}`);
  ids.push(body.id);
}
async function get(i) {
  const res = await pool.request({ path: `/Patient/${ids[(i * 7919) % ids.length]}`, method: 'GET', headers });
  await res.body.text();
  if (res.statusCode !== 200) throw new Error(`get → ${res.statusCode}`);
}

try {
  await drive(WARMUP, create); // JIT and SQLite page cache
  await drive(WARMUP, get);
  const createS = await drive(N, (i) => create(WARMUP + i));
  const getS = await drive(N, get);
  console.log(
    JSON.stringify({
      bench: 'sandbox-throughput',
      creates: N,
      gets: N,
      concurrency: CONCURRENCY,
      createsPerSec: Math.round(N / createS),
      getsPerSec: Math.round(N / getS),
      observationsPerPatient: 2,
      storage: DATA ? 'file' : 'memory',
      node: process.version,
      cpus: os.cpus().length,
    }),
  );
} finally {
  await pool.close();
  child.kill('SIGTERM');
  await once(child, 'exit');
}
