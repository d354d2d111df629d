import { describe, expect, test } from 'vitest';
import { validateResource } from '../../src/validate/resource-validator.js';

describe('validateResource: what the loader would refuse, decided before anything is sent', () => {
  test('a mapped resource carrying an id is rejected at /id (the server assigns ids; a create would fail)', () => {
    expect(validateResource('Patient', { resourceType: 'Patient', id: 'p-1' })).toEqual([
      expect.objectContaining({ code: 'invalid', path: '/id', message: expect.stringContaining('must not set `id`') }),
    ]);
    expect(validateResource('Patient', { resourceType: 'Patient', active: true })).toEqual([]);
  });

  test('an impossible birth date written as is (no $date) names the field', () => {
    expect(validateResource('Patient', { resourceType: 'Patient', birthDate: '1985-02-30' })).toEqual([
      expect.objectContaining({ code: 'format', path: '/birthDate' }),
    ]);
  });

  test('a resource with nothing but its resourceType (every field of the map came out empty) is rejected, not sent blank', () => {
    for (const type of ['Patient', 'Practitioner', 'CareTeam'] as const) {
      expect(validateResource(type, { resourceType: type })).toEqual([
        expect.objectContaining({ code: 'resource-empty', message: expect.stringContaining(`produced a ${type} with nothing but its resourceType`) }),
      ]);
    }
    expect(validateResource('Patient', { resourceType: 'Patient', active: false })).toEqual([]);
  });
});
