import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AdaptiveLimiter } from '../../src/load/adaptive-concurrency.js';
import { withRetry, type RetryDecision } from '../../src/core/retry.js';

function deferred<T = void>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets queued promise callbacks run (no timers). */
const flush = () => vi.advanceTimersByTimeAsync(0);

beforeEach(() => {
  vi.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

const clock = () => Date.now();

describe('AdaptiveLimiter queue', () => {
  it('runs at most `limit` tasks at once, in FIFO order', async () => {
    const lim = new AdaptiveLimiter({ initial: 2, now: clock, pacing: false });
    const started: number[] = [];
    const gates = Array.from({ length: 5 }, () => deferred<number>());
    const results = gates.map((g, i) =>
      lim.run(async () => {
        started.push(i);
        return g.promise;
      }),
    );
    await flush();
    expect(started).toEqual([0, 1]);
    expect(lim.inFlight).toBe(2);
    expect(lim.queued).toBe(3);

    gates[1]!.resolve(1);
    await flush();
    expect(started).toEqual([0, 1, 2]);
    gates[0]!.resolve(0);
    await flush();
    expect(started).toEqual([0, 1, 2, 3]);
    for (const g of gates.slice(2)) g.resolve(9);
    await expect(Promise.all(results)).resolves.toEqual([0, 1, 9, 9, 9]);
    expect(lim.inFlight).toBe(0);
    await expect(lim.idle()).resolves.toBeUndefined();
  });

  it('propagates errors (async and sync throws) and keeps going', async () => {
    const lim = new AdaptiveLimiter({ initial: 1, now: clock });
    const a = lim.run(async () => Promise.reject(new Error('async boom')));
    const b = lim.run((() => {
      throw new Error('sync boom');
    }) as () => Promise<never>);
    const c = lim.run(async () => 'fine');
    await expect(a).rejects.toThrow('async boom');
    await expect(b).rejects.toThrow('sync boom');
    await expect(c).resolves.toBe('fine');
    expect(lim.inFlight).toBe(0);
  });

  it('idle() waits for queued and running tasks', async () => {
    const lim = new AdaptiveLimiter({ initial: 1, now: clock });
    const g = deferred();
    void lim.run(() => g.promise);
    void lim.run(async () => undefined);
    let idle = false;
    void lim.idle().then(() => (idle = true));
    await flush();
    expect(idle).toBe(false);
    g.resolve();
    await flush();
    expect(idle).toBe(true);
  });

  it('accepts tasks queued from inside a running task', async () => {
    const lim = new AdaptiveLimiter({ initial: 2, now: clock });
    const order: string[] = [];
    await lim.run(async () => {
      order.push('outer');
      await lim.run(async () => void order.push('inner'));
    });
    expect(order).toEqual(['outer', 'inner']);
  });

  it('validates its options', () => {
    expect(() => new AdaptiveLimiter({ initial: 0 })).toThrow(RangeError);
    expect(() => new AdaptiveLimiter({ initial: 4, min: 5, max: 4 })).toThrow(RangeError);
    expect(new AdaptiveLimiter({ initial: 10, max: 4 }).limit).toBe(4);
  });
});

describe('AdaptiveLimiter AIMD', () => {
  it('halves on overload, at most once per cooldown, never below min', () => {
    const lim = new AdaptiveLimiter({ initial: 16, now: clock, cooldownMs: 1000, pacing: false });
    lim.onOverload();
    expect(lim.limit).toBe(8);
    lim.onOverload(); // same burst
    vi.advanceTimersByTime(999);
    lim.onOverload();
    expect(lim.limit).toBe(8);
    vi.advanceTimersByTime(1);
    lim.onOverload();
    expect(lim.limit).toBe(4);
    for (let i = 0; i < 5; i++) {
      vi.advanceTimersByTime(1000);
      lim.onOverload();
    }
    expect(lim.limit).toBe(1);

    const floor = new AdaptiveLimiter({ initial: 8, min: 3, now: clock, pacing: false });
    floor.onOverload();
    vi.advanceTimersByTime(1000);
    floor.onOverload();
    expect(floor.limit).toBe(3);
  });

  it('grows by one per round of `limit` successes, never above max', () => {
    const lim = new AdaptiveLimiter({ initial: 8, now: clock, pacing: false });
    lim.onOverload();
    expect(lim.limit).toBe(4);
    for (let i = 0; i < 3; i++) lim.onSuccess();
    expect(lim.limit).toBe(4);
    lim.onSuccess();
    expect(lim.limit).toBe(5);
    for (let i = 0; i < 5; i++) lim.onSuccess();
    expect(lim.limit).toBe(6);
    for (let i = 0; i < 1000; i++) lim.onSuccess();
    expect(lim.limit).toBe(8);
  });

  it('onUnavailable (503) halves the window once per cooldown, without pacing or pausing', () => {
    const lim = new AdaptiveLimiter({ initial: 16, now: clock });
    lim.onUnavailable();
    lim.onUnavailable();
    expect(lim.limit).toBe(8);
    expect(lim.pacedRate).toBeUndefined();
    expect(lim.pausedUntil).toBe(-Infinity);
    vi.advanceTimersByTime(1000);
    lim.onUnavailable();
    expect(lim.limit).toBe(4);
  });

  it('starts more tasks as soon as the limit grows', async () => {
    const lim = new AdaptiveLimiter({ initial: 2, now: clock, pacing: false });
    lim.onOverload();
    expect(lim.limit).toBe(1);
    const gates = [deferred(), deferred(), deferred()];
    gates.forEach((g) => void lim.run(() => g.promise));
    await flush();
    expect(lim.inFlight).toBe(1);
    lim.onSuccess(); // one round at limit 1 → 2
    await flush();
    expect(lim.inFlight).toBe(2);
  });
});

describe('AdaptiveLimiter pauses and pacing', () => {
  it('starts nothing new until Retry-After has elapsed', async () => {
    const lim = new AdaptiveLimiter({ initial: 4, now: clock });
    lim.onOverload(500);
    const started: number[] = [];
    const all = [0, 1, 2].map(() => lim.run(async () => void started.push(Date.now())));
    await vi.advanceTimersByTimeAsync(499);
    expect(started).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(started).toEqual([1_000_500]);
    // The others follow, paced (an overload before any success: slow start from a low pace).
    await vi.advanceTimersByTimeAsync(5000);
    await Promise.all(all);
    expect(started).toHaveLength(3);
    expect(Math.min(...started)).toBeGreaterThanOrEqual(1_000_500);
  });

  it('extends the pause with a later Retry-After, never shortens it', async () => {
    const lim = new AdaptiveLimiter({ initial: 4, now: clock });
    lim.onOverload(1000);
    lim.onOverload(200);
    expect(lim.pausedUntil).toBe(1_001_000);
    vi.advanceTimersByTime(500);
    lim.onOverload(1000); // within cooldown: no second decrease, but the pause moves
    expect(lim.pausedUntil).toBe(1_001_500);
    expect(lim.limit).toBe(2);
    const p = lim.run(async () => Date.now());
    await vi.advanceTimersByTimeAsync(1000);
    await expect(p).resolves.toBe(1_001_500);
  });

  it('caps an absurd Retry-After', () => {
    const lim = new AdaptiveLimiter({ initial: 4, now: clock, retryAfterCapMs: 5000 });
    lim.onOverload(3_600_000);
    expect(lim.pausedUntil).toBe(1_005_000);
  });

  describe("a run's limiter (forRun): one 429's shared pause is capped at 60 s, or --max-retry-after when smaller", () => {
    const cases = [
      { name: 'no --max-retry-after', maxRetryAfterMs: undefined, cap: 60_000 },
      { name: '--max-retry-after 120s (the default)', maxRetryAfterMs: 120_000, cap: 60_000 },
      { name: '--max-retry-after 5s', maxRetryAfterMs: 5_000, cap: 5_000 },
    ];
    for (const c of cases) {
      for (const pinned of [undefined, 4]) {
        it(`${c.name}, ${pinned ? 'pinned' : 'discovered'} concurrency: a Retry-After of a day holds starts ${c.cap / 1000} s`, async () => {
          const lim = AdaptiveLimiter.forRun({ concurrency: pinned, maxRetryAfterMs: c.maxRetryAfterMs, clock });
          lim.onOverload(86_400_000);
          expect(lim.pausedUntil).toBe(1_000_000 + c.cap);
          const started = lim.run(async () => Date.now());
          await vi.advanceTimersByTimeAsync(c.cap);
          await expect(started).resolves.toBe(1_000_000 + c.cap);
        });
      }
    }
  });

  it('is never paced while the server does not push back', async () => {
    const lim = new AdaptiveLimiter({ initial: 4, now: clock });
    const all = Array.from({ length: 200 }, () =>
      lim.run(async () => {
        await new Promise((r) => setTimeout(r, 5));
        lim.onSuccess();
      }),
    );
    await vi.advanceTimersByTimeAsync(1000);
    await Promise.all(all);
    expect(lim.pacedRate).toBeUndefined();
    expect(lim.limit).toBe(4);
  });

  it('after an overload, paces starts just under the rate the server admitted', async () => {
    const lim = new AdaptiveLimiter({ initial: 50, now: clock });
    // 100 successes over the last second: 100/s admitted.
    void lim.run(() => new Promise(() => {})); // keeps the limiter busy
    for (let i = 0; i < 100; i++) {
      vi.advanceTimersByTime(10);
      lim.onSuccess();
    }
    expect(lim.pacedRate).toBeUndefined();
    lim.onOverload();
    expect(lim.pacedRate).toBeGreaterThan(85);
    expect(lim.pacedRate).toBeLessThan(95);

    const starts: number[] = [];
    const all = Array.from({ length: 21 }, () => lim.run(async () => void starts.push(Date.now())));
    await vi.advanceTimersByTimeAsync(1000);
    await Promise.all(all);
    const gaps = starts.slice(1).map((t, i) => t - starts[i]!);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(10);
    expect(starts.at(-1)! - starts[0]!).toBeGreaterThanOrEqual(200);
  });

  it("does not trust a rate measured on the first moments (the server's banked burst)", () => {
    const lim = new AdaptiveLimiter({ initial: 16, now: clock });
    void lim.run(() => new Promise(() => {}));
    for (let i = 0; i < 40; i++) {
      vi.advanceTimersByTime(1);
      lim.onSuccess(); // 40 successes in 40 ms: "1000/s"
    }
    lim.onOverload(1000);
    // Starts from what was admitted per second (40), not from 1000/s.
    expect(lim.pacedRate).toBeLessThanOrEqual(40);
    expect(lim.pausedUntil).toBe(Date.now() + 1000);
  });
});

describe('AdaptiveLimiter against a simulated rate-limited server', () => {
  /**
   * Deterministic simulation on the fake clock: a server with a token bucket (rate R, burst B) or a
   * fixed window (R per second), answering 429 (with Retry-After if set) when out of tokens, latency L.
   * Every task goes through withRetry(() => limiter.run(send)), as in the loader.
   */
  async function simulate(p: {
    rate: number;
    burst?: number;
    fixedWindow?: boolean;
    latencyMs: number;
    concurrency: number;
    tasks: number;
    retryAfterMs?: number;
  }) {
    let seed = 42;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    let tokens = p.fixedWindow ? 0 : (p.burst ?? p.rate);
    let last = p.fixedWindow ? -1 : Date.now();
    const take = () => {
      const t = Date.now();
      if (p.fixedWindow) {
        const w = Math.floor(t / 1000);
        if (w !== last) [last, tokens] = [w, p.rate];
      } else {
        tokens = Math.min(p.burst ?? p.rate, tokens + ((t - last) * p.rate) / 1000);
        last = t;
      }
      if (tokens < 1) return false;
      tokens -= 1;
      return true;
    };
    class TooMany extends Error {
      constructor(readonly retryAfterMs?: number) {
        super('429');
      }
    }
    const classify = (e: unknown): RetryDecision => (e instanceof TooMany ? { retry: true, delayMs: e.retryAfterMs, reason: '429' } : { retry: false });
    const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
    const lim = new AdaptiveLimiter({ initial: p.concurrency, now: clock });
    let rejected = 0;
    const successAt: number[] = [];
    const t0 = Date.now();
    const send = async () => {
      const ok = take();
      await sleep(ok ? p.latencyMs : Math.min(5, p.latencyMs));
      if (ok) {
        successAt.push(Date.now() - t0);
        lim.onSuccess();
        return;
      }
      rejected++;
      lim.onOverload(p.retryAfterMs);
      throw new TooMany(p.retryAfterMs);
    };
    let done = 0;
    let failed = 0;
    for (let i = 0; i < p.tasks; i++) {
      withRetry(() => lim.run(send), classify, { attempts: 20, sleep, random }).then(
        () => done++,
        () => failed++,
      );
    }
    while (done + failed < p.tasks) await vi.advanceTimersByTimeAsync(100);
    const end = successAt.at(-1)!;
    // Steady state: leave out the first 2 s (the server's initial burst, the first probes).
    const steady = successAt.filter((t) => t >= 2000).length;
    return { failed, rejected, share: (steady * 1000) / (end - 2000) / p.rate, limiter: lim };
  }

  it('sandbox-like bucket (burst = 1 s, Retry-After: 1 s, fast server): ≥ 85 % of R, few 429s', async () => {
    const r = await simulate({ rate: 100, burst: 100, latencyMs: 2, concurrency: 8, tasks: 2500, retryAfterMs: 1000 });
    expect(r.failed).toBe(0);
    expect(r.share).toBeGreaterThanOrEqual(0.85);
    expect(r.rejected).toBeLessThan(2500 * 0.02);
  });

  it('small burst, Retry-After: 1 s: ≥ 85 % of R, few 429s', async () => {
    const r = await simulate({ rate: 100, burst: 20, latencyMs: 40, concurrency: 16, tasks: 3000, retryAfterMs: 1000 });
    expect(r.failed).toBe(0);
    expect(r.share).toBeGreaterThanOrEqual(0.85);
    expect(r.rejected).toBeLessThan(3000 * 0.01);
  });

  it('slow server, no Retry-After: ≥ 85 % of R without a storm', async () => {
    const r = await simulate({ rate: 50, burst: 10, latencyMs: 300, concurrency: 32, tasks: 1500 });
    expect(r.failed).toBe(0);
    expect(r.share).toBeGreaterThanOrEqual(0.85);
    expect(r.rejected).toBeLessThan(1500 * 0.05);
  });

  it('fixed-window quota, no Retry-After: ≥ 85 % of R', async () => {
    const r = await simulate({ rate: 50, fixedWindow: true, latencyMs: 20, concurrency: 8, tasks: 1500 });
    expect(r.failed).toBe(0);
    expect(r.share).toBeGreaterThanOrEqual(0.85);
    expect(r.rejected).toBeLessThan(1500 * 0.05);
  });

  it('no rate limit: full speed, never paced', async () => {
    const r = await simulate({ rate: 1e9, latencyMs: 10, concurrency: 8, tasks: 2000 });
    expect(r.rejected).toBe(0);
    expect(r.limiter.pacedRate).toBeUndefined();
    expect(r.limiter.limit).toBe(8);
  });
});

describe('AdaptiveLimiter capacity discovery (growth: gradient) against a simulated server', () => {
  /**
   * Deterministic simulation on the fake clock of a server that serves `capacity()` requests at once, each for
   * `serviceMs` (±10 %), and queues the rest FIFO (so the round-trip time grows past saturation), optionally behind a
   * token bucket (rate R, burst R) answering 429 + Retry-After: 1 s at once. Every task goes through
   * withRetry(() => limiter.run(send)) and reports its round-trip time, as the loader does.
   */
  async function discover(p: {
    capacity: () => number;
    serviceMs: number;
    tasks: number;
    limiter: AdaptiveLimiter;
    rate?: number;
    /** Called every 100 ms of simulated time. */
    tick?: (elapsedMs: number) => void;
  }) {
    const lim = p.limiter;
    let seed = 7;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
    let serving = 0;
    let maxServing = 0;
    const waiting: (() => void)[] = [];
    let tokens = p.rate ?? 0;
    let last = Date.now();
    class TooMany extends Error {}
    const classify = (e: unknown): RetryDecision => (e instanceof TooMany ? { retry: true, delayMs: 1000, reason: '429' } : { retry: false });
    const t0 = Date.now();
    const successAt: number[] = [];
    const rtts: { at: number; ms: number }[] = [];
    let rejected = 0;
    const send = async () => {
      const sent = Date.now();
      if (p.rate !== undefined) {
        tokens = Math.min(p.rate, tokens + ((sent - last) * p.rate) / 1000);
        last = sent;
        if (tokens < 1) {
          await sleep(1);
          rejected++;
          lim.onOverload(1000);
          throw new TooMany('429');
        }
        tokens -= 1;
      }
      if (serving < p.capacity()) serving++;
      else await new Promise<void>((r) => waiting.push(r)); // the slot is handed over on release
      maxServing = Math.max(maxServing, serving);
      await sleep(p.serviceMs * (0.9 + 0.2 * random())); // ±10 %: a real server's requests do not finish in lockstep
      if (serving > p.capacity()) serving--;
      else if (waiting.length > 0) waiting.shift()!();
      else serving--;
      const ms = Date.now() - sent;
      successAt.push(Date.now() - t0);
      rtts.push({ at: Date.now() - t0, ms });
      lim.onSuccess(ms);
    };
    let done = 0;
    let failed = 0;
    for (let i = 0; i < p.tasks; i++) {
      withRetry(() => lim.run(send), classify, { attempts: 20, sleep, random }).then(
        () => done++,
        () => failed++,
      );
    }
    const limits: number[] = [];
    while (done + failed < p.tasks) {
      await vi.advanceTimersByTimeAsync(100);
      limits.push(lim.limit);
      p.tick?.(Date.now() - t0);
    }
    /** Successes per second between two instants (ms since the start). */
    const throughput = (from: number, to = successAt.at(-1)!) => (successAt.filter((t) => t >= from && t < to).length * 1000) / (to - from);
    const medianRtt = (from: number, to = Infinity) => {
      const xs = rtts
        .filter((r) => r.at >= from && r.at < to)
        .map((r) => r.ms)
        .sort((a, b) => a - b);
      return xs[xs.length >> 1]!;
    };
    // Timers still pending once every task settled (the limiter's wake-ups): none, or the process would wait for them.
    return { failed, rejected, maxServing, limits, throughput, medianRtt, stats: lim.stats(), timersLeft: vi.getTimerCount() };
  }

  const discovering = (max: number, initial = 4) => new AdaptiveLimiter({ initial, max, growth: 'gradient', now: clock });

  it('grows to the capacity of a server that queues beyond it, and keeps it full', async () => {
    // 24 at once × 50 ms = 480 req/s; a ceiling well above, so only the latency can stop the growth.
    const r = await discover({ capacity: () => 24, serviceMs: 50, tasks: 6000, limiter: discovering(128) });
    expect(r.failed).toBe(0);
    // Doubling while the latency is flat: the capacity is reached within a second of simulated time (20 round trips).
    expect(Math.max(...r.limits.slice(0, 10))).toBeGreaterThanOrEqual(24);
    // …and no doubling past it: 32 shows the queue (session 32's half-window slow-start rounds went on to 64).
    expect(r.stats.max).toBeLessThanOrEqual(36);
    expect(r.throughput(2000) / 480).toBeGreaterThanOrEqual(0.95);
    // Settled a small queue above the capacity: not stuck at the start, not running away to the ceiling.
    expect(r.stats.settled).toBeGreaterThanOrEqual(24);
    expect(r.stats.settled).toBeLessThanOrEqual(36);
    expect(Math.max(...r.limits.slice(20))).toBeLessThanOrEqual(48);
    expect(r.medianRtt(2000)).toBeLessThanOrEqual(50 * 1.5);
  });

  it('does not double past a capacity just under the next window (16 under the default ceiling of 32)', async () => {
    // The requests that wait for a slot end last: a round judged before they end sees no queue (session 32's
    // half-window rounds reached 32 here; whole rounds stop near the capacity).
    const r = await discover({ capacity: () => 16, serviceMs: 50, tasks: 3000, limiter: discovering(32) });
    expect(r.failed).toBe(0);
    expect(r.stats.max).toBeLessThanOrEqual(22);
    expect(r.stats.settled).toBeGreaterThanOrEqual(16);
  });

  it('backs off when queueing inflates the latency (the capacity drops mid-run), and grows again when it returns', async () => {
    let capacity = 32;
    const lim = discovering(128);
    const windowAt: number[] = []; // the window every 100 ms
    const r = await discover({
      capacity: () => capacity,
      serviceMs: 50,
      tasks: 9000,
      limiter: lim,
      tick: (ms) => {
        capacity = ms >= 4000 && ms < 10_000 ? 8 : 32;
        windowAt.push(lim.limit);
      },
    });
    expect(r.failed).toBe(0);
    const before = windowAt.slice(25, 40); // 2.5–4 s: capacity 32
    const during = windowAt.slice(70, 100); // 7–10 s: capacity 8
    const after = windowAt.slice(130, 150); // 13–15 s: capacity 32 again
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    expect(mean(before)).toBeGreaterThanOrEqual(32);
    expect(mean(during)).toBeLessThanOrEqual(8 * 1.75);
    expect(Math.min(...during)).toBeGreaterThanOrEqual(4); // backed off, not collapsed
    expect(r.throughput(7000, 10_000) / (8 / 0.05)).toBeGreaterThanOrEqual(0.9);
    expect(r.medianRtt(7000, 10_000)).toBeLessThanOrEqual(50 * 1.75);
    expect(mean(after)).toBeGreaterThanOrEqual(32);
    expect(r.throughput(13_000, 15_000) / (32 / 0.05)).toBeGreaterThanOrEqual(0.9);
  });

  it('never goes above its ceiling, and reaches it when the server has room for more', async () => {
    const r = await discover({ capacity: () => Infinity, serviceMs: 50, tasks: 4000, limiter: discovering(32) });
    expect(r.failed).toBe(0);
    expect(Math.max(...r.limits)).toBe(32);
    expect(r.stats).toMatchObject({ settled: 32, max: 32, ceiling: 32, growth: 'gradient' });
    expect(r.stats.maxInFlight).toBeLessThanOrEqual(32);
    expect(r.maxServing).toBeLessThanOrEqual(32);
    expect(r.throughput(1000) / (32 / 0.05)).toBeGreaterThanOrEqual(0.9);
  });

  it('a pinned window (AIMD, max = initial) stays where it is pinned, round-trip times or not', async () => {
    const r = await discover({ capacity: () => Infinity, serviceMs: 50, tasks: 2000, limiter: new AdaptiveLimiter({ initial: 8, max: 8, now: clock }) });
    expect(r.failed).toBe(0);
    expect(new Set(r.limits)).toEqual(new Set([8]));
    expect(r.stats).toMatchObject({ settled: 8, max: 8, maxInFlight: 8, ceiling: 8, growth: 'aimd' });
    expect(r.maxServing).toBe(8);
  });

  it('still reaches ≥ 0.9 of a token-bucket rate limit (429 + Retry-After: 1 s) while discovering', async () => {
    // Room for far more than the rate needs (100/s × 20 ms = 2 in flight): only the pacer can hold the rate.
    const r = await discover({ capacity: () => Infinity, serviceMs: 20, rate: 100, tasks: 3000, limiter: discovering(32) });
    expect(r.failed).toBe(0);
    expect(r.throughput(2000) / 100).toBeGreaterThanOrEqual(0.9);
    expect(r.rejected).toBeLessThan(3000 * 0.02);
    expect(r.stats.max).toBeLessThanOrEqual(32);
  });

  it('against a server answering in seconds, settles near its capacity instead of creeping up to the ceiling', async () => {
    // 24 at once × 5 s = 4.8 req/s. 10 s of baseline would be two rounds: it expired before a drain re-measured it,
    // and the window crept up towards the ceiling (57 of 64 after 2 minutes), with round trips 2.4× the server's.
    const r = await discover({ capacity: () => 24, serviceMs: 5000, tasks: 600, limiter: discovering(64) });
    expect(r.failed).toBe(0);
    expect(r.stats.settled).toBeGreaterThanOrEqual(24);
    expect(r.stats.settled).toBeLessThanOrEqual(36);
    expect(r.stats.max).toBeLessThanOrEqual(40);
    expect(r.throughput(60_000) / 4.8).toBeGreaterThanOrEqual(0.9);
    expect(r.medianRtt(60_000)).toBeLessThanOrEqual(5000 * 1.5);
  });

  it('runs to the end with few round-trip times: a run smaller than the window, a server answering in 0 ms', async () => {
    const tiny = await discover({ capacity: () => 24, serviceMs: 50, tasks: 3, limiter: discovering(32) });
    expect(tiny).toMatchObject({ failed: 0, timersLeft: 0, stats: { settled: 4, maxInFlight: 3 } });
    const instant = await discover({ capacity: () => Infinity, serviceMs: 0, tasks: 2000, limiter: discovering(32) });
    expect(instant).toMatchObject({ failed: 0, timersLeft: 0 });
    expect(instant.stats.max).toBeLessThanOrEqual(32);
  });

  it('leaves no timer behind once every task settled, paced or not', async () => {
    const paced = await discover({ capacity: () => Infinity, serviceMs: 20, rate: 100, tasks: 500, limiter: discovering(32) });
    expect(paced.rejected).toBeGreaterThan(0); // the pacer and the Retry-After pause were at work
    expect(paced.timersLeft).toBe(0);
  });

  it("a run's limiter judges a round at the loop meter's next tick, not at the next answer: the slow start doubles per round trip", async () => {
    // Requests of 25 ms that all start together end together: the next answer is a round trip after the round's last.
    const lim = AdaptiveLimiter.forRun({ clock });
    const startedAt: number[] = [];
    const tasks = Array.from({ length: 200 }, () =>
      lim.run(async () => {
        const sent = Date.now();
        startedAt.push(sent);
        await new Promise((r) => setTimeout(r, 25));
        lim.onSuccess(Date.now() - sent);
      }),
    );
    const windowAt = (ms: number) => startedAt.filter((t) => t <= 1_000_000 + ms).length - startedAt.filter((t) => t <= 1_000_000 + ms - 25).length;
    await vi.advanceTimersByTimeAsync(200);
    // 4 at once, then 8 from the first answers' tick on (25 – 30 ms), 16 and 32 one round trip apart each.
    expect([windowAt(0), windowAt(40), windowAt(70), windowAt(100)]).toEqual([4, 8, 16, 32]);
    await vi.advanceTimersByTimeAsync(1000);
    await Promise.all(tasks);
    expect(lim.stats()).toMatchObject({ max: 32, growth: 'gradient' });
  });

  it('halves on 503 (onUnavailable) and grows back while the latency stays flat', async () => {
    const lim = discovering(32, 32);
    lim.onUnavailable();
    expect(lim.limit).toBe(16);
    const r = await discover({ capacity: () => Infinity, serviceMs: 50, tasks: 1500, limiter: lim });
    expect(r.failed).toBe(0);
    expect(r.limits.at(-1)).toBe(32);
  });
});
