import { describe, expect, it } from 'vitest';
import { nestsDeeperThan } from '../../src/core/json-depth.js';

const nested = (depth: number): unknown => JSON.parse(`${'['.repeat(depth)}${']'.repeat(depth)}`);

describe('nestsDeeperThan: nesting measured without recursion', () => {
  it('counts objects and arrays, the value itself as level 1', () => {
    expect(nestsDeeperThan({ a: [{ b: 1 }] }, 3)).toBe(false);
    expect(nestsDeeperThan({ a: [{ b: {} }] }, 3)).toBe(true);
    expect(nestsDeeperThan(nested(64), 64)).toBe(false);
    expect(nestsDeeperThan(nested(65), 64)).toBe(true);
    for (const scalar of ['text', 1, null, undefined, true]) expect(nestsDeeperThan(scalar, 0)).toBe(false);
  });

  it('a value 100,000 deep: an answer, not a stack overflow', () => {
    expect(nestsDeeperThan({ resourceType: 'Patient', extension: nested(100_000) }, 64)).toBe(true);
  });

  it('a limit past the recursive walk is measured the same, with an explicit stack', () => {
    expect(nestsDeeperThan(nested(5000), 5000)).toBe(false);
    expect(nestsDeeperThan(nested(5001), 5000)).toBe(true);
    expect(nestsDeeperThan({ a: [1, { b: nested(1500) }] }, 1503)).toBe(false);
    expect(nestsDeeperThan({ a: [1, { b: nested(1500) }] }, 1502)).toBe(true);
  });
});
