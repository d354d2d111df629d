import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { client, paths, sampleCareTeam, samplePatient, samplePractitioner } from './helpers.js';

let sb: Sandbox;
let c: ReturnType<typeof client>;
let patientId: string;
let practitionerId: string;
beforeAll(async () => {
  sb = await startSandbox({ maxBodyBytes: 64 * 1024, observationsPerPatient: 0 });
  c = client(sb);
  patientId = (await c.create('Patient', samplePatient())).id;
  practitionerId = (await c.create('Practitioner', samplePractitioner())).id;
});
afterAll(async () => {
  await c.close();
  await sb.close();
});

const expectOutcome = (body: { resourceType: string; issue: { severity: string; code: string; diagnostics: string }[] }) => {
  expect(body.resourceType).toBe('OperationOutcome');
  expect(body.issue.length).toBeGreaterThan(0);
  for (const i of body.issue) expect(i).toMatchObject({ severity: 'error', code: expect.any(String), diagnostics: expect.any(String) });
};

describe('400 names each problem', () => {
  test('invalid JSON (without echoing the body)', async () => {
    const r = await c.call('POST', '/Patient', { raw: '{"resourceType":"Patient","name":[{"family":"Secretname"' });
    expect(r.status).toBe(400);
    expectOutcome(r.body);
    expect(r.body.issue[0].diagnostics).toMatch(/not valid JSON/);
    expect(r.text).not.toContain('Secretname');
    const empty = await c.call('POST', '/Patient', { raw: '' });
    expect(empty.status).toBe(400);
  });

  test('body not an object', async () => {
    for (const raw of ['[]', '"Patient"', '42', 'null']) {
      const r = await c.call('POST', '/Patient', { raw });
      expect(r.status, raw).toBe(400);
      expect(r.body.issue[0].diagnostics).toMatch(/must be a JSON object/);
    }
  });

  test('resourceType not matching the path', async () => {
    const r = await c.call('POST', '/Patient', { body: samplePractitioner() });
    expect(r.status).toBe(400);
    expect(r.body.issue).toHaveLength(1);
    expect(paths(r.body)).toEqual(['/resourceType']);
    expect(r.body.issue[0].diagnostics).toContain('"Patient"');
    const missing = await c.call('POST', '/Practitioner', { body: { active: true } });
    expect(paths(missing.body)).toEqual(['/resourceType']);
    const put = await c.call('PUT', `/Patient/${patientId}`, { body: { resourceType: 'CareTeam', id: patientId } });
    expect(paths(put.body)).toEqual(['/resourceType']);
  });

  test('an impossible calendar date (create and update), named by its field, the value not echoed', async () => {
    const r = await c.call('POST', '/Patient', { body: { ...samplePatient(), birthDate: '1985-02-30' } });
    expect(r.status).toBe(400);
    expect(paths(r.body)).toEqual(['/birthDate']);
    expect(r.body.issue[0].diagnostics).toMatch(/calendar date/);
    expect(r.text).not.toContain('1985-02-30');
    const put = await c.call('PUT', `/Patient/${patientId}`, { body: { ...samplePatient(), id: patientId, birthDate: '2001-04-31' } });
    expect(put.status).toBe(400);
    expect(paths(put.body)).toEqual(['/birthDate']);
    const leap = await c.call('POST', '/Patient', { body: { ...samplePatient(), birthDate: '2000-02-29' } });
    expect(leap.status).toBe(200);
  });

  test('id on create', async () => {
    const r = await c.call('POST', '/Patient', { body: { ...samplePatient(), id: 'mine' } });
    expect(r.status).toBe(400);
    expect(paths(r.body)).toEqual(['/id']);
    expect(r.body.issue[0].diagnostics).toMatch(/server assigns/);
  });

  test('update: body id missing or differing from the path', async () => {
    const missing = await c.call('PUT', `/Patient/${patientId}`, { body: samplePatient() });
    expect(missing.status).toBe(400);
    expect(paths(missing.body)).toEqual(['/id']);
    const differs = await c.call('PUT', `/Patient/${patientId}`, { body: { ...samplePatient(), id: 'other' } });
    expect(differs.status).toBe(400);
    expect(differs.body.issue[0].diagnostics).toContain(patientId);
    const patch = await c.call('PATCH', `/Patient/${patientId}`, { body: { id: 'other' } });
    expect(patch.status).toBe(400);
    expect(paths(patch.body)).toEqual(['/id']);
    const patchType = await c.call('PATCH', `/Patient/${patientId}`, { body: { resourceType: 'Practitioner' } });
    expect(paths(patchType.body)).toEqual(['/resourceType']);
  });

  test('schema violations: one issue per problem, expression = JSON path', async () => {
    const r = await c.call('POST', '/Patient', {
      body: { resourceType: 'Patient', active: 'yes', birthDate: '31/01/1970', name: [{ family: 1 }], telecom: [{ system: 'pigeon' }], shoeSize: 42 },
    });
    expect(r.status).toBe(400);
    expectOutcome(r.body);
    expect(paths(r.body).sort()).toEqual(['/active', '/birthDate', '/name/0/family', '/shoeSize', '/telecom/0/system']);
    const bySystem = r.body.issue.find((i: { expression: string[] }) => i.expression[0] === '/telecom/0/system');
    expect(bySystem).toMatchObject({ code: 'value', diagnostics: expect.stringContaining('"phone"') });
    expect(r.body.issue.find((i: { expression: string[] }) => i.expression[0] === '/shoeSize').code).toBe('structure');
    // an invalid update leaves the stored resource untouched
    const u = await c.call('PATCH', `/Patient/${patientId}`, { body: { gender: 'M' } });
    expect(paths(u.body)).toEqual(['/gender']);
    expect((await c.call('GET', `/Patient/${patientId}`)).body.meta.versionId).toBe('1');
  });

  test('CareTeam subject / member that do not exist in the tenant', async () => {
    const ok = await c.call('POST', '/CareTeam', { body: sampleCareTeam(patientId, practitionerId) });
    expect(ok.status).toBe(200);
    const body = sampleCareTeam('nope', 'ghost');
    (body.participant as unknown[]).push({ member: { reference: `Practitioner/${practitionerId}` } });
    const r = await c.call('POST', '/CareTeam', { body });
    expect(r.status).toBe(400);
    expect(paths(r.body)).toEqual(['/subject/reference', '/participant/0/member/reference']);
    expect(r.body.issue[0]).toMatchObject({ code: 'not-found', diagnostics: 'Patient/nope does not exist in this tenant' });
    // a practitioner id in the subject slot is a schema violation, not a lookup
    const swapped = await c.call('POST', '/CareTeam', {
      body: { ...sampleCareTeam(patientId, practitionerId), subject: { reference: `Practitioner/${practitionerId}` } },
    });
    expect(swapped.status).toBe(400);
    expect(swapped.body.issue[0]).toMatchObject({ code: 'value', expression: ['/subject/reference'] });
    // updates are checked too
    const put = await c.call('PATCH', `/CareTeam/${ok.body.id}`, { body: { subject: { reference: 'Patient/gone' } } });
    expect(paths(put.body)).toEqual(['/subject/reference']);
  });

  test('list parameters: bad _count / _cursor', async () => {
    expect((await c.call('GET', '/Patient?_count=0')).status).toBe(400);
    expect((await c.call('GET', '/Patient?_count=ten')).status).toBe(400);
    expect((await c.call('GET', '/Patient?_cursor=garbage')).status).toBe(400);
    expect((await c.call('GET', '/Patient?unknown=1&name=x')).status).toBe(200);
  });
});

