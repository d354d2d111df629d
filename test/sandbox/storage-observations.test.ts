import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { getResourceValidator } from '../../src/schemas/resource-schemas.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { client, samplePatient } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'care-etl-sandbox-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function withSandbox<T>(opts: Parameters<typeof startSandbox>[0], fn: (sb: Sandbox, c: ReturnType<typeof client>) => Promise<T>): Promise<T> {
  const sb = await startSandbox(opts);
  const c = client(sb);
  try {
    return await fn(sb, c);
  } finally {
    await c.close();
    await sb.close();
  }
}

type Obs = { resource: Record<string, any> };
const allObservations = async (c: ReturnType<typeof client>, tenant = 'demo-clinic') =>
  ((await c.call('GET', '/Observation?_count=1000', { tenant })).body.entry as Obs[]).map((e) => e.resource);

describe('durability', () => {
  test('a restart on the same file keeps resources, versions and order', async () => {
    const dataFile = join(dir, 'durable.db');
    const before = await withSandbox({ dataFile }, async (_sb, c) => {
      const p = await c.create('Patient', samplePatient());
      const q = await c.create('Patient', samplePatient());
      await c.call('PATCH', `/Patient/${q.id}`, { body: { active: false } });
      return { p, q: (await c.call('GET', `/Patient/${q.id}`)).body, list: (await c.call('GET', '/Patient')).body.entry };
    });
    await withSandbox({ dataFile }, async (sb, c) => {
      expect((await c.call('GET', `/Patient/${before.p.id}`)).body).toEqual(before.p);
      expect((await c.call('GET', `/Patient/${before.q.id}`)).body).toEqual(before.q);
      expect(before.q.meta.versionId).toBe('2');
      const list = (await c.call('GET', '/Patient')).body.entry;
      expect(list.map((e: Obs) => e.resource.id)).toEqual(before.list.map((e: Obs) => e.resource.id));
      expect(sb.stats().resources['demo-clinic']).toEqual({ Patient: 2, Observation: 4 });
      // generation continues where it stopped: the third patient gets the third patient's values
      await c.create('Patient', samplePatient());
      expect((await allObservations(c)).length).toBe(6);
    });
  });
});

describe('generated observations', () => {
  const run = (seed: number) =>
    withSandbox({ seed }, async (_sb, c) => {
      for (let i = 0; i < 5; i++) await c.create('Patient', samplePatient());
      return allObservations(c);
    });
  const values = (obs: Record<string, any>[]) => obs.map((o) => [o.code.coding[0].code, o.valueInteger, o.effectiveDateTime]);

  test('two per patient by default: one PHQ-9 and one GAD-7 with LOINC codes', async () => {
    const obs = await run(42);
    expect(obs).toHaveLength(10);
    const validate = getResourceValidator('Observation');
    for (const o of obs) {
      expect(validate(o)).toEqual([]);
      expect(o).toMatchObject({
        status: 'final',
        category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'survey', display: 'Survey' }], text: 'Survey' }],
        meta: { versionId: '1' },
      });
      expect(o.performer).toEqual([o.subject]);
      expect(o.subject.reference).toMatch(/^Patient\//);
    }
    const phq = obs.filter((o) => o.code.coding[0]?.code === '44261-6');
    const gad = obs.filter((o) => o.code.coding[0]?.code === '70274-6');
    // Texts as real servers write them: line breaks, tabs, quotes, formula characters (issue 13).
    expect(obs.some((o) => /[\r\n]/.test(o.code.text))).toBe(true);
    expect(obs.every((o) => /PHQ-9|GAD-7/.test(o.code.text))).toBe(true);
    expect(phq).toHaveLength(5);
    expect(gad).toHaveLength(5);
    for (const o of phq) {
      expect(o.code.coding[0]).toMatchObject({ system: 'http://loinc.org', code: '44261-6' });
      expect(o.valueInteger).toBeGreaterThanOrEqual(0);
      expect(o.valueInteger).toBeLessThanOrEqual(27);
    }
    for (const o of gad) {
      expect(o.code.coding[0]).toMatchObject({ system: 'http://loinc.org', code: '70274-6' });
      expect(o.valueInteger).toBeLessThanOrEqual(21);
    }
    expect(new Set(obs.map((o) => o.subject.reference)).size).toBe(5);
  });

  test('same seed and creation order ⇒ same values; another seed ⇒ different values', async () => {
    const a = values(await run(42));
    const b = values(await run(42));
    const other = values(await run(7));
    expect(b).toEqual(a);
    expect(other).not.toEqual(a);
  });

  test('observationsPerPatient, addObservations and generateObservations hooks', async () => {
    await withSandbox({ observationsPerPatient: 0 }, async (sb, c) => {
      await c.create('Patient', samplePatient());
      const p2 = await c.create('Patient', samplePatient());
      expect(await allObservations(c)).toEqual([]);
      expect(sb.generateObservations('demo-clinic', 3)).toBe(6);
      const obs = await allObservations(c);
      expect(obs.map((o) => o.code.coding[0].code)).toEqual(['44261-6', '70274-6', '44261-6', '44261-6', '70274-6', '44261-6']);
      sb.addObservations('demo-clinic', [
        { resourceType: 'Observation', status: 'preliminary', subject: { reference: `Patient/${p2.id}` }, valueInteger: 3 },
        { resourceType: 'Observation', id: 'fixed-id', meta: { versionId: '4', lastUpdated: '2024-01-01T00:00:00Z', source: 'x' } },
      ]);
      const after = await allObservations(c);
      expect(after).toHaveLength(8);
      expect(after[6]).toMatchObject({ status: 'preliminary', valueInteger: 3, meta: { versionId: '1' } });
      expect((await c.call('GET', '/Observation/fixed-id')).body.meta.versionId).toBe('4');
      expect(() => sb.addObservations('nobody', [])).toThrow(/unknown tenant/);
    });
  });
});
