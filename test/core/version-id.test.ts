/**
 * What of a server's `meta.versionId` the state records (src/core/version-id.ts): FHIR's id, a number as text —
 * and nothing for what SQLite cannot bind (an object) or PostgreSQL cannot store (a NUL), which failed every run.
 */
import { describe, expect, it } from 'vitest';
import { versionIdOf } from '../../src/core/version-id.js';

describe('versionIdOf', () => {
  it.each([
    ['a FHIR id', '3', '3'],
    ['an opaque etag-like text', 'W/"2"', 'W/"2"'],
    ['a number (kept as text)', 7, '7'],
    ['256 characters', 'v'.repeat(256), 'v'.repeat(256)],
    ['257 characters', 'v'.repeat(257), undefined],
    ['empty', '', undefined],
    ['a NUL character', 'v\u00001', undefined],
    ['a line break', '1\n2', undefined],
    ['a lone surrogate', 'v\ud800', undefined],
    ['an object', { n: 1 }, undefined],
    ['an array', ['1'], undefined],
    ['NaN', Number.NaN, undefined],
    ['true', true, undefined],
    ['null', null, undefined],
    ['absent', undefined, undefined],
  ] as const)('%s', (_what, v, recorded) => {
    expect(versionIdOf(v)).toBe(recorded);
  });
});