describe('auth', () => {
  const good = () => c.authFor('demo-clinic');
  test('401 when a header is missing, naming it', async () => {
    for (const h of ['Service-SubscriptionKey', 'Service-EmrId', 'Service-TenantId']) {
      const auth = good();
      delete auth[h];
      const r = await c.call('GET', '/Patient', { auth });
      expect(r.status, h).toBe(401);
      expectOutcome(r.body);
      expect(r.body.issue[0].diagnostics).toContain(h);
    }
    const none = await c.call('GET', '/Patient', { auth: {} });
    expect(none.body.issue).toHaveLength(3);
  });

  test('401 for a wrong key or EMR id, without echoing the key', async () => {
    const wrongKey = await c.call('GET', '/Patient', { auth: { ...good(), 'Service-SubscriptionKey': 'guess-123' } });
    expect(wrongKey.status).toBe(401);
    expect(wrongKey.text).not.toContain('guess-123');
    expect(wrongKey.text).not.toContain(sb.credentials.apiKey);
    const wrongEmr = await c.call('GET', '/Patient', { auth: { ...good(), 'Service-EmrId': 'other-emr' } });
    expect(wrongEmr.status).toBe(401);
    // auth is checked before routing: no information about paths leaks
    expect((await c.call('GET', '/Nothing', { auth: {} })).status).toBe(401);
  });

  test('403 for an unknown tenant', async () => {
    const r = await c.call('GET', '/Patient', { auth: { ...good(), 'Service-TenantId': 'someone-else' } });
    expect(r.status).toBe(403);
    expectOutcome(r.body);
  });
});

