/**
 * Text from outside as the state records it (src/core/state-text.ts): of a server's `meta.versionId`, FHIR's id or a
 * number as text — nothing for what SQLite cannot bind (an object) or PostgreSQL cannot store (a NUL), which failed
 * every run; a rejection's reason without control characters, bounded.
 */
import { describe, expect, it } from 'vitest';
import { reasonText, versionIdOf } from '../../src/core/state-text.js';

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

describe('reasonText', () => {
  it('shows control characters as U+FFFD (a NUL failed the write on PostgreSQL), keeps tabs and line breaks', () => {
    expect(reasonText('HTTP 400: invalid at /name\u0000\u0007 x\ty\nz')).toBe('HTTP 400: invalid at /name\ufffd\ufffd x\ty\nz');
  });
  it('keeps 2,000 characters at most', () => {
    expect(reasonText('r'.repeat(2000))).toBe('r'.repeat(2000));
    expect(reasonText('r'.repeat(5000))).toBe(`${'r'.repeat(1999)}…`);
  });
});
