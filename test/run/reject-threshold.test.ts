import { describe, expect, it } from 'vitest';
import { parseRejectThreshold, withinRejectThreshold } from '../../src/pipeline/reject-threshold.js';

describe('--fail-on-rejects thresholds', () => {
  it('parses counts and percentages, refuses the rest', () => {
    expect(parseRejectThreshold('7')).toEqual({ count: 7 });
    expect(parseRejectThreshold(' 0.5 % ')).toEqual({ percent: 0.5 });
    for (const bad of ['-1', '1.5', '101%', 'x', '', '5 rows', '1e3']) expect(parseRejectThreshold(bad), bad).toBeUndefined();
  });

  it('at or below passes; a percentage is of the rows read', () => {
    expect(withinRejectThreshold({ count: 9 }, 9, 90)).toBe(true);
    expect(withinRejectThreshold({ count: 8 }, 9, 90)).toBe(false);
    expect(withinRejectThreshold({ percent: 10 }, 9, 90)).toBe(true);
    expect(withinRejectThreshold({ percent: 9.9 }, 9, 90)).toBe(false);
    expect(withinRejectThreshold({ count: 0 }, 0, 0)).toBe(true);
  });
});

describe('the pipeline option', () => {
  it('a bad threshold from a library caller is a usage error (exit 2)', async () => {
    const { checkedRejectThreshold } = await import('../../src/pipeline/reject-threshold.js');
    expect(checkedRejectThreshold('5%')).toBe('5%');
    expect(() => checkedRejectThreshold('five')).toThrow(expect.objectContaining({ exitCode: 2, message: expect.stringContaining('got `five`') }));
  });
});
