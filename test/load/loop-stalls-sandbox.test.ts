/**
 * A blocked event loop in the client is not read as server latency (issue 28 item 2), against the real sandbox in a
 * child process (20 ms latency, 8 requests served at once): a run's limiter (`forRun`, discovering) settles no lower
 * while this process busy-waits 60 ms of every 100 than without the bursts. Asserted on the limiter's decisions and
 * the sandbox's own counters, never on wall time.
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { request } from 'undici';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AdaptiveLimiter } from '../../src/load/adaptive-concurrency.js';
import { ROOT } from '../helpers/cli.js';

const CAPACITY = 8;
const REQUESTS = 600;

const SANDBOX_CHILD = `
const { startSandbox } = await import(${JSON.stringify(pathToFileURL(join(ROOT, 'dist/sandbox/server.js')).href)});
const sb = await startSandbox({ tenants: ['t'], observationsPerPatient: 0, faults: { latencyMs: 20, maxInFlight: ${CAPACITY} } });
process.stdout.write(JSON.stringify({ url: sb.url, ...sb.credentials }) + '\\n');
const { createInterface } = await import('node:readline');
for await (const line of createInterface({ input: process.stdin })) process.stdout.write(JSON.stringify(sb.stats().capacity) + '\\n');
await sb.close();
`;

let child: ChildProcessByStdio<Writable, Readable, null> | undefined;
beforeAll(() => {
  if (!existsSync(join(ROOT, 'dist/sandbox/server.js'))) throw new Error('dist/ is missing: run `npm run build` first');
});
afterEach(() => {
  child?.stdin.end();
  child = undefined;
});

/** The sandbox in its own process (its timers must not wait for this one's busy loop); `capacity()` reads its counters. */
async function sandboxProcess() {
  const c = spawn(process.execPath, ['--input-type=module', '-e', SANDBOX_CHILD], { stdio: ['pipe', 'pipe', 'inherit'] });
  child = c;
  const lines = createInterface({ input: c.stdout })[Symbol.asyncIterator]();
  const { url, apiKey, emrId } = JSON.parse((await lines.next()).value as string) as { url: string; apiKey: string; emrId: string };
  const headers = { 'service-subscriptionkey': apiKey, 'service-emrid': emrId, 'service-tenantid': 't' };
  const capacity = async () => {
    c.stdin.write('stats\n');
    return JSON.parse((await lines.next()).value as string) as { maxInFlight: number; maxQueued: number };
  };
  return { url, headers, capacity };
}

/** REQUESTS listings through a run's limiter, as the loader sends them; `burst`: busy-waits 60 ms of every 100. */
async function load(burst: boolean) {
  const sb = await sandboxProcess();
  const limiter = AdaptiveLimiter.forRun({ maxConcurrency: 24 });
  let spin: ReturnType<typeof setTimeout> | undefined;
  const block = () => {
    const until = performance.now() + 60;
    while (performance.now() < until); // the loop is blocked: responses wait, as on a starved machine
    spin = setTimeout(block, 40);
  };
  if (burst) spin = setTimeout(block, 40);
  try {
    await Promise.all(
      Array.from({ length: REQUESTS }, () =>
        limiter.run(async () => {
          const sentAt = performance.now();
          const res = await request(`${sb.url}/Patient?_count=1`, { headers: sb.headers });
          await res.body.dump();
          if (res.statusCode !== 200) throw new Error(`sandbox answered ${res.statusCode}`);
          limiter.onSuccess(performance.now() - sentAt);
        }),
      ),
    );
  } finally {
    clearTimeout(spin);
  }
  return { window: limiter.stats(), server: await sb.capacity() };
}

describe('capacity discovery with a blocked event loop (real sandbox)', () => {
  it('busy-wait bursts in the client do not shrink the settled window below what it reaches without them', async () => {
    const quiet = await load(false);
    const burst = await load(true);
    // Both kept the server's capacity busy (its own high-water mark) …
    expect(quiet.server.maxInFlight).toBe(CAPACITY);
    expect(burst.server.maxInFlight).toBe(CAPACITY);
    // … and the bursts, the client's own delay, did not pull the window down (read as server latency, they took it
    // to 2). The settled window is a time-weighted median over a short run: a step or two apart between like runs.
    expect(quiet.window.settled).toBeGreaterThanOrEqual(CAPACITY);
    expect(burst.window.settled).toBeGreaterThanOrEqual(Math.min(quiet.window.settled - 2, 2 * CAPACITY));
  });
});
