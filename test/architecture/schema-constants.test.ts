/**
 * Where TypeScript needs a name as a literal (`WritableType`, `ReconcilePolicy`, `UpdateMethod`), the code holds
 * it once and the JSON Schema — which editors and users read — holds it once: these tests keep the two equal, and
 * the defaults come from the schema itself (`schemaDefault`).
 */
import { describe, expect, test } from 'vitest';
import { defaultOnMissing, defaultReconcile } from '../../src/mapping/mapping-defaults.js';
import { RECONCILE_POLICIES } from '../../src/mapping/types.js';
import { RESOURCE_TYPES, UPDATE_METHODS, WRITABLE_TYPES } from '../../src/schemas/resource-types.js';
import { schemaDefault, schemaJson } from '../../src/schemas/schema-files.js';

type Node = { enum?: unknown[]; properties?: Record<string, Node>; definitions?: Record<string, Node>; anyOf?: Node[]; default?: unknown };
const mapping = schemaJson('mapping.schema.json') as Node;
const defs = mapping.definitions!;

describe('names held by the code equal the schemas', () => {
  test('the types a mapping produces, and the ones updateMethod configures, are WRITABLE_TYPES', () => {
    expect(defs.resource!.properties!.type!.enum).toEqual([...WRITABLE_TYPES]);
    expect(Object.keys(defs.target!.properties!.updateMethod!.properties!)).toEqual([...WRITABLE_TYPES]);
    expect(RESOURCE_TYPES.filter((t) => !(WRITABLE_TYPES as readonly string[]).includes(t))).toEqual(['Observation']);
  });

  test('update methods and reconcile policies', () => {
    for (const branch of defs.updateMethod!.anyOf!) {
      expect(branch.enum ?? branch.properties!.method!.enum).toEqual([...UPDATE_METHODS]);
    }
    expect(defs.resource!.properties!.reconcile!.enum).toEqual([...RECONCILE_POLICIES]);
  });
});

describe('defaults are read from the schemas', () => {
  test('resources[].reconcile and onMissing', () => {
    expect(defaultReconcile()).toBe(defs.resource!.properties!.reconcile!.default);
    expect(defaultOnMissing()).toBe(defs.resource!.properties!.onMissing!.default);
    expect([defaultReconcile(), defaultOnMissing()]).toEqual(['auto', 'ignore']);
  });

  test('a pointer without a default, or a default of the wrong kind, is an error naming the schema and the pointer', () => {
    const isString = (v: unknown): v is string => typeof v === 'string';
    expect(schemaDefault('mapping-test.schema.json', '/properties/mapping', isString)).toBe('mapping.yaml');
    expect(() => schemaDefault('mapping.schema.json', '/definitions/resource/properties/map', isString)).toThrow(
      'schemas/mapping.schema.json: /definitions/resource/properties/map has no valid `default` (got undefined)',
    );
    expect(() => schemaDefault('mapping.schema.json', '/definitions/limits/properties/expressionTimeoutMs', isString)).toThrow('(got 5000)');
  });
});
