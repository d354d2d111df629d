import { describe, expect, it } from 'vitest';
import { formatDiff, matches, showValue, structuralDiff } from '../../src/mapping-tests/structural-diff.js';

describe('structuralDiff', () => {
  it('exact: changed, missing and unexpected fields with JSON pointers', () => {
    const d = structuralDiff({ a: 1, b: { c: [1, 2] }, 'x/y': 'v' }, { a: 2, b: { c: [1], d: true }, 'x/y': 'v' });
    expect(d).toEqual([
      { path: '/a', kind: 'changed', expected: 1, got: 2 },
      { path: '/b/c/1', kind: 'missing', expected: 2 },
      { path: '/b/d', kind: 'unexpected', got: true },
    ]);
    expect(structuralDiff({ 'x/y': 1 }, { 'x/y': 2 })[0]!.path).toBe('/x~1y');
  });

  it('subset: only the given fields, recursively; arrays element-wise with the same length', () => {
    const got = { resourceType: 'Patient', name: [{ family: 'Lee', given: ['Ann'] }, { family: 'X' }], gender: 'female' };
    expect(structuralDiff({ name: [{ family: 'Lee' }, {}] }, got, { subset: true })).toEqual([]);
    expect(structuralDiff({ name: [{ family: 'Lee' }] }, got, { subset: true })).toEqual([{ path: '/name/1', kind: 'unexpected', got: { family: 'X' } }]);
    expect(structuralDiff({ name: [{ given: ['Bo'] }, {}] }, got, { subset: true })).toEqual([
      { path: '/name/0/given/0', kind: 'changed', expected: 'Bo', got: 'Ann' },
    ]);
    expect(matches({ gender: 'female' }, got, true)).toBe(true);
    expect(matches({ gender: 'female' }, got)).toBe(false);
  });

  it('type changes and the YAML number hint', () => {
    expect(structuralDiff({ a: [1] }, { a: { 0: 1 } })).toEqual([{ path: '/a', kind: 'changed', expected: [1], got: { 0: 1 } }]);
    const [n] = structuralDiff({ value: 123 }, { value: '00123' });
    expect(n!.note).toContain('quote it');
    expect(structuralDiff('a', 'b')).toEqual([{ path: '/', kind: 'changed', expected: 'a', got: 'b' }]);
  });

  it('caps the number of entries', () => {
    const exp = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`k${i}`, i]));
    expect(structuralDiff(exp, {}, { max: 5 })).toHaveLength(5);
  });

  it('formats entries on one line each, long values truncated', () => {
    expect(
      formatDiff([
        { path: '/a', kind: 'changed', expected: 'x', got: 'y' },
        { path: '/b', kind: 'missing', expected: 1 },
        { path: '/c', kind: 'unexpected', got: null },
      ]),
    ).toEqual(['/a: expected "x", got "y"', '/b: missing — expected 1', '/c: unexpected — got null']);
    expect(showValue('x'.repeat(200))).toHaveLength(80);
    expect(showValue(undefined)).toBe('(nothing)');
  });
});
