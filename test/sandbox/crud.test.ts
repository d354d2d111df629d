import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { getBundleValidator, getResourceValidator } from '../../src/schemas/resource-schemas.js';
import type { ResourceType } from '../../src/schemas/resource-types.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { client, sampleCareTeam, samplePatient, samplePractitioner } from './helpers.js';

let sb: Sandbox;
let c: ReturnType<typeof client>;
beforeAll(async () => {
  sb = await startSandbox({ observationsPerPatient: 0 });
  c = client(sb);
});
afterAll(async () => {
  await c.close();
  await sb.close();
});

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe.each(['Patient', 'Practitioner', 'CareTeam'] as const)('%s', (type) => {
  let body: Record<string, unknown>;
  beforeAll(async () => {
    if (type === 'CareTeam') {
      const p = await c.create('Patient', samplePatient());
      const d = await c.create('Practitioner', samplePractitioner());
      body = sampleCareTeam(p.id, d.id);
    } else body = type === 'Patient' ? samplePatient() : samplePractitioner();
  });

  test('create → 200 with id and meta, get returns the same resource', async () => {
    const r = await c.call('POST', `/${type}`, { body });
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toMatch(/^application\/json/);
    expect(r.body).toMatchObject({ ...body, resourceType: type });
    expect(r.body.id).toMatch(/^[A-Za-z0-9\-.]{1,64}$/);
    expect(r.body.meta).toEqual({ versionId: '1', lastUpdated: expect.stringMatching(ISO), source: 'urn:care-etl:sandbox#sandbox-emr' });
    expect(r.headers.etag).toBe('W/"1"');
    expect(getResourceValidator(type as ResourceType)(r.body)).toEqual([]);

    const g = await c.call('GET', `/${type}/${r.body.id}`);
    expect(g.status).toBe(200);
    expect(g.body).toEqual(r.body);
  });

  test('client-sent meta is replaced by the server', async () => {
    const r = await c.call('POST', `/${type}`, { body: { ...body, meta: { versionId: '99', source: 'me' } } });
    expect(r.status).toBe(200);
    expect(r.body.meta.versionId).toBe('1');
    expect(r.body.meta.source).toBe('urn:care-etl:sandbox#sandbox-emr');
  });

  test('PUT replaces the resource and increments versionId', async () => {
    const created = await c.create(type, body);
    const { meta: _m, ...rest } = created;
    const replacement = { ...rest, active: false, status: undefined } as Record<string, unknown>;
    if (type === 'CareTeam') {
      replacement.status = 'inactive';
      delete replacement.active;
      replacement.period = { start: '2024-01-15', end: '2024-06-30' };
    } else delete replacement.status;
    const u = await c.call('PUT', `/${type}/${created.id}`, { body: replacement });
    expect(u.status, u.text).toBe(200);
    expect(u.body.meta.versionId).toBe('2');
    expect(u.headers.etag).toBe('W/"2"');
    expect(Date.parse(u.body.meta.lastUpdated)).toBeGreaterThanOrEqual(Date.parse(created.meta.lastUpdated));
    const g = await c.call('GET', `/${type}/${created.id}`);
    expect(g.body).toEqual(u.body);
    // full replacement: a field left out is gone
    const { name: _n, ...withoutName } = rest;
    const u2 = await c.call('PUT', `/${type}/${created.id}`, { body: withoutName });
    expect(u2.body.meta.versionId).toBe('3');
    expect(u2.body.name).toBeUndefined();
  });

  test('PATCH merges (JSON merge patch) and increments versionId', async () => {
    const created = await c.create(type, body);
    const patch = type === 'CareTeam' ? { period: { end: '2024-12-31' }, name: null } : { active: false, name: null };
    const u = await c.call('PATCH', `/${type}/${created.id}`, { body: patch, headers: { 'Content-Type': 'application/merge-patch+json' } });
    expect(u.status, u.text).toBe(200);
    expect(u.body.meta.versionId).toBe('2');
    expect(u.body.name).toBeUndefined();
    expect(u.body.identifier ?? u.body.subject).toEqual(created.identifier ?? created.subject);
    if (type === 'CareTeam') expect(u.body.period).toEqual({ start: '2024-01-15', end: '2024-12-31' });
    else expect(u.body.active).toBe(false);
    const again = await c.call('PATCH', `/${type}/${created.id}`, { body: { id: created.id } });
    expect(again.body.meta.versionId).toBe('3');
  });

  test('If-Match guards against lost updates', async () => {
    const created = await c.create(type, body);
    const stale = await c.call('PATCH', `/${type}/${created.id}`, { body: {}, headers: { 'If-Match': 'W/"7"' } });
    expect(stale.status).toBe(412);
    const ok = await c.call('PATCH', `/${type}/${created.id}`, { body: {}, headers: { 'If-Match': 'W/"1"' } });
    expect(ok.status).toBe(200);
  });

  test('list returns a searchset bundle with fullUrl per entry', async () => {
    const r = await c.call('GET', `/${type}`);
    expect(r.status).toBe(200);
    expect(getBundleValidator()(r.body)).toEqual([]);
    expect(r.body).toMatchObject({ resourceType: 'Bundle', type: 'searchset', meta: { lastUpdated: expect.stringMatching(ISO) } });
    expect(r.body.link).toEqual([{ relation: 'self', url: `${sb.url}/${type}` }]);
    expect(r.body.entry.length).toBeGreaterThanOrEqual(3);
    for (const e of r.body.entry) {
      expect(e.fullUrl).toBe(`${sb.url}/${type}/${e.resource.id}`);
      expect(e.resource.resourceType).toBe(type);
      expect(e.resource.meta.versionId).toMatch(/^\d+$/);
    }
  });
});

describe('Observation is read-only', () => {
  test('POST / PUT / PATCH → 405 with Allow: GET and an OperationOutcome', async () => {
    sb.addObservations('demo-clinic', [{ resourceType: 'Observation', id: 'obs-1', status: 'final', code: { text: 'PHQ-9 total score' } }]);
    for (const [method, path] of [
      ['POST', '/Observation'],
      ['PUT', '/Observation/obs-1'],
      ['PATCH', '/Observation/obs-1'],
    ] as const) {
      const r = await c.call(method, path, { body: { resourceType: 'Observation' } });
      expect(r.status, method).toBe(405);
      expect(r.headers.allow).toBe('GET');
      expect(r.body).toMatchObject({ resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'not-supported' }] });
    }
    const g = await c.call('GET', '/Observation/obs-1');
    expect(g.status).toBe(200);
    expect(g.body).toMatchObject({ id: 'obs-1', meta: { versionId: '1' } });
  });

  test('other wrong methods → 405 with Allow', async () => {
    const d = await c.call('DELETE', '/Patient/x');
    expect(d.status).toBe(405);
    expect(d.headers.allow).toBe('GET, PUT, PATCH');
    const p = await c.call('PUT', '/Patient', { body: {} });
    expect(p.status).toBe(405);
    expect(p.headers.allow).toBe('GET, POST');
  });
});
