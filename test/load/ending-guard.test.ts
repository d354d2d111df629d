/**
 * Issue 22, item 8: the pure decision of the ending guard (src/load/ending-guard.ts) — how many a run may end
 * for one `onMissing: end` mapping, and what it says when it refuses.
 */
import { describe, expect, it } from 'vitest';
import { allowanceError, decideEnding, describeEnding, parseAllowance, type EndingInput } from '../../src/load/ending-guard.js';
import { defaultAllowEnding } from '../../src/mapping/mapping-defaults.js';

const dflt = parseAllowance(defaultAllowEnding())!;
const input = (x: Partial<EndingInput>): EndingInput => ({ wouldEnd: 0, loaded: 20, rowsRead: 40, allow: dflt, from: 'default', ...x });

describe('parseAllowance', () => {
  it('takes a count or a percentage up to 100', () => {
    expect(parseAllowance('5')).toEqual({ count: 5 });
    expect(parseAllowance(' 0 ')).toEqual({ count: 0 });
    expect(parseAllowance(7)).toEqual({ count: 7 });
    expect(parseAllowance('25%')).toEqual({ percent: 25 });
    expect(parseAllowance('12.5 %')).toEqual({ percent: 12.5 });
    expect(parseAllowance('100%')).toEqual({ percent: 100 });
  });

  it('refuses anything else', () => {
    for (const bad of ['x', '', '-1', '1.5', '101%', '%', '1e3', '0x10', '10%%']) expect(parseAllowance(bad), bad).toBeUndefined();
    expect(parseAllowance(-1)).toBeUndefined();
    expect(parseAllowance(2.5)).toBeUndefined();
    expect(allowanceError('--allow-ending', 'x')).toBe('Expected `--allow-ending` to be a count ≥ 0 or a percentage like 25%, got `x`');
  });

  it('the default comes from the mapping schema: 10 %', () => {
    expect(dflt).toEqual({ percent: 10 });
  });
});

describe('decideEnding', () => {
  it('nothing to end is always allowed, even from an empty source', () => {
    expect(decideEnding(input({ wouldEnd: 0, rowsRead: 0 }))).toMatchObject({ allowed: true });
  });

  it('the default allows 10 % of the loaded resources, rounded up', () => {
    expect(decideEnding(input({ wouldEnd: 2 }))).toEqual({ allowed: true, limit: 2 });
    expect(decideEnding(input({ wouldEnd: 3 }))).toEqual({ allowed: false, reason: 'above-limit', limit: 2 });
    expect(decideEnding(input({ wouldEnd: 18 }))).toEqual({ allowed: false, reason: 'above-limit', limit: 2 });
    // A small clinic can always end one per run; a large one at most a tenth.
    expect(decideEnding(input({ wouldEnd: 1, loaded: 5 }))).toEqual({ allowed: true, limit: 1 });
    expect(decideEnding(input({ wouldEnd: 2, loaded: 5 }))).toMatchObject({ allowed: false, limit: 1 });
    expect(decideEnding(input({ wouldEnd: 300, loaded: 3000 }))).toEqual({ allowed: true, limit: 300 });
    expect(decideEnding(input({ wouldEnd: 301, loaded: 3000 }))).toMatchObject({ allowed: false });
  });

  it('a count is absolute; 0 refuses any ending', () => {
    expect(decideEnding(input({ wouldEnd: 4, allow: { count: 4 }, from: 'mapping' }))).toEqual({ allowed: true, limit: 4 });
    expect(decideEnding(input({ wouldEnd: 5, allow: { count: 4 }, from: 'flag' }))).toMatchObject({ allowed: false, reason: 'above-limit' });
    expect(decideEnding(input({ wouldEnd: 1, allow: { count: 0 }, from: 'flag' }))).toMatchObject({ allowed: false, limit: 0 });
  });

  it('100 % allows a real closure', () => {
    expect(decideEnding(input({ wouldEnd: 20, rowsRead: 2, allow: { percent: 100 }, from: 'flag' }))).toEqual({ allowed: true, limit: 20 });
  });

  it('a source with no data rows never counts as every row gone: only --allow-ending covering them all lets it end', () => {
    expect(decideEnding(input({ wouldEnd: 1, loaded: 200, rowsRead: 0 }))).toMatchObject({ allowed: false, reason: 'empty-source' });
    expect(decideEnding(input({ wouldEnd: 20, rowsRead: 0, allow: { percent: 100 }, from: 'mapping' }))).toMatchObject({
      allowed: false,
      reason: 'empty-source',
    });
    expect(decideEnding(input({ wouldEnd: 20, rowsRead: 0, allow: { percent: 50 }, from: 'flag' }))).toMatchObject({ allowed: false, reason: 'empty-source' });
    expect(decideEnding(input({ wouldEnd: 20, rowsRead: 0, allow: { percent: 100 }, from: 'flag' }))).toMatchObject({ allowed: true });
    expect(decideEnding(input({ wouldEnd: 20, rowsRead: 0, allow: { count: 20 }, from: 'flag' }))).toMatchObject({ allowed: true });
  });

  it('ends counted beyond the loaded ones (interrupted creates adopted in this run) widen the base', () => {
    expect(decideEnding(input({ wouldEnd: 3, loaded: 0, allow: { percent: 100 }, from: 'flag' }))).toEqual({ allowed: true, limit: 3 });
  });
});

describe('describeEnding', () => {
  it('says how many, of how many, the limit, and how to lift it — counts only', () => {
    const x = input({ wouldEnd: 18 });
    expect(describeEnding('careteam', 'CareTeam', x, decideEnding(x))).toBe(
      'careteam: would end 18 of 20 care teams (90 %), above the limit of 10% (2; the default) — nothing ended; if the clinic really closed these, re-run with --allow-ending 18 (or 100%)',
    );
    const empty = input({ wouldEnd: 20, rowsRead: 0 });
    expect(describeEnding('patient', 'Patient', empty, decideEnding(empty))).toMatch(
      /^patient: would deactivate 20 of 20 patients \(100 %\), but its source has no data rows .* re-run with --allow-ending 100%$/,
    );
    const ok = input({ wouldEnd: 1, allow: { count: 3 }, from: 'mapping' });
    expect(describeEnding('practitioner', 'Practitioner', ok, decideEnding(ok))).toBe(
      'practitioner: would deactivate 1 of 20 practitioners (5 %), within the limit of 3 (allowEnding: of the mapping)',
    );
  });
});
