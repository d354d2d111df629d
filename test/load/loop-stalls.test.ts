/**
 * The client's own delay is not the server's (issue 28 item 2): round-trip times less the event loop's stalls within
 * them steer the discovered window. Synthetic samples on the clock-free window, then the limiter on a simulated
 * server (fake clock) whose responses wait for a stalled loop.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AdaptiveLimiter } from '../../src/load/adaptive-concurrency.js';
import { ConcurrencyWindow } from '../../src/load/concurrency-window.js';
import { LoopStallMeter, StallTimeline } from '../../src/load/loop-stalls.js';

describe('StallTimeline', () => {
  it('a response waited for the stall it was handled in (or just after), not for stalls the loop was free after', () => {
    const s = new StallTimeline();
    s.add(100, 101); // 1 ms late: timer granularity, no stall
    s.add(200, 230);
    s.add(300, 310);
    s.add(400, 420);
    s.add(425, 440); // the next tick late again
    expect(s.seenUntil).toBe(440);
    expect(s.delayBefore(0, 150)).toBe(0);
    expect(s.delayBefore(0, 232)).toBe(30); // handled just after the stall
    expect(s.delayBefore(215, 232)).toBe(15); // only since it was sent
    expect(s.delayBefore(0, 305)).toBe(5); // in a stall; the one before ended long before (the loop was free since)
    expect(s.delayBefore(0, 390)).toBe(0); // the loop was free for 80 ms before it was handled
    expect(s.delayBefore(410, 441)).toBe(15); // the loop ran the tick at 420: free then
  });
});

describe('ConcurrencyWindow (gradient): synthetic round-trip samples', () => {
  /** Feeds one round (one window's worth) of samples of `rttMs`, `stalledMs` of each stalled; returns the limit after it. */
  function round(w: ConcurrencyWindow, clock: { t: number }, rttMs: number, stalledMs = 0): number {
    clock.t += rttMs + 1; // requests started after the last change of the window: the round counts
    for (let i = 0; i < Math.max(4, w.limit); i++) w.onRtt(rttMs, w.limit, clock.t + i / 100, stalledMs);
    return w.limit;
  }
  function settledAt24() {
    const w = new ConcurrencyWindow({ initial: 24, min: 1, max: 32, growth: 'gradient' });
    const clock = { t: 0 };
    round(w, clock, 50); // baseline 50 ms, flat: grows
    round(w, clock, 60); // queueing shows: slow start ends
    return { w, clock, before: w.limit };
  }

  it('a stalled loop does not shrink the window: the stalled part of each round trip is taken out', () => {
    const { w, clock, before } = settledAt24();
    for (let i = 0; i < 10; i++) round(w, clock, 50 + 40, 40); // every request waited 40 ms for the loop
    expect(w.limit).toBeGreaterThanOrEqual(before);
  });

  it('a slower server still shrinks it, stalls or not', () => {
    const { w, clock, before } = settledAt24();
    for (let i = 0; i < 3; i++) round(w, clock, 100);
    const afterSlow = w.limit;
    expect(afterSlow).toBeLessThan(before);
    for (let i = 0; i < 3; i++) round(w, clock, 150 + 40, 40); // slower still, behind a stalled loop
    expect(w.limit).toBeLessThan(afterSlow);
  });

  it('a generous subtraction never lowers the baseline: after stalls, an unstalled round at the old latency is not read as a queue', () => {
    const { w, clock, before } = settledAt24();
    // Stalls that fell mid-flight (the response arrived after them): subtracted all the same, the estimate runs low.
    for (let i = 0; i < 5; i++) round(w, clock, 50, 30);
    for (let i = 0; i < 5; i++) round(w, clock, 52);
    expect(w.limit).toBeGreaterThanOrEqual(before);
  });
});

describe('AdaptiveLimiter: a simulated server behind a stalled event loop (fake clock)', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 1_000_000 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });
  const clock = () => Date.now();

  /**
   * A server serving `capacity` requests at once for 50 ms each (FIFO queue beyond), 3,000 requests through the
   * limiter. `stall`: the client's loop is held up for `ms` of every `everyMs` — a response that arrives meanwhile is
   * handled when the stall ends (as a busy loop does), and the stall is recorded as the drift timer would.
   */
  async function load(capacity: () => number, stall?: { ms: number; everyMs: number }, track = true) {
    const stalls = new StallTimeline();
    const lim = new AdaptiveLimiter({ initial: 4, max: 48, growth: 'gradient', now: clock, loopStalls: track ? stalls : undefined });
    const t0 = Date.now();
    const stallEnd = (t: number) => {
      if (!stall) return t;
      const phase = (t - t0) % stall.everyMs;
      return phase < stall.ms ? t + (stall.ms - phase) : t;
    };
    if (stall) for (let s = t0; s < t0 + 120_000; s += stall.everyMs) stalls.add(s, s + stall.ms);
    stalls.add(t0 + 120_000, t0 + 120_000); // the simulated drift timer has seen the whole run
    let serving = 0;
    const waiting: (() => void)[] = [];
    const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
    const send = async () => {
      const sent = Date.now();
      if (serving < capacity()) serving++;
      else await new Promise<void>((r) => waiting.push(r));
      await sleep(50);
      if (waiting.length > 0 && serving <= capacity()) waiting.shift()!();
      else serving--;
      await sleep(stallEnd(Date.now()) - Date.now()); // the response waits for the loop
      lim.onSuccess(Date.now() - sent);
    };
    const all = Promise.all(Array.from({ length: 3000 }, () => lim.run(send)));
    const limits: number[] = [];
    let finished = false;
    void all.then(() => (finished = true));
    while (!finished) {
      await vi.advanceTimersByTimeAsync(100);
      limits.push(lim.limit);
    }
    return { settled: lim.stats().settled, limits };
  }

  it('settles no lower with the loop stalled 60 ms of every 100 than on a quiet loop', async () => {
    const quiet = await load(() => 24);
    const stalled = await load(() => 24, { ms: 60, everyMs: 100 });
    expect(quiet.settled).toBeGreaterThanOrEqual(24);
    expect(stalled.settled).toBeGreaterThanOrEqual(quiet.settled);
  });

  it('still backs off when the server’s capacity drops behind a stalled loop', async () => {
    let capacity = 24;
    const run = load(() => capacity, { ms: 20, everyMs: 50 });
    await vi.advanceTimersByTimeAsync(2000);
    capacity = 8;
    const { limits } = await run;
    // After the drop (from 2 s on), the window comes down towards the new capacity.
    expect(Math.max(...limits.slice(0, 20))).toBeGreaterThanOrEqual(24);
    expect(Math.min(...limits.slice(40))).toBeLessThanOrEqual(8 * 1.75);
  });
});

describe('LoopStallMeter', () => {
  it('measures a blocked loop while busy, and stops ticking when idle', async () => {
    const m = new LoopStallMeter();
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    m.setBusy(true);
    await sleep(10);
    const from = performance.now();
    while (performance.now() < from + 40); // busy-wait: the loop is blocked for 40 ms
    const handledAt = performance.now(); // a response handled now waited for the loop
    await sleep(10);
    expect(m.seenUntil).toBeGreaterThanOrEqual(handledAt);
    const delay = m.delayBefore(from - 10, handledAt);
    expect(delay).toBeGreaterThanOrEqual(30);
    expect(delay).toBeLessThanOrEqual(handledAt - (from - 10)); // a busier machine stalls it longer: no tighter bound
    m.setBusy(false);
    const seen = m.seenUntil;
    await sleep(20);
    expect(m.seenUntil).toBe(seen);
  });
});
