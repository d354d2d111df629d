/**
 * Issue 12 (network half), at the client: every wait is bounded and every answer checked before it is believed.
 * Each case runs against a hostile server on 127.0.0.1 (test/helpers/hostile-server.ts) with small bounds, and
 * must END with the right typed error — never hang, never buffer without limit, never return an untrusted id.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { CareClient, STALE_PAGE_LIMIT } from '../../src/api/client.js';
import { CONNECTION_DEFAULTS, resolveConnection, type ConnectionInput } from '../../src/api/connection.js';
import { isSafeId, ProtocolError, ResponseTooLargeError, TransportError } from '../../src/api/errors.js';
import type { Resource } from '../../src/api/types.js';
import { startHostileServer, UNSAFE_ID, type HostileModeServer } from '../helpers/hostile-server.js';

const KEY = 'k3y-bounds-never-leaks';
let server: HostileModeServer | undefined;
let client: CareClient | undefined;

afterEach(async () => {
  await client?.close();
  await server?.close();
  client = undefined;
  server = undefined;
});

function clientOf(url: string, over: ConnectionInput = {}, opts: ConstructorParameters<typeof CareClient>[1] = { retry: false }): CareClient {
  client = new CareClient(resolveConnection(over, { baseUrl: url, apiKey: KEY, emrId: 'emr', tenantId: 't' }), opts);
  return client;
}

async function failure(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    expect(String((err as Error).stack)).not.toContain(KEY);
    return err;
  }
  throw new Error('expected the call to fail');
}

async function drain(it: AsyncIterable<unknown>): Promise<number> {
  let n = 0;
  for await (const _ of it) n++;
  return n;
}

const patient = (mrn: string): Resource => ({ resourceType: 'Patient', identifier: [{ system: 'urn:mrn', value: mrn }], active: true });

describe('isSafeId: what care-etl accepts as a server id', () => {
  it('accepts FHIR ids, rejects path traversal, separators and the like', () => {
    for (const ok of ['a', 'h-1', 'ABC.def-09', 'x'.repeat(64), '1a2b3c4d5e6f7a8b']) expect(isSafeId(ok)).toBe(true);
    for (const bad of [UNSAFE_ID, '', '.', '..', '...', 'a/b', 'a b', 'a?b', 'a#b', '%2e%2e', 'x'.repeat(65), 'é', 12, null, undefined, {}]) {
      expect(isSafeId(bad)).toBe(false);
    }
  });
});

describe('connection bounds: defaults and validation', () => {
  it('defaults: 30 s per attempt, 10 s to connect, 32 MiB per answer, 100 000 pages', () => {
    const s = resolveConnection({ baseUrl: 'https://x.example', apiKey: 'k', emrId: 'e', tenantId: 't' });
    expect(s).toMatchObject({ requestTimeoutMs: 30_000, connectTimeoutMs: 10_000, maxResponseBytes: 32 * 1024 * 1024, maxPages: 100_000 });
    expect(CONNECTION_DEFAULTS.maxResponseBytes).toBe(33_554_432);
  });

  it('refuses bounds that are not integers in range, naming the flag', () => {
    const base = { baseUrl: 'https://x.example', apiKey: 'k', emrId: 'e', tenantId: 't' };
    for (const [over, flag] of [
      [{ maxResponseBytes: 512 * 1024 * 1024 }, '--max-response-bytes'],
      [{ maxPages: 0 }, '--max-pages'],
      [{ requestTimeoutMs: 2 ** 31 }, '--timeout'],
      [{ connectTimeoutMs: 1.5 }, '--connect-timeout'],
    ] as const) {
      let err: unknown;
      try {
        resolveConnection(over, base);
      } catch (e) {
        err = e;
      }
      expect((err as { describe(): string }).describe()).toContain(flag);
      expect((err as { exitCode: number }).exitCode).toBe(2);
    }
  });
});

describe('overall deadline: headers and the whole body', () => {
  it('a body trickling one byte every 20 ms is cut off at the deadline (timeout), although it is never idle', async () => {
    server = await startHostileServer({ kind: 'slow-body', byteEveryMs: 20 });
    const c = clientOf(server.url, { requestTimeoutMs: 300 });
    const err = (await failure(drain(c.list('Patient')))) as TransportError;
    expect(err).toBeInstanceOf(TransportError);
    expect(err.failure).toBe('timeout');
    expect(err.exitCode).toBe(3);
    expect(err.message).toMatch(/no complete answer within 300 ms/);
  }, 10_000);

  it('is retried per the policy (reads), then fails: one deadline per attempt', async () => {
    server = await startHostileServer({ kind: 'slow-body', byteEveryMs: 20 });
    const c = clientOf(server.url, { requestTimeoutMs: 200 }, { retry: { attempts: 3, baseDelayMs: 1, maxDelayMs: 2 } });
    const err = (await failure(c.get('Patient', 'p1'))) as TransportError;
    expect(err.failure).toBe('timeout');
    expect(server.requests).toBe(3);
  }, 10_000);

  it('a create cut off by the deadline is ambiguous (maybe stored): reconciled, never re-sent blindly', async () => {
    server = await startHostileServer({ kind: 'slow-body', byteEveryMs: 20 });
    const c = clientOf(server.url, { requestTimeoutMs: 200 }, { retry: { attempts: 3, baseDelayMs: 1 } });
    const err = (await failure(c.create('Patient', patient('1')))) as TransportError;
    expect(err.ambiguous).toBe(true);
    expect(server.creates).toBe(1);
  }, 10_000);

  it("the caller's abort stays an abort (not a time-out)", async () => {
    server = await startHostileServer({ kind: 'slow-body', byteEveryMs: 20 });
    const c = clientOf(server.url, { requestTimeoutMs: 60_000 });
    const ac = new AbortController();
    const p = failure(c.get('Patient', 'p1', ac.signal));
    setTimeout(() => ac.abort(), 100);
    const err = (await p) as Error;
    expect(err).not.toBeInstanceOf(TransportError);
    expect(err.name).toBe('AbortError');
  }, 10_000);
});

describe('response size cap', () => {
  it('an endless body fails past --max-response-bytes with a clear message, not retried', async () => {
    server = await startHostileServer({ kind: 'endless-body' });
    const c = clientOf(server.url, { maxResponseBytes: 1024 * 1024 }, { retry: { attempts: 5, baseDelayMs: 1 } });
    const err = (await failure(drain(c.list('Observation')))) as ResponseTooLargeError;
    expect(err).toBeInstanceOf(ResponseTooLargeError);
    expect(err.exitCode).toBe(3);
    expect(err.message).toMatch(/larger than 1048576 bytes \(--max-response-bytes\)/);
    expect(err.message).not.toMatch(/ERR_OUT_OF_RANGE|ERR_STRING_TOO_LONG/);
    expect(err.ambiguous).toBe(false);
    expect(server.requests).toBe(1);
  }, 10_000);

  it('an oversize create answer is ambiguous (the create was probably stored)', async () => {
    server = await startHostileServer({ kind: 'endless-body' });
    const c = clientOf(server.url, { maxResponseBytes: 64 * 1024 });
    const err = (await failure(c.create('Patient', patient('1')))) as ResponseTooLargeError;
    expect(err).toBeInstanceOf(ResponseTooLargeError);
    expect(err.ambiguous).toBe(true);
  }, 10_000);

  it('a declared content-length over the cap fails before the body is read; an error status keeps its meaning', async () => {
    const big = JSON.stringify({ resourceType: 'Bundle', type: 'searchset', entry: [], pad: 'x'.repeat(200_000) });
    const s = createServer((req, res) => {
      res.writeHead(req.url?.startsWith('/Patient') ? 200 : 503, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(big),
        'retry-after': '0',
      });
      res.end(big);
    });
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    try {
      const c = clientOf(`http://127.0.0.1:${(s.address() as AddressInfo).port}`, { maxResponseBytes: 100_000 });
      expect(await failure(drain(c.list('Patient')))).toBeInstanceOf(ResponseTooLargeError);
      const e503 = (await failure(c.get('Practitioner', 'x'))) as { status?: number };
      expect(e503.status).toBe(503);
    } finally {
      s.closeAllConnections();
      s.close();
    }
  }, 10_000);
});

describe('listings: page cap and no progress', () => {
  it(`empty pages linking to ever new next pages: fails after ${STALE_PAGE_LIMIT} pages that bring nothing`, async () => {
    server = await startHostileServer({ kind: 'endless-next', entries: 'empty' });
    const c = clientOf(server.url);
    const err = (await failure(drain(c.pages('Observation')))) as ProtocolError;
    expect(err).toBeInstanceOf(ProtocolError);
    expect(err.exitCode).toBe(3);
    expect(err.message).toMatch(/next links do not progress/);
    expect(server.pages).toBe(STALE_PAGE_LIMIT);
  }, 10_000);

  it('the same resource on every (distinct) page: no progress after the first', async () => {
    server = await startHostileServer({ kind: 'endless-next', entries: 'same' });
    const c = clientOf(server.url);
    const err = (await failure(drain(c.list('Patient')))) as ProtocolError;
    expect(err.message).toMatch(/do not progress/);
    expect(server.pages).toBe(STALE_PAGE_LIMIT + 1);
  }, 10_000);

  it('a new resource on every page forever: ends at --max-pages', async () => {
    server = await startHostileServer({ kind: 'endless-next', entries: 'fresh' });
    const c = clientOf(server.url, { maxPages: 50 });
    const err = (await failure(drain(c.list('Patient')))) as ProtocolError;
    expect(err).toBeInstanceOf(ProtocolError);
    expect(err.message).toMatch(/past 50 pages \(--max-pages\)/);
    expect(server.pages).toBe(50);
  }, 10_000);
});

describe('create answers are checked before they are believed', () => {
  for (const answer of ['no-id', 'unsafe-id', 'object-id', 'wrong-type'] as const) {
    it(`${answer}: an ambiguous ProtocolError (outcome unknown), no id returned`, async () => {
      server = await startHostileServer({ kind: 'create-answer', answer });
      const c = clientOf(server.url);
      const err = (await failure(c.create('Patient', patient('1')))) as ProtocolError;
      expect(err).toBeInstanceOf(ProtocolError);
      expect(err.ambiguous).toBe(true);
      expect(err.message).toMatch(/cannot be believed/);
      expect(server.stored('Patient')).toHaveLength(1); // it was stored: hence "unknown", not "rejected"
    });
  }

  it('same-id: the first answer is taken, the same id for a second create is not', async () => {
    server = await startHostileServer({ kind: 'create-answer', answer: 'same-id' });
    const c = clientOf(server.url);
    expect((await c.create('Patient', patient('1'))).id).toBe('same-1');
    const err = (await failure(c.create('Patient', patient('2')))) as ProtocolError;
    expect(err.ambiguous).toBe(true);
    expect(err.message).toMatch(/already returned for another Patient/);
  });

  it('a 2xx create answer that is not JSON is ambiguous too; a read answering another type or id is refused', async () => {
    const s = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      if (req.method === 'POST') res.end('<html>ok</html>');
      else if (req.url?.startsWith('/Patient/a')) res.end(JSON.stringify({ resourceType: 'OperationOutcome', issue: [] }));
      else res.end(JSON.stringify({ resourceType: 'Patient', id: 'other' }));
    });
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    try {
      const c = clientOf(`http://127.0.0.1:${(s.address() as AddressInfo).port}`);
      expect(((await failure(c.create('Patient', patient('1')))) as ProtocolError).ambiguous).toBe(true);
      const wrongType = (await failure(c.get('Patient', 'a'))) as ProtocolError;
      expect(wrongType).toBeInstanceOf(ProtocolError);
      expect(wrongType.ambiguous).toBe(false);
      expect(((await failure(c.update('Patient', 'b', patient('1')))) as ProtocolError).message).toMatch(/carries the id "other"/);
    } finally {
      s.closeAllConnections();
      s.close();
    }
  });
});