describe('404 / 413', () => {
  test('unknown id and unknown path', async () => {
    for (const path of ['/Patient/doesnotexist', '/Observation/none', '/CareTeam/x', '/Practitioner/bad%20id', '/Medication', '/', '/Patient/a/b']) {
      const r = await c.call('GET', path);
      expect(r.status, path).toBe(404);
      expectOutcome(r.body);
    }
    const put = await c.call('PUT', '/Patient/doesnotexist', { body: { resourceType: 'Patient', id: 'doesnotexist' } });
    expect(put.status).toBe(404);
  });

  test('413 for bodies over maxBodyBytes (declared length and chunked)', async () => {
    const big = JSON.stringify({ resourceType: 'Patient', extension: [{ url: 'x', valueString: 'a'.repeat(200 * 1024) }] });
    const r = await c.call('POST', '/Patient', { raw: big });
    expect(r.status).toBe(413);
    expect(r.body.issue[0].code).toBe('too-long');
    // no Content-Length: the limit is enforced while reading, far-over-limit bodies are discarded unread
    async function* chunks() {
      for (let i = 0; i < 80; i++) yield Buffer.alloc(64 * 1024, 0x20);
    }
    const chunked = await c.call('POST', '/Patient', { raw: chunks() });
    expect(chunked.status).toBe(413);
    const huge = await c.call('POST', '/Patient', { raw: Buffer.alloc(4 * 1024 * 1024, 0x20) });
    expect(huge.status).toBe(413);
    // the server keeps serving
    expect((await c.call('GET', `/Patient/${patientId}`)).status).toBe(200);
  });
});

describe('tenant isolation', () => {
  test('a patient of tenant A is invisible to tenant B', async () => {
    const a = await c.create('Patient', samplePatient(), 'demo-clinic');
    expect((await c.call('GET', `/Patient/${a.id}`, { tenant: 'other-clinic' })).status).toBe(404);
    const listB = await c.call('GET', '/Patient?_count=1000', { tenant: 'other-clinic' });
    expect(listB.body.entry.map((e: { resource: { id: string } }) => e.resource.id)).not.toContain(a.id);
    const listObsB = await c.call('GET', '/Observation?_count=1000', { tenant: 'other-clinic' });
    expect(listObsB.body.entry).toEqual([]);
    const docB = await c.create('Practitioner', samplePractitioner(), 'other-clinic');
    const ct = await c.call('POST', '/CareTeam', { body: sampleCareTeam(a.id, docB.id), tenant: 'other-clinic' });
    expect(ct.status).toBe(400);
    expect(paths(ct.body)).toEqual(['/subject/reference']);
    const upd = await c.call('PATCH', `/Patient/${a.id}`, { body: { active: false }, tenant: 'other-clinic' });
    expect(upd.status).toBe(404);
  });
});
