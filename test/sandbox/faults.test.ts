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

const settle = async (n: number, fn: () => Promise<{ status: number }>) => {
  const out = await Promise.allSettled(Array.from({ length: n }, fn));
  return {
    statuses: out.flatMap((o) => (o.status === 'fulfilled' ? [o.value.status] : [])),
    errors: out.flatMap((o) => (o.status === 'rejected' ? [o.reason as Error & { code?: string }] : [])),
  };
};

describe('fault injection', () => {
  test('off by default', async () => {
    const { statuses } = await settle(30, () => c.call('GET', '/Patient'));
    expect(statuses.every((s) => s === 200)).toBe(true);
  });

  test('rate limit: 429 with integer Retry-After ≥ 1 beyond the per-tenant rate', async () => {
    sb.setFaults({ rateLimitPerSecond: 5 });
    const results = await Promise.all(Array.from({ length: 20 }, () => c.call('GET', '/Patient')));
    const limited = results.filter((r) => r.status === 429);
    expect(results.filter((r) => r.status === 200).length).toBeLessThanOrEqual(8); // burst 5 + refill on slow machines
    expect(limited.length).toBeGreaterThanOrEqual(12);
    for (const r of limited) {
      expect(r.headers['retry-after']).toMatch(/^[1-9]\d*$/);
      expect(r.body).toMatchObject({ resourceType: 'OperationOutcome', issue: [{ code: 'throttled' }] });
    }
    // another tenant has its own bucket
    expect((await c.call('GET', '/Patient', { tenant: 'other-clinic' })).status).toBe(200);
    // auth failures are answered before the limiter and do not use tokens
    expect((await c.call('GET', '/Patient', { auth: {} })).status).toBe(401);
  });

  test('error503Rate: 503 + Retry-After: 1 and the write is not processed', async () => {
    sb.setFaults({ error503Rate: 0.5, seed: 3 });
    const before = sb.stats().resources['demo-clinic']?.Patient ?? 0;
    const { statuses } = await settle(60, () => c.call('POST', '/Patient', { body: samplePatient() }));
    const n503 = statuses.filter((s) => s === 503).length;
    const n200 = statuses.filter((s) => s === 200).length;
    expect(n503 + n200).toBe(60);
    expect(n503).toBeGreaterThan(10);
    expect(n503).toBeLessThan(50);
    expect(sb.stats().resources['demo-clinic']?.Patient ?? 0).toBe(before + n200);
    sb.setFaults({ error503Rate: 1 });
    const r = await c.call('GET', '/Patient');
    expect(r.status).toBe(503);
    expect(r.headers['retry-after']).toBe('1');
    expect(r.body.issue[0].code).toBe('transient');
  });

  test('dropRate: the client sees a socket error and nothing is stored', async () => {
    const before = sb.stats();
    sb.setFaults({ dropRate: 1 });
    await expect(c.call('POST', '/Patient', { body: samplePatient() })).rejects.toMatchObject({ code: 'UND_ERR_SOCKET' });
    sb.setFaults(undefined);
    const after = sb.stats();
    expect(after.dropped).toBe(before.dropped + 1);
    expect(after.resources['demo-clinic']?.Patient ?? 0).toBe(before.resources['demo-clinic']?.Patient ?? 0);
  });

  test('ambiguousCreateRate: stored, but the client sees a socket error', async () => {
    sb.setFaults({ ambiguousCreateRate: 1 });
    const marker = `amb-${Date.now()}`;
    await expect(c.call('POST', '/Patient', { body: { ...samplePatient(), identifier: [{ system: 'urn:test', value: marker }] } })).rejects.toMatchObject({
      code: 'UND_ERR_SOCKET',
    });
    // reads and updates are not affected by the create-only fault
    expect((await c.call('GET', '/Patient?_count=1000')).status).toBe(200);
    sb.setFaults(undefined);
    const list = (await c.call('GET', '/Patient?_count=1000')).body.entry as { resource: { identifier?: { value: string }[] } }[];
    expect(list.filter((e) => e.resource.identifier?.[0]?.value === marker)).toHaveLength(1);
    expect(sb.stats().ambiguousCreates).toBe(1);
  });

  test('gatewayErrorRate: stored, then answered 502/503/504 with an HTML page; reads and updates unaffected', async () => {
    const before = sb.stats();
    sb.setFaults({ gatewayErrorRate: 1, seed: 5 });
    const marker = `gw-${Date.now()}`;
    const answers = [];
    for (let i = 0; i < 12; i++)
      answers.push(await c.call('POST', '/Patient', { body: { ...samplePatient(), identifier: [{ system: 'urn:test', value: `${marker}-${i}` }] } }));
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([502, 503, 504]));
    for (const a of answers) {
      expect(a.headers['content-type']).toBe('text/html');
      expect(a.text).toMatch(new RegExp(`^<html>\\r\\n<head><title>${a.status} `));
      expect(a.body).toBeUndefined(); // not JSON
      expect(a.headers['retry-after']).toBe(a.status === 503 ? '1' : undefined);
    }
    expect((await c.call('GET', '/Patient?_count=1000')).status).toBe(200);
    sb.setFaults(undefined);
    const list = (await c.call('GET', '/Patient?_count=1000')).body.entry as { resource: { identifier?: { value: string }[] } }[];
    for (let i = 0; i < 12; i++) expect(list.filter((e) => e.resource.identifier?.[0]?.value === `${marker}-${i}`)).toHaveLength(1);
    const after = sb.stats();
    expect(after.gatewayErrors - before.gatewayErrors).toBe(12);
    expect(after.resources['demo-clinic']!.Patient! - before.resources['demo-clinic']!.Patient!).toBe(12);
    expect(() => sb.setFaults({ gatewayErrorRate: 1.5 })).toThrow('Expected `gatewayErrorRate` to be a number between 0 and 1, got `1.5`');
  });

  test('latency and jitter delay each answer', async () => {
    sb.setFaults({ latencyMs: 60, jitterMs: 20 });
    const t0 = performance.now();
    expect((await c.call('GET', '/Patient')).status).toBe(200);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(55);
  });

  test('the same fault seed replays the same faults', async () => {
    const pattern = async () => {
      sb.setFaults({ error503Rate: 0.3, seed: 11 });
      const out: number[] = [];
      for (let i = 0; i < 20; i++) out.push((await c.call('GET', '/Patient')).status);
      return out;
    };
    expect(await pattern()).toEqual(await pattern());
  });

  test('out-of-range options are rejected with a clear message', () => {
    expect(() => sb.setFaults({ dropRate: 2 })).toThrow('Expected `dropRate` to be a number between 0 and 1, got `2`');
    expect(() => sb.setFaults({ latencyMs: -1 })).toThrow(/latencyMs/);
  });

  test('stats count requests by status', () => {
    const s = sb.stats();
    expect(s.requests).toBeGreaterThan(100);
    expect(s.byStatus['200']).toBeGreaterThan(0);
    expect(s.byStatus['429']).toBeGreaterThan(0);
    expect(s.byStatus['503']).toBeGreaterThan(0);
  });
});

describe('startSandbox options', () => {
  test('refuses a non-loopback host unless allowRemote', async () => {
    await expect(startSandbox({ host: '0.0.0.0' })).rejects.toThrow(/non-loopback/);
  });
  test('custom credentials', async () => {
    const other = await startSandbox({ apiKey: 'k2', emrId: 'e2', tenants: ['t2'] });
    const oc = client(other);
    try {
      expect(other.credentials).toEqual({ apiKey: 'k2', emrId: 'e2', tenants: ['t2'] });
      expect(other.url).toBe(`http://127.0.0.1:${other.port}`);
      expect((await oc.call('GET', '/Patient')).status).toBe(200);
    } finally {
      await oc.close();
      await other.close();
    }
  });
});
