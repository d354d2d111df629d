/**
 * The sandbox's capacity model (`maxInFlight` / `--max-in-flight K`), over HTTP: at most K requests are served at
 * once, the others wait in a FIFO queue — observed through the server's own counters and the order in which it
 * stored what it was sent, never through timings.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { client, samplePatient } from './helpers.js';

let sb: Sandbox;
let c: ReturnType<typeof client>;
beforeAll(async () => {
  sb = await startSandbox({ observationsPerPatient: 0 });
  c = client(sb);
});
afterEach(() => sb.setFaults(undefined));
afterAll(async () => {
  await c.close();
  await sb.close();
});

/** Polls the server's own counters until `cond` holds (the test's time-out bounds it). */
async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 5));
}

const patient = (marker: string) => ({ ...samplePatient(), identifier: [{ system: 'urn:test:capacity', value: marker }] });

describe('capacity (maxInFlight)', () => {
  test('never serves more than K at once: the others wait, and all are answered', async () => {
    // A sandbox of its own: its high-water marks count from its start.
    const own = await startSandbox({ observationsPerPatient: 0, faults: { maxInFlight: 2, latencyMs: 50 } });
    const oc = client(own);
    try {
      const answers = await Promise.all(Array.from({ length: 8 }, () => oc.call('GET', '/Patient?_count=1')));
      expect(answers.map((a) => a.status)).toEqual(Array(8).fill(200));
      const s = own.stats().capacity;
      // K reached, never exceeded, though 8 were sent at once (the client has 8 connections).
      expect(s).toMatchObject({ limit: 2, maxInFlight: 2, inFlight: 0, queued: 0 });
      expect(s.queuedTotal).toBeGreaterThan(0);
      expect(s.maxQueued).toBeGreaterThan(0);
      // Saturated from the first request to the last answer: K served at once on average over that span (issue 28).
      expect(s.spanMs).toBeGreaterThan(0);
      expect(s.meanInFlight).toBeGreaterThan(1.8);
      expect(s.meanInFlight).toBeLessThanOrEqual(2);
    } finally {
      await oc.close();
      await own.close();
    }
  });

  test('unlimited by default, the counters still tell how many were served at once', async () => {
    const own = await startSandbox({ observationsPerPatient: 0, faults: { latencyMs: 50 } });
    const oc = client(own);
    try {
      await Promise.all(Array.from({ length: 8 }, () => oc.call('GET', '/Patient?_count=1')));
      const s = own.stats().capacity;
      expect(s).toMatchObject({ limit: null, queuedTotal: 0, maxQueued: 0 });
      expect(s.maxInFlight).toBeGreaterThan(2);
      expect(s.maxInFlight).toBeLessThanOrEqual(8);
    } finally {
      await oc.close();
      await own.close();
    }
  });

  test('queued requests wait their turn, first come first served', async () => {
    sb.setFaults({ maxInFlight: 1, latencyMs: 100 });
    const first = c.create('Patient', patient('cap-1'));
    await until(() => sb.stats().capacity.inFlight === 1);
    const second = c.create('Patient', patient('cap-2'));
    await until(() => sb.stats().capacity.queued === 1);
    const third = c.create('Patient', patient('cap-3'));
    await until(() => sb.stats().capacity.queued === 2);
    // One is being served, two wait behind it.
    expect(sb.stats().capacity).toMatchObject({ inFlight: 1, queued: 2 });
    await Promise.all([first, second, third]);
    sb.setFaults(undefined);
    // Stored in the order they arrived (the list is in creation order).
    const listed = (await c.call('GET', '/Patient?_count=1000')).body.entry as { resource: { identifier?: { system: string; value: string }[] } }[];
    const order = listed
      .map((e) => e.resource.identifier?.[0])
      .filter((i) => i?.system === 'urn:test:capacity')
      .map((i) => i!.value);
    expect(order).toEqual(['cap-1', 'cap-2', 'cap-3']);
  });

  test('lifting the limit lets the waiting requests in', async () => {
    sb.setFaults({ maxInFlight: 1, latencyMs: 200 });
    const calls = Array.from({ length: 3 }, () => c.call('GET', '/Patient?_count=1'));
    await until(() => sb.stats().capacity.queued === 2);
    sb.setFaults(undefined);
    expect((await Promise.all(calls)).map((a) => a.status)).toEqual([200, 200, 200]);
    expect(sb.stats().capacity).toMatchObject({ limit: null, inFlight: 0, queued: 0 });
  });

  test('a client that goes away while waiting frees its place: it is never served', async () => {
    const own = await startSandbox({ observationsPerPatient: 0, faults: { maxInFlight: 1, latencyMs: 200 } });
    const oc = client(own);
    try {
      const first = oc.call('GET', '/Patient?_count=1');
      await until(() => own.stats().capacity.inFlight === 1);
      const gone = new AbortController();
      const second = oc.call('GET', '/Patient?_count=1', { signal: gone.signal }).then(
        () => 'answered',
        (e: { name?: string }) => e.name,
      );
      await until(() => own.stats().capacity.queued === 1);
      gone.abort();
      // Out of the queue while the first is still being served, not when its turn would have come.
      await until(() => own.stats().capacity.queued === 0);
      expect(own.stats().capacity.inFlight).toBe(1);
      expect(await second).toBe('AbortError');
      expect((await first).status).toBe(200);
      await until(() => own.stats().capacity.inFlight === 0);
      // Only the first was served (an abandoned request admitted later would be answered 200 to nobody).
      expect(own.stats().byStatus).toEqual({ 200: 1 });
      expect(own.stats().capacity).toMatchObject({ inFlight: 0, queued: 0, maxInFlight: 1, queuedTotal: 1 });
    } finally {
      await oc.close();
      await own.close();
    }
  });

  test('K must be an integer ≥ 1', () => {
    expect(() => sb.setFaults({ maxInFlight: 0 })).toThrow('Expected `maxInFlight` to be an integer ≥ 1, got `0`');
    expect(() => sb.setFaults({ maxInFlight: 2.5 })).toThrow('Expected `maxInFlight` to be an integer ≥ 1, got `2.5`');
  });

  test('closing the sandbox lets go of the requests still waiting for a slot', async () => {
    const own = await startSandbox({ observationsPerPatient: 0, faults: { maxInFlight: 1, latencyMs: 200 } });
    const oc = client(own);
    try {
      const calls = Array.from({ length: 3 }, () =>
        oc.call('GET', '/Patient').then(
          (r) => r.status,
          (e: { code?: string }) => e.code,
        ),
      );
      await until(() => own.stats().capacity.queued === 2);
      await own.close();
      expect(await Promise.all(calls)).toEqual(['UND_ERR_SOCKET', 'UND_ERR_SOCKET', 'UND_ERR_SOCKET']);
      expect(own.stats().capacity.queued).toBe(0); // none left waiting forever in the closed server
    } finally {
      await oc.close();
    }
  });
});
