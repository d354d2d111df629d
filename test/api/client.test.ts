import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inspect } from 'node:util';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { CareClient } from '../../src/api/client.js';
import { resolveConnection, type ConnectionInput } from '../../src/api/connection.js';
import { ApiError, AuthenticationError, ProtocolError, TransportError } from '../../src/api/errors.js';
import type { Resource } from '../../src/api/types.js';

const API_KEY = 'k3y-that-must-never-leak-9f2c';
let sandbox: Sandbox;

function client(over: ConnectionInput = {}, opts: ConstructorParameters<typeof CareClient>[1] = { retry: false }): CareClient {
  return new CareClient(
    resolveConnection(over, { baseUrl: sandbox.url, apiKey: API_KEY, emrId: 'emr-1', tenantId: 'clinic-a', requestTimeoutMs: 2_000 }),
    opts,
  );
}

/** Every text a user could see of an error: message, stack, inspect, JSON. */
function allText(err: unknown): string {
  return [String(err), (err as Error).stack, inspect(err, { depth: 10 }), JSON.stringify(err)].join('\n');
}

async function failure(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    expect(allText(err)).not.toContain(API_KEY);
    return err;
  }
  throw new Error('expected the call to fail');
}

const patient = (mrn: string): Resource => ({
  resourceType: 'Patient',
  identifier: [{ system: 'urn:clinic:mrn', value: mrn }],
  active: true,
  name: [{ use: 'official', family: 'Doe', given: ['Jane'] }],
  gender: 'female',
  birthDate: '1985-02-28',
});

beforeAll(async () => {
  sandbox = await startSandbox({ apiKey: API_KEY, emrId: 'emr-1', tenants: ['clinic-a', 'clinic-b'], pageSize: 50 });
});
afterAll(async () => {
  await sandbox.close();
});

