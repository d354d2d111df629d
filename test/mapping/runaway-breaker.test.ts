// The breaker's decisions alone (runaway-breaker.ts); the rejects it makes are in expression-limit.test.ts.
import { describe, expect, it } from 'vitest';
import { RunawayBreaker } from '../../src/mapping/runaway-breaker.js';

/** Admits row by row; a row admitted times out when `timesOut(row)`, else ends. Returns the admitted rows. */
function drive(b: RunawayBreaker, rows: number, timesOut: (row: number) => boolean): number[] {
  const admitted: number[] = [];
  for (let row = 1; row <= rows; row++) {
    if (!b.admit()) continue;
    admitted.push(row);
    if (timesOut(row)) b.timedOut();
    else b.ended();
  }
  return admitted;
}

describe('RunawayBreaker', () => {
  it('admits every row while fewer than 3 time-outs in a row', () => {
    expect(drive(new RunawayBreaker(), 12, (r) => r % 3 === 0)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  });

  it('after 3 time-outs in a row, probes after 4, 8, 16, … refused rows: ~log2(rows) runs', () => {
    expect(drive(new RunawayBreaker(), 100, () => true)).toEqual([1, 2, 3, 7, 15, 31, 63]);
  });

  it('a probe that ends closes it: every row is admitted again', () => {
    expect(drive(new RunawayBreaker(), 12, (r) => r < 7)).toEqual([1, 2, 3, 7, 8, 9, 10, 11, 12]);
  });
});
