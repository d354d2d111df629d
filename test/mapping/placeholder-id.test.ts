import { describe, expect, it } from 'vitest';
import { placeholderId } from '../../src/mapping/placeholder-id.js';

const FHIR_ID = /^[A-Za-z0-9\-.]{1,64}$/;

describe('placeholderId (dry run, validate --sample and test stubs share it)', () => {
  it('keeps short clean keys readable and deterministic', () => {
    expect(placeholderId('00123', 'dryrun')).toBe('dryrun-00123');
    expect(placeholderId('00123', 'sample')).toBe('sample-00123');
    expect(placeholderId('A|b c')).toBe('A-b-c');
  });

  it('is a valid FHIR id for a key of any length — a 60-character key included — and keeps long keys distinct', () => {
    const long = 'K'.repeat(60);
    for (const prefix of [undefined, 'dryrun', 'sample']) {
      for (const key of [long, `${long}1`, `${long}2`, 'x'.repeat(500), 'é'.repeat(70), '']) expect(placeholderId(key, prefix)).toMatch(FHIR_ID);
      expect(placeholderId(`${long}1`, prefix)).not.toBe(placeholderId(`${long}2`, prefix));
    }
  });
});
