import { describe, expect, it } from 'vitest';
import { interpolate } from '../../src/mapping/interpolate.js';

describe('interpolate', () => {
  const env = { A: 'alpha', EMPTY: '', URL: 'https://x.test' };

  it('replaces present variables anywhere in the string', () => {
    expect(interpolate('${URL}/api/${A}', env)).toEqual({ value: 'https://x.test/api/alpha', problems: [], interpolated: true });
  });

  it('leaves strings without references alone', () => {
    expect(interpolate('plain $A text', env)).toEqual({ value: 'plain $A text', problems: [], interpolated: false });
  });

  it('uses the default when the variable is unset or empty', () => {
    expect(interpolate('${NOPE:-fallback}', env).value).toBe('fallback');
    expect(interpolate('${EMPTY:-fallback}', env).value).toBe('fallback');
    expect(interpolate('${A:-fallback}', env).value).toBe('alpha');
    expect(interpolate('x${NOPE:-}y', env)).toMatchObject({ value: 'xy', problems: [] });
  });

  it('reports a missing or empty variable at the offset of its ${, naming it but no value', () => {
    const r = interpolate('key-${NOPE}-${EMPTY}', env);
    expect(r.problems).toHaveLength(2);
    expect(r.problems[0]).toMatchObject({ offset: 4, code: 'env-missing' });
    expect(r.problems[0]!.message).toContain('NOPE is not set');
    expect(r.problems[1]).toMatchObject({ offset: 12, code: 'env-missing' });
    expect(r.problems[1]!.message).toContain('EMPTY is empty');
  });

  it('supports $${ as a literal ${', () => {
    expect(interpolate('cost $${A} ${A}', env).value).toBe('cost ${A} alpha');
  });

  it('reports malformed references', () => {
    expect(interpolate('${1BAD}', env).problems[0]!.code).toBe('interpolation-invalid');
    expect(interpolate('x ${A', env).problems[0]).toMatchObject({ code: 'interpolation-invalid', offset: 2 });
  });
});
