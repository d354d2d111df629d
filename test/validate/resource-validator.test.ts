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
});
