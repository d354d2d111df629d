/**
 * Issue 24, item 4, at the client over HTTP (test/helpers/gateway-server.ts on 127.0.0.1): a create answered 5xx is
 * never re-sent by the client's retry (it is ambiguous: the loader reconciles it), while reads keep retrying; a
 * Retry-After past the cap ends the request at once with the wait named.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { CareClient } from '../../src/api/client.js';
import { resolveConnection } from '../../src/api/connection.js';
import { ApiError, RetryAfterTooLongError } from '../../src/api/errors.js';
import { startGatewayServer, type GatewayServer } from '../helpers/gateway-server.js';

const servers: GatewayServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

async function clientOf(s: GatewayServer, maxRetryAfterMs?: number): Promise<CareClient> {
  servers.push(s);
  return new CareClient(resolveConnection({ baseUrl: s.url, apiKey: 'k', emrId: 'e', tenantId: 't', maxRetryAfterMs }), {
    retry: { baseDelayMs: 1, maxDelayMs: 5, sleep: async () => {} },
  });
}

describe('gateway answers at the client', () => {
  for (const status of [500, 502, 503, 504] as const) {
    it(`a create stored then answered ${status}: one POST, an ambiguous ApiError`, async () => {
      const s = await startGatewayServer({ commitThen: { status, every: 1 } });
      const client = await clientOf(s);
      const err = await client.create('Patient', { resourceType: 'Patient' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).ambiguous).toBe(true);
      expect(s.creates).toBe(1);
      expect(s.stored('Patient')).toHaveLength(1);
      await client.close();
    });
  }

  it('a 429 with Retry-After 86400 past a 120 s cap: RetryAfterTooLongError naming the wait, exit 3', async () => {
    const s = await startGatewayServer({ throttle: { retryAfter: '86400', afterCreates: 0 } });
    const client = await clientOf(s, 120_000);
    const err = await client.get('Patient', 'x').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RetryAfterTooLongError);
    expect((err as Error).message).toMatch(/asked to wait 86400 s \(Retry-After\), more than --max-retry-after 120 s: stopped/);
    expect((err as RetryAfterTooLongError).exitCode).toBe(3);
    await client.close();
  });
});