describe('CareClient against the sandbox (HTTP on 127.0.0.1)', () => {
  it('creates, gets, updates and lists each writable type; versionId increments', async () => {
    const c = client();
    try {
      const p = await c.create('Patient', patient('MRN-1'));
      expect(p.id).toMatch(/^[A-Za-z0-9\-.]{1,64}$/);
      expect(p.meta).toMatchObject({ versionId: '1' });
      expect(typeof p.meta?.lastUpdated).toBe('string');
      expect(typeof p.meta?.source).toBe('string');

      const pr = await c.create('Practitioner', {
        resourceType: 'Practitioner',
        identifier: [{ system: 'http://hl7.org/fhir/sid/us-npi', value: '1234567893' }],
        name: [{ family: 'House', given: ['Greg'], prefix: ['Dr.'] }],
        extension: [{ url: 'https://example.org/staff-roles', valueString: 'Psychiatrist' }],
      });
      const ct = await c.create('CareTeam', {
        resourceType: 'CareTeam',
        status: 'active',
        subject: { reference: `Patient/${p.id}` },
        participant: [{ member: { reference: `Practitioner/${pr.id}` }, period: { start: '2024-01-01T00:00:00Z' } }],
      });
      expect(await c.get('CareTeam', ct.id)).toMatchObject({ id: ct.id, subject: { reference: `Patient/${p.id}` } });

      const got = await c.get('Patient', p.id);
      expect(got).toMatchObject({ id: p.id, identifier: [{ value: 'MRN-1' }] });

      const updated = await c.update('Patient', p.id, { ...patient('MRN-1'), active: false });
      expect(updated.meta?.versionId).toBe('2');
      expect((await c.get('Patient', p.id)).active).toBe(false);
      const updatedTeam = await c.update('CareTeam', ct.id, {
        resourceType: 'CareTeam',
        status: 'active',
        subject: { reference: `Patient/${p.id}` },
        participant: [{ member: { reference: `Practitioner/${pr.id}` }, period: { start: '2024-01-01T00:00:00Z', end: '2024-06-30T00:00:00Z' } }],
      });
      expect(updatedTeam.meta?.versionId).toBe('2');
      expect(await c.update('Practitioner', pr.id, { ...pr, active: true })).toMatchObject({ active: true, meta: { versionId: '2' } });

      const ids: string[] = [];
      for await (const r of c.list('Practitioner')) ids.push(r.id!);
      expect(ids).toContain(pr.id);
    } finally {
      await c.close();
    }
  });

  it('follows link next across more than 3 pages and yields each resource once', async () => {
    const c = client({ tenantId: 'clinic-b' });
    try {
      const created = new Set<string>();
      for (let i = 0; i < 23; i++) created.add((await c.create('Patient', patient(`PG-${i}`))).id);
      const seen: string[] = [];
      let pages = 0;
      expect(c.servedPageSize, 'no page read yet').toBeUndefined();
      for await (const page of c.pages('Patient', { pageSize: 5 })) {
        pages++;
        for (const e of page.entry ?? []) seen.push(e.resource.id!);
      }
      expect(pages).toBe(5);
      // the pages that linked to a next one held 5: the server's page size as served (the last page, 3, is not one)
      expect(c.servedPageSize).toBe(5);
      expect(seen.length).toBe(created.size);
      expect(new Set(seen)).toEqual(created);
    } finally {
      await c.close();
    }
  });

  it('uses a configured update route (PATCH)', async () => {
    const c = client({ updateRoutes: { Patient: 'PATCH' } });
    try {
      const p = await c.create('Patient', patient('MRN-PATCH'));
      const u = await c.update('Patient', p.id, { resourceType: 'Patient', active: false });
      expect(u.meta?.versionId).toBe('2');
      expect(u.active).toBe(false);
      // merge-patch keeps what was not sent
      expect(u.identifier).toEqual([{ system: 'urn:clinic:mrn', value: 'MRN-PATCH' }]);
    } finally {
      await c.close();
    }
  });

  it('gets and lists observations of the patients it holds', async () => {
    const c = client();
    try {
      const p = await c.create('Patient', patient('MRN-OBS'));
      const obs: Resource[] = [];
      for await (const o of c.list('Observation')) if ((o.subject as { reference: string }).reference === `Patient/${p.id}`) obs.push(o);
      expect(obs.length).toBeGreaterThan(0);
      const one = await c.get('Observation', obs[0].id!);
      expect(one).toMatchObject({ resourceType: 'Observation', id: obs[0].id });
    } finally {
      await c.close();
    }
  });

  it('400 carries the OperationOutcome issues with their paths', async () => {
    const c = client();
    try {
      const err = await failure(c.create('Patient', { resourceType: 'Patient', active: 'yes', name: 'Doe' } as Resource));
      expect(err).toBeInstanceOf(ApiError);
      const e = err as ApiError;
      expect(e.status).toBe(400);
      expect(e.operation).toBe('create');
      expect(e.resourceType).toBe('Patient');
      const paths = e.issues.map((i) => i.path ?? '').join(' ');
      expect(paths).toMatch(/active/);
      expect(paths).toMatch(/name/);
    } finally {
      await c.close();
    }
  });

  it('a CareTeam referring to an unknown patient is a 400', async () => {
    const c = client();
    try {
      const err = (await failure(
        c.create('CareTeam', { resourceType: 'CareTeam', status: 'active', subject: { reference: 'Patient/does-not-exist' } }),
      )) as ApiError;
      expect(err.status).toBe(400);
      expect(err.message).toMatch(/subject/);
    } finally {
      await c.close();
    }
  });

  it('404 for an unknown id, 405 for writes to Observation, 413 for oversized bodies', async () => {
    const c = client();
    try {
      const nf = (await failure(c.get('Patient', 'nope'))) as ApiError;
      expect(nf).toBeInstanceOf(ApiError);
      expect([nf.status, nf.resourceId, nf.operation]).toEqual([404, 'nope', 'get']);
      expect(nf.issues.length).toBeGreaterThan(0);

      const obs = (await failure(c.create('Observation' as 'Patient', { resourceType: 'Observation' }))) as ApiError;
      expect(obs.status).toBe(405);

      const big = patient('MRN-BIG');
      big.name = [{ family: 'x'.repeat(2 * 1024 * 1024) }];
      const tooBig = (await failure(c.create('Patient', big))) as ApiError;
      expect(tooBig.status).toBe(413);
    } finally {
      await c.close();
    }
  });

  it('401 (wrong key, wrong EMR id) and 403 (unknown tenant) are AuthenticationErrors with a hint and no key', async () => {
    for (const [over, status] of [
      [{ apiKey: 'wrong-key-0000' }, 401],
      [{ emrId: 'other-emr' }, 401],
      [{ tenantId: 'not-a-tenant' }, 403],
    ] as const) {
      const c = client(over);
      try {
        const err = (await failure(c.get('Patient', 'x'))) as AuthenticationError;
        expect(err).toBeInstanceOf(AuthenticationError);
        expect(err.status).toBe(status);
        expect(err.hint).toBeTruthy();
        expect(err.exitCode).toBe(2);
      } finally {
        await c.close();
      }
    }
  });

  it('isolates tenants', async () => {
    const a = client({ tenantId: 'clinic-a' });
    const b = client({ tenantId: 'clinic-b' });
    try {
      const p = await a.create('Patient', patient('MRN-ISO'));
      expect(((await failure(b.get('Patient', p.id))) as ApiError).status).toBe(404);
      for await (const r of b.list('Patient')) expect(r.id).not.toBe(p.id);
      const err = (await failure(b.create('CareTeam', { resourceType: 'CareTeam', status: 'active', subject: { reference: `Patient/${p.id}` } }))) as ApiError;
      expect(err.status).toBe(400);
    } finally {
      await a.close();
      await b.close();
    }
  });

  describe('injected faults surface as typed errors (no retries)', () => {
    it('429 with Retry-After', async () => {
      sandbox.setFaults({ rateLimitPerSecond: 2 });
      const c = client();
      try {
        const results = await Promise.allSettled(Array.from({ length: 12 }, () => c.get('Patient', 'nope')));
        const limited = results.filter((r) => r.status === 'rejected' && (r.reason as ApiError).status === 429);
        expect(limited.length).toBeGreaterThan(0);
        const e = (limited[0] as PromiseRejectedResult).reason as ApiError;
        expect(e.retryAfterMs).toBeGreaterThanOrEqual(1000);
        expect(allText(e)).not.toContain(API_KEY);
      } finally {
        sandbox.setFaults(undefined);
        await c.close();
      }
    });

    it('503', async () => {
      sandbox.setFaults({ error503Rate: 1 });
      const c = client();
      try {
        const e = (await failure(c.create('Patient', patient('MRN-503')))) as ApiError;
        expect(e.status).toBe(503);
      } finally {
        sandbox.setFaults(undefined);
        await c.close();
      }
    });

    it('dropped connection: a TransportError; for a create it is ambiguous', async () => {
      sandbox.setFaults({ dropRate: 1 });
      const c = client();
      try {
        const e = (await failure(c.get('Patient', 'x'))) as TransportError;
        expect(e).toBeInstanceOf(TransportError);
        expect(e.requestSent).toBe(true);
        expect(e.ambiguous).toBe(false);
        const ce = (await failure(c.create('Patient', patient('MRN-DROP')))) as TransportError;
        expect(ce.ambiguous).toBe(true);
      } finally {
        sandbox.setFaults(undefined);
        await c.close();
      }
    });

    it('ambiguous create: the client sees an ambiguous TransportError while the server stored it', async () => {
      const before = await count('clinic-a', 'MRN-AMB');
      sandbox.setFaults({ ambiguousCreateRate: 1 });
      const c = client();
      try {
        const e = (await failure(c.create('Patient', patient('MRN-AMB')))) as TransportError;
        expect(e.ambiguous).toBe(true);
      } finally {
        sandbox.setFaults(undefined);
        await c.close();
      }
      expect(await count('clinic-a', 'MRN-AMB')).toBe(before + 1);
    });

    it('latency beyond the request timeout is a timeout TransportError', async () => {
      sandbox.setFaults({ latencyMs: 1_500 });
      const c = client({ requestTimeoutMs: 300 });
      try {
        const e = (await failure(c.get('Patient', 'x'))) as TransportError;
        expect(e.failure).toBe('timeout');
      } finally {
        sandbox.setFaults(undefined);
        await c.close();
      }
    });

    it('with retries on, 503s and drops on reads are retried until success', async () => {
      const c = client({}, { retry: { baseDelayMs: 5, maxDelayMs: 20, retryAfterCapMs: 20, attempts: 40 } });
      try {
        const p = await c.create('Patient', patient('MRN-RETRY'));
        sandbox.setFaults({ error503Rate: 0.5, dropRate: 0.2, seed: 7 });
        for (let i = 0; i < 10; i++) expect((await c.get('Patient', p.id)).id).toBe(p.id);
      } finally {
        sandbox.setFaults(undefined);
        await c.close();
      }
    });
  });

  it('refuses to follow a next link to another origin (the key would travel there)', async () => {
    const { createServer } = await import('node:http');
    const rogue = createServer((_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ resourceType: 'Bundle', type: 'searchset', link: [{ relation: 'next', url: 'http://127.0.0.2:9/Patient?page=2' }], entry: [] }));
    });
    await new Promise<void>((r) => rogue.listen(0, '127.0.0.1', r));
    const port = (rogue.address() as { port: number }).port;
    const c = new CareClient(resolveConnection({ baseUrl: `http://127.0.0.1:${port}`, apiKey: API_KEY, emrId: 'e', tenantId: 't' }), { retry: false });
    try {
      const err = await failure(
        (async () => {
          for await (const _ of c.list('Patient')) void _;
        })(),
      );
      expect(err).toBeInstanceOf(ProtocolError);
      expect(String(err)).toMatch(/another origin/);
    } finally {
      await c.close();
      rogue.close();
    }
  });

  it('refuses plain http to a non-loopback host unless --allow-insecure', () => {
    let refused: unknown;
    try {
      resolveConnection({ baseUrl: 'http://care.example.org/api', apiKey: 'k', emrId: 'e', tenantId: 't' });
    } catch (err) {
      refused = err;
    }
    expect((refused as { describe(): string }).describe()).toMatch(/plain http:\/\/ to care\.example\.org.*--allow-insecure/);
    expect(resolveConnection({ baseUrl: 'http://care.example.org/api/', apiKey: 'k', emrId: 'e', tenantId: 't', allowInsecure: true }).baseUrl).toBe(
      'http://care.example.org/api',
    );
    expect(resolveConnection({ baseUrl: 'http://127.0.0.1:9/', apiKey: 'k', emrId: 'e', tenantId: 't' }).baseUrl).toBe('http://127.0.0.1:9');
  });

  it('reports every missing setting at once, with flag and variable names', () => {
    try {
      resolveConnection({}, {});
      throw new Error('unreachable');
    } catch (err) {
      const text = (err as { describe(): string }).describe();
      for (const s of ['CARE_BASE_URL', 'CARE_API_KEY', 'CARE_EMR_ID', 'CARE_TENANT_ID', '--base-url']) expect(text).toContain(s);
    }
  });

  it('the key never shows in settings when printed or serialised', () => {
    const s = resolveConnection({ baseUrl: 'https://x.example', apiKey: API_KEY, emrId: 'e', tenantId: 't' });
    expect(JSON.stringify(s)).not.toContain(API_KEY);
    expect(inspect(s, { depth: 5 })).not.toContain(API_KEY);
    expect(`${s.apiKey}`).not.toContain(API_KEY);
  });
});

async function count(tenant: string, mrn: string): Promise<number> {
  const c = client({ tenantId: tenant });
  let n = 0;
  try {
    for await (const p of c.list('Patient')) if ((p.identifier as { value: string }[] | undefined)?.some((i) => i.value === mrn)) n++;
  } finally {
    await c.close();
  }
  return n;
}
