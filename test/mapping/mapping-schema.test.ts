import { readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { MAPPING_SCHEMA_URL } from '../../src/mapping/load-mapping.js';
import { fixture } from './helpers.js';

type Schema = Record<string, unknown>;
const schema = JSON.parse(readFileSync(MAPPING_SCHEMA_URL, 'utf8')) as Schema;

/** Every property schema reachable from the root, with its JSON path. */
function propertySchemas(s: unknown, path = '#'): [string, Schema][] {
  if (s === null || typeof s !== 'object') return [];
  const out: [string, Schema][] = [];
  const obj = s as Schema;
  if (obj.properties && typeof obj.properties === 'object') {
    for (const [k, v] of Object.entries(obj.properties as Schema)) {
      if (v !== true) out.push([`${path}/properties/${k}`, v as Schema]);
    }
  }
  for (const [k, v] of Object.entries(obj)) {
    if (v && typeof v === 'object') {
      if (Array.isArray(v)) v.forEach((x, i) => out.push(...propertySchemas(x, `${path}/${k}/${i}`)));
      else out.push(...propertySchemas(v, `${path}/${k}`));
    }
  }
  return out;
}

describe('schemas/mapping.schema.json', () => {
  it('compiles with ajv in strict mode and has the published $id', () => {
    expect(schema.$id).toBe('https://care-etl.dev/schemas/mapping.schema.json');
    expect(() => new Ajv({ strict: true, allErrors: true }).compile(schema)).not.toThrow();
  });

  it('documents every property (descriptions are the docs and the editor hover text)', () => {
    const undocumented = propertySchemas(schema)
      .filter(([, s]) => typeof s.description !== 'string' && !(typeof s.$ref === 'string'))
      .map(([p]) => p);
    expect(undocumented).toEqual([]);
    for (const [name, def] of Object.entries(schema.definitions as Schema)) {
      expect(typeof (def as Schema).description, name).toBe('string');
    }
  });

  it('closes every object with fixed properties (typos are errors)', () => {
    const open = propertySchemas(schema)
      .map(([, s]) => s)
      .concat([schema], Object.values(schema.definitions as Schema) as Schema[])
      .filter((s) => s.properties && s.additionalProperties === undefined && s.type === 'object');
    expect(open).toEqual([]);
  });

  it('accepts the valid fixture and the design example of the brief', () => {
    const validate = new Ajv({ strict: true }).compile(schema);
    expect(validate(parse(readFileSync(fixture('valid.yaml'), 'utf8')))).toBe(true);
    const example = {
      version: 1,
      target: { baseUrl: '${CARE_BASE_URL}', apiKey: '${CARE_API_KEY}', updateMethod: { Patient: 'PUT', CareTeam: { method: 'PATCH', path: '{type}/{id}' } } },
      sources: { patients: { path: 'data/patients.csv' }, clinicians: { path: 'data/practitioners.json', records: 'staff' } },
      lookups: { gender: { M: 'male', F: 'female' }, marital: { path: 'codes.csv', key: 'CODE', value: 'LABEL' } },
      resources: [
        { name: 'patient', type: 'Patient', from: 'patients', key: 'MRN', match: 'identifier', map: '{}' },
        { name: 'careteam', type: 'CareTeam', from: 'patients', groupBy: 'MRN', onMissing: 'ignore', map: '{}' },
      ],
      exports: { observations: { columns: { id: 'id', mrn: '$sourceKey(subject.reference)' } } },
    };
    expect(validate(example), JSON.stringify(validate.errors)).toBe(true);
  });
});
