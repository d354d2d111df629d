import { describe, expect, it } from 'vitest';
import { ConcurrencyWindow } from '../../src/load/concurrency-window.js';

/**
 * The slow start of capacity discovery on synthetic round trips: a window from 4 up to a ceiling of 32 fed requests of
 * 25 ms that start as slots free up. Each step sends every sample of one request that ended; the table says how many
 * samples of requests started after the last change it takes to double.
 */
describe('ConcurrencyWindow (gradient) slow start', () => {
  /**
   * Requests in flight at the window, refilled as they end; `rtt(window)`: the round trip of one sent at that window.
   * Each answer's sample goes to the window in the order they end. Returns the window's changes.
   */
  function feed(w: ConcurrencyWindow, rtt: (window: number) => number, until: (w: ConcurrencyWindow) => boolean) {
    let t = 0;
    const send = (at: number) => ({ started: at, ends: at + rtt(w.limit) });
    const inFlight = Array.from({ length: w.limit }, () => send(0));
    const changes: { at: number; from: number; to: number; freshSamples: number }[] = [];
    let changedAt = 0;
    let fresh = 0;
    while (!until(w) && t < 10_000) {
      inFlight.sort((a, b) => a.ends - b.ends);
      const { started, ends } = inFlight.shift()!;
      t = ends;
      const before = w.limit;
      if (started >= changedAt) fresh++;
      w.onRtt(ends - started, inFlight.length + 1, t);
      if (w.limit !== before) {
        changes.push({ at: t, from: before, to: w.limit, freshSamples: fresh });
        changedAt = t;
        fresh = 0;
      }
      while (inFlight.length < w.limit) inFlight.push(send(t));
    }
    return changes;
  }

  it('a round that shows queueing ends the slow start: no doubling past a capacity of 12, whole rounds after', () => {
    const w = new ConcurrencyWindow({ initial: 4, min: 1, max: 64, growth: 'gradient' });
    // A server of 12 at once × 25 ms: past 12 in flight the round trip grows with the queue (Little).
    const changes = feed(
      w,
      (window) => 25 * Math.max(1, window / 12),
      () => false,
    );
    expect(changes[0]).toMatchObject({ from: 4, to: 8 });
    expect(changes[1]).toMatchObject({ from: 8, to: 16 });
    // At 16 the round trips grew by a third: no doubling to 32, the window moves towards the capacity.
    expect(changes[2]!.to).toBeLessThan(16);
    // Never doubled again: it stays near the capacity plus its queue allowance (√window), draining now and then.
    expect(Math.max(...changes.map((c) => c.to))).toBeLessThan(24);
    // Out of slow start a round is a whole window again.
    for (const c of changes.slice(3)) expect(c.freshSamples).toBeGreaterThanOrEqual(c.from);
  });

  it('at the ceiling the rounds are whole windows again', () => {
    const w = new ConcurrencyWindow({ initial: 32, min: 1, max: 32, growth: 'gradient' });
    for (let i = 0; i < 31; i++) w.onRtt(25, 32, 25 + i / 10);
    w.onRtt(60, 32, 30); // the 32nd sample: a round of 32 with one slow answer, flat
    for (let i = 0; i < 16; i++) w.onRtt(50, 32, 80 + i / 10); // half a window of doubled round trips: no round yet
    expect(w.limit).toBe(32);
    for (let i = 0; i < 16; i++) w.onRtt(50, 32, 82 + i / 10); // the whole window: queueing, the window shrinks
    expect(w.limit).toBeLessThan(32);
  });
});
