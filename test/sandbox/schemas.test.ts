import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { getBundleValidator, getResourceValidator, MAX_ISSUES } from '../../src/schemas/resource-schemas.js';
import { SCHEMA_DIR } from '../../src/schemas/schema-files.js';
import { WRITABLE_TYPES } from '../../src/schemas/resource-types.js';
import { samplePatient, samplePractitioner, sampleCareTeam, STAFF_ROLES_URL } from './helpers.js';

const patient = getResourceValidator('Patient');
const practitioner = getResourceValidator('Practitioner');
const careTeam = getResourceValidator('CareTeam');
const observation = getResourceValidator('Observation');

const OWN_FILES = ['common', 'patient', 'practitioner', 'careteam', 'observation', 'bundle'].map((n) => `${n}.schema.json`);

describe('schema files', () => {
  test('SCHEMA_DIR is the top-level schemas/ folder holding all six files', () => {
    expect(existsSync(join(SCHEMA_DIR, '..', 'package.json'))).toBe(true);
    expect(readdirSync(SCHEMA_DIR)).toEqual(expect.arrayContaining(OWN_FILES));
    expect(WRITABLE_TYPES).toEqual(['Patient', 'Practitioner', 'CareTeam']);
  });

  test('every property has a description (docs are generated from them)', () => {
    const missing: string[] = [];
    const walk = (node: unknown, where: string): void => {
      if (Array.isArray(node)) return node.forEach((n, i) => walk(n, `${where}/${i}`));
      if (typeof node !== 'object' || node === null) return;
      const o = node as Record<string, unknown>;
      if (o.properties && typeof o.properties === 'object') {
        for (const [k, v] of Object.entries(o.properties as Record<string, Record<string, unknown>>)) {
          if (typeof v.description !== 'string' && !where.includes('/if')) missing.push(`${where}/properties/${k}`);
        }
      }
      for (const [k, v] of Object.entries(o)) walk(v, `${where}/${k}`);
    };
    for (const f of OWN_FILES) walk(JSON.parse(readFileSync(join(SCHEMA_DIR, f), 'utf8')), f);
    expect(missing).toEqual([]);
  });
});

