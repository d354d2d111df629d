/**
 * Issue 28 item 1: when a phase's verification listing starts — the creates' time left against the listing's
 * (src/load/verify-start.ts), and the recent rate of rows done it is estimated from.
 */
import { describe, expect, it } from 'vitest';
import {
  followDue,
  FOLLOW_MIN_CREATES,
  listingPageSize,
  RowRate,
  UNSEEN_PAGE_SIZE,
  verifyStartDue,
  type VerifyStartInput,
} from '../../src/load/verify-start.js';

/**
 * 10,000 care teams created at 1,000 rows/s onto an empty server, pages of 1,000 at 33 ms: the listing needs 0.33 s,
 * and starts when 1.3 times that is left (0.429 s: 429 rows) — early rather than late (its re-read takes the rest).
 */
const base: VerifyStartInput = { rowsTotal: 10_000, rowsRead: 0, rowsDone: 0, created: 0, rowsPerSec: 1000, listedBefore: 0, pageSize: 1000, pageMs: 33 };

describe('verifyStartDue', () => {
  it.each([
    // [what, input, due]
    ['nothing created yet', { rowsDone: 9990, created: 0 }, false],
    ['the rows of the source unknown (a FIFO, a JSON document not read yet)', { rowsTotal: undefined, rowsDone: 9990, created: 9990 }, false],
    ['no rate measured yet', { rowsPerSec: undefined, rowsDone: 9990, created: 9990 }, false],
    ['a stalled phase (rate 0)', { rowsPerSec: 0, rowsDone: 9990, created: 9990 }, false],
    ['half-way: 5 s of creates left, a 0.33 s listing', { rowsDone: 5000, created: 5000 }, false],
    ['500 rows left (0.5 s): more than 1.3 times the listing’s 10 pages × 33 ms', { rowsDone: 9500, created: 9500 }, false],
    ['440 rows left: just above 1.3 times the listing', { rowsDone: 9560, created: 9560 }, false],
    ['420 rows left: below 1.3 times the listing', { rowsDone: 9580, created: 9580 }, true],
    ['330 rows left: as long as the listing', { rowsDone: 9670, created: 9670 }, true],
    ['every row done (the reading over, the last answers in)', { rowsDone: 10_000, created: 10_000 }, true],
    [
      'an estimate below the rows already read: unknown (only the end of the reading is exact)',
      { rowsTotal: 9000, rowsRead: 9500, rowsDone: 9400, created: 9400 },
      false,
    ],
    ['the reading ended: its rows exact, every one done', { rowsTotal: 9500, rowsRead: 9500, rowsDone: 9500, created: 9500 }, true],
    ['50,000 listed before the phase: 60 pages (1.98 s), 2.4 s of rows left', { listedBefore: 50_000, rowsDone: 7600, created: 7600 }, true],
    ['the same 50,000, 2.6 s of rows left', { listedBefore: 50_000, rowsDone: 7400, created: 7400 }, false],
    ['a re-run creating 1 in 100 rows: one page, 40 rows left', { rowsDone: 9960, created: 99 }, true],
    ['a re-run creating 1 in 100 rows: one page, 45 rows left', { rowsDone: 9955, created: 99 }, false],
    ['the server’s own page size unknown (0 → counted as 1)', { pageSize: 0, rowsTotal: 100, rowsDone: 40, created: 40, pageMs: 1 }, true],
  ] as const)('%s → %s', (_what, over, due) => {
    expect(verifyStartDue({ ...base, ...over })).toBe(due);
  });
});

describe('RowRate', () => {
  it('unknown until 8 rows and some time apart; then rows per second over about the last second', () => {
    const r = new RowRate();
    expect(r.perSec).toBeUndefined();
    r.add(0, 0);
    r.add(0, 16);
    expect(r.perSec).toBeUndefined(); // no time passed
    r.add(10, 4);
    expect(r.perSec).toBeUndefined(); // 4 rows
    r.add(100, 100);
    expect(r.perSec).toBe(1000);
    // a slow start (100 rows/s for 2 s) then 1,000 rows/s: the ramp is forgotten after a second
    const ramp = new RowRate();
    for (let t = 0; t <= 2000; t += 100) ramp.add(t, t / 10);
    for (let t = 2100; t <= 4000; t += 100) ramp.add(t, 200 + (t - 2000));
    expect(ramp.perSec).toBeCloseTo(1000, 0);
  });
});

describe('listingPageSize', () => {
  it.each([
    // [what, asked, served, page size]
    ['no page with a next link read yet: a small page assumed', 1000, undefined, UNSEEN_PAGE_SIZE],
    ['… or the size asked for, when smaller', 2, undefined, 2],
    ['the server serves what was asked', 1000, 1000, 1000],
    ['the server ignores `_count` and pages by 50', 1000, 50, 50],
    ['the server caps `_count` at 500', 1000, 500, 500],
    ['a page with a next link but no entries (counted as 1)', 1000, 0, 1],
    ['never above the size asked for', 100, 250, 100],
  ] as const)('%s', (_what, asked, served, size) => {
    expect(listingPageSize(asked, served)).toBe(size);
  });
});

describe('followDue', () => {
  it.each([
    // [what, created since the last reading began, resources on the last page, due]
    ['nothing created since', 0, 0, false],
    [`fewer than ${FOLLOW_MIN_CREATES} creates, an empty last page`, FOLLOW_MIN_CREATES - 1, 0, false],
    [`${FOLLOW_MIN_CREATES} creates, a short last page`, FOLLOW_MIN_CREATES, 10, true],
    ['a last page of 900 read again only once twice as many were created', 1799, 900, false],
    ['1,800 created since, a last page of 900', 1800, 900, true],
  ] as const)('%s → %s', (_what, since, last, due) => {
    expect(followDue(since, last)).toBe(due);
  });
});