describe('resource validators', () => {
  test('accept the usage-example bodies', () => {
    expect(patient(samplePatient())).toEqual([]);
    expect(practitioner(samplePractitioner())).toEqual([]);
    expect(careTeam(sampleCareTeam('a1b2', 'c3d4'))).toEqual([]);
  });

  test('practitioner staff role is an Extension with url + valueString', () => {
    const p = samplePractitioner();
    p.extension = [{ url: STAFF_ROLES_URL, valueString: 'Psychiatrist' }];
    expect(practitioner(p)).toEqual([]);
    p.extension = [{ valueString: 'Psychiatrist' }];
    expect(practitioner(p)).toEqual([expect.objectContaining({ code: 'required', path: '/extension/0/url' })]);
    p.extension = [{ url: STAFF_ROLES_URL, valueCode: 'x' }];
    expect(practitioner(p)).toEqual([expect.objectContaining({ code: 'additionalProperties', path: '/extension/0/valueCode' })]);
  });

  test('reject wrong types with the JSON path, ajv keyword and a readable message', () => {
    const issues = patient({
      resourceType: 'Patient',
      active: 'yes',
      name: [{ family: 42, given: 'Jane' }],
      gender: 'F',
      telecom: {},
      nickname: 'JD',
    });
    const byPath = Object.fromEntries(issues.map((i) => [i.path, i]));
    expect(byPath['/active']).toMatchObject({ code: 'type', message: 'must be of type boolean', severity: 'error' });
    expect(byPath['/name/0/family']).toMatchObject({ code: 'type' });
    expect(byPath['/name/0/given']).toMatchObject({ code: 'type', message: 'must be of type array' });
    expect(byPath['/gender']).toMatchObject({ code: 'enum', message: expect.stringContaining('"female"') });
    expect(byPath['/telecom']).toMatchObject({ code: 'type' });
    expect(byPath['/nickname']).toMatchObject({ code: 'additionalProperties' });
    expect(patient({ resourceType: 'Practitioner' })).toEqual([expect.objectContaining({ path: '/resourceType', code: 'const' })]);
    expect(patient({})).toEqual([expect.objectContaining({ path: '/resourceType', code: 'required' })]);
    expect(patient([])[0]).toMatchObject({ path: '/', code: 'type' });
  });

  test('FHIR date / dateTime: partial dates valid, times need a timezone', () => {
    for (const ok of ['1970', '1970-01', '1970-01-31']) expect(patient({ resourceType: 'Patient', birthDate: ok })).toEqual([]);
    for (const bad of ['1970-13', '1970-01-32', '70-01-01', '1970-01-01T10:00:00Z', '']) {
      const issues = patient({ resourceType: 'Patient', birthDate: bad });
      expect(issues, bad).toEqual([expect.objectContaining({ path: '/birthDate', code: 'pattern', message: expect.stringContaining('FHIR R4 date') })]);
    }
    const period = (start: string) => careTeam({ resourceType: 'CareTeam', period: { start } });
    for (const ok of ['2024', '2024-02', '2024-02-29', '2024-02-29T10:00:00Z', '2024-02-29T10:00:00.123+02:00']) expect(period(ok), ok).toEqual([]);
    for (const bad of ['2024-02-29T10:00:00', '2024-02-29T10:00Z', '2024-02-29 10:00:00Z']) expect(period(bad), bad).toHaveLength(1);
  });

  test('references: any resource type in general, narrowed for CareTeam subject and members', () => {
    const ct = sampleCareTeam('p1', 'd1');
    ct.subject = { reference: 'Practitioner/p1' };
    (ct.participant as Record<string, unknown>[])[0]!.member = { reference: 'Patient/d1' };
    expect(careTeam(ct).map((i) => i.path)).toEqual(['/subject/reference', '/participant/0/member/reference']);
    expect(careTeam({ resourceType: 'CareTeam', subject: { reference: 'Patient/has space' } })).toHaveLength(1);
    expect(observation({ resourceType: 'Observation', performer: [{ reference: 'Practitioner/x' }], subject: { reference: 'Patient/y' } })).toEqual([]);
    expect(observation({ resourceType: 'Observation', subject: { reference: 'Group/y' } })).toHaveLength(1);
  });

  test('CareTeam status follows FHIR care-team-status; role codings may be null', () => {
    expect(careTeam({ resourceType: 'CareTeam', status: 'open' })[0]).toMatchObject({ code: 'enum', path: '/status' });
    expect(careTeam({ resourceType: 'CareTeam', participant: [{ role: [{ coding: [{ system: null, code: null, display: null }] }] }] })).toEqual([]);
    // only role codings are nullable
    expect(observation({ resourceType: 'Observation', code: { coding: [{ system: null }] } })).toHaveLength(1);
  });

  test('Observation allows code.coding and valueInteger', () => {
    expect(
      observation({
        resourceType: 'Observation',
        id: 'o1',
        meta: { versionId: '1', lastUpdated: '2024-01-01T00:00:00.000Z', source: 'urn:x' },
        status: 'final',
        category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'survey', display: 'Survey' }], text: 'Survey' }],
        code: { coding: [{ system: 'http://loinc.org', code: '44261-6' }], text: 'PHQ-9 total score' },
        subject: { reference: 'Patient/p1' },
        effectiveDateTime: '2024-03-01T10:00:00Z',
        performer: [{ reference: 'Patient/p1' }],
        valueInteger: 12,
      }),
    ).toEqual([]);
    expect(observation({ resourceType: 'Observation', valueInteger: 1.5 })[0]).toMatchObject({ path: '/valueInteger', code: 'type' });
  });

  test('meta is allowed in bodies and lastUpdated must be a date-time', () => {
    expect(patient({ resourceType: 'Patient', id: 'abc', meta: { versionId: '3', lastUpdated: '2024-01-01T00:00:00Z' } })).toEqual([]);
    expect(patient({ resourceType: 'Patient', meta: { lastUpdated: 'yesterday' } })[0]).toMatchObject({ path: '/meta/lastUpdated', code: 'format' });
    expect(patient({ resourceType: 'Patient', id: 'bad id' })[0]).toMatchObject({ path: '/id', code: 'pattern' });
  });

  test('issues are capped at 50', () => {
    const issues = patient({ resourceType: 'Patient', name: Array.from({ length: 80 }, () => ({ family: 1 })) });
    expect(issues).toHaveLength(MAX_ISSUES);
    expect(issues[MAX_ISSUES - 1]).toMatchObject({ code: 'too-many-issues', message: '31 more issues not shown' });
  });
});

describe('bundle validator', () => {
  const bundle = (resource: unknown) => ({
    resourceType: 'Bundle',
    id: 'b1',
    meta: { lastUpdated: '2024-01-01T00:00:00Z' },
    type: 'searchset',
    link: [{ relation: 'self', url: 'http://127.0.0.1/Patient' }],
    entry: [{ fullUrl: 'http://127.0.0.1/X/1', resource }],
  });
  test('checks each entry against the schema of its resourceType', () => {
    expect(getBundleValidator()(bundle({ ...samplePatient(), id: 'p1' }))).toEqual([]);
    expect(getBundleValidator()(bundle({ resourceType: 'CareTeam', participant: [{ role: [{ coding: [{ code: null }] }] }] }))).toEqual([]);
    const issues = getBundleValidator()(bundle({ resourceType: 'Patient', active: 1 }));
    expect(issues).toEqual([expect.objectContaining({ path: '/entry/0/resource/active', code: 'type' })]);
    expect(getBundleValidator()(bundle({ resourceType: 'Medication' }))[0]).toMatchObject({ path: '/entry/0/resource/resourceType', code: 'enum' });
  });
});
