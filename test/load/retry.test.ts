import { describe, expect, it, vi } from 'vitest';
import { backoffDelay, retryInfoOf, withRetry, RetryFailedError, type RetryDecision } from '../../src/core/retry.js';

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly retryAfterMs?: number,
  ) {
    super(`HTTP ${status}`);
  }
}

const classify = (err: unknown): RetryDecision =>
  err instanceof HttpError && (err.status === 429 || err.status === 503)
    ? { retry: true, delayMs: err.retryAfterMs, reason: `HTTP ${err.status}` }
    : { retry: false };

function recorder() {
  const sleeps: number[] = [];
  return { sleeps, sleep: async (ms: number) => void sleeps.push(ms) };
}

describe('backoffDelay', () => {
  it('grows exponentially up to the max with full jitter', () => {
    const top = { random: () => 0.999999, baseDelayMs: 100, maxDelayMs: 1000 };
    expect([1, 2, 3, 4, 5, 6].map((a) => backoffDelay(a, top))).toEqual([99, 199, 399, 799, 999, 999]);
    expect(backoffDelay(3, { ...top, random: () => 0 })).toBe(0);
    expect(backoffDelay(3, { ...top, random: () => 0.5 })).toBe(200);
    expect(backoffDelay(1_000, top)).toBe(999); // no overflow
  });

  it('uses the defaults 200 ms base and 20 s max', () => {
    expect(backoffDelay(1, { random: () => 0.5 })).toBe(100);
    expect(backoffDelay(20, { random: () => 0.5 })).toBe(10_000);
  });

  it('gives a server-specified delay precedence, capped, without jitter', () => {
    expect(backoffDelay(1, { retryAfterMs: 3000, random: () => 0 })).toBe(3000);
    expect(backoffDelay(5, { retryAfterMs: 0, random: () => 0.9 })).toBe(0);
    expect(backoffDelay(1, { retryAfterMs: 120_000 })).toBe(60_000);
    expect(backoffDelay(1, { retryAfterMs: 120_000, retryAfterCapMs: 5000 })).toBe(5000);
    // Nonsense values fall back to the backoff.
    expect(backoffDelay(2, { retryAfterMs: Number.NaN, random: () => 0.5, baseDelayMs: 100 })).toBe(100);
  });
});

describe('withRetry', () => {
  it('returns the first success and passes the attempt number', async () => {
    const { sleeps, sleep } = recorder();
    const fn = vi.fn(async (attempt: number) => {
      if (attempt < 3) throw new HttpError(503);
      return `ok@${attempt}`;
    });
    await expect(withRetry(fn, classify, { sleep, random: () => 0.5 })).resolves.toBe('ok@3');
    expect(fn).toHaveBeenCalledTimes(3);
    expect(sleeps).toEqual([100, 200]);
  });

  it('honours Retry-After and reports each retry', async () => {
    const { sleeps, sleep } = recorder();
    const onRetry = vi.fn();
    let n = 0;
    const result = await withRetry(
      async () => {
        if (n++ === 0) throw new HttpError(429, 1500);
        return 1;
      },
      classify,
      { sleep, onRetry },
    );
    expect(result).toBe(1);
    expect(sleeps).toEqual([1500]);
    expect(onRetry).toHaveBeenCalledWith({ attempt: 1, delayMs: 1500, reason: 'HTTP 429' });
  });

  it('throws a non-retryable error at once, same object, annotated with attempts', async () => {
    const { sleeps, sleep } = recorder();
    const err = new HttpError(422);
    const caught = await withRetry(async () => Promise.reject(err), classify, { sleep }).catch((e: unknown) => e);
    expect(caught).toBe(err);
    expect(caught).toBeInstanceOf(HttpError);
    expect(retryInfoOf(caught)).toEqual({ attempts: 1, retryReasons: [] });
    expect(sleeps).toEqual([]);
    expect(Object.keys(caught as object)).not.toContain('attempts'); // non-enumerable: logs stay clean
  });

  it('gives up after `attempts` in total and throws the last error', async () => {
    const { sleeps, sleep } = recorder();
    const caught = await withRetry(
      async () => {
        throw new HttpError(503, undefined);
      },
      classify,
      { attempts: 4, sleep, random: () => 1 - Number.EPSILON, baseDelayMs: 10 },
    ).catch((e: unknown) => e);
    expect(caught).toBeInstanceOf(HttpError);
    expect(retryInfoOf(caught)).toEqual({ attempts: 4, retryReasons: ['HTTP 503', 'HTTP 503', 'HTTP 503'] });
    expect(sleeps).toEqual([9, 19, 39]);
  });

  it('defaults to 6 attempts', async () => {
    const { sleep } = recorder();
    const fn = vi.fn(async () => Promise.reject(new HttpError(503)));
    await expect(withRetry(fn, classify, { sleep })).rejects.toBeInstanceOf(HttpError);
    expect(fn).toHaveBeenCalledTimes(6);
  });

  it('wraps thrown primitives and frozen errors so attempts can be attached', async () => {
    const { sleep } = recorder();
    const p = await withRetry(
      async () => Promise.reject('plain string'),
      () => ({ retry: false }),
      { sleep },
    ).catch((e: unknown) => e);
    expect(p).toBeInstanceOf(RetryFailedError);
    expect((p as RetryFailedError).value).toBe('plain string');
    expect(retryInfoOf(p)?.attempts).toBe(1);

    const frozen = Object.freeze(new Error('frozen'));
    const f = await withRetry(
      async () => Promise.reject(frozen),
      () => ({ retry: false }),
      { sleep },
    ).catch((e: unknown) => e);
    expect(f).toBeInstanceOf(RetryFailedError);
    expect((f as Error).cause).toBe(frozen);
  });

  it('stops waiting when the signal aborts, with the abort reason', async () => {
    const ac = new AbortController();
    const fn = vi.fn(async () => Promise.reject(new HttpError(503)));
    const p = withRetry(fn, classify, { signal: ac.signal, baseDelayMs: 60_000, random: () => 0.9 });
    await new Promise((r) => setTimeout(r, 10));
    ac.abort();
    await expect(p).rejects.toMatchObject({ name: 'AbortError' });
    expect(fn).toHaveBeenCalledTimes(1);
  });

  it('does not start when the signal is already aborted', async () => {
    const ac = new AbortController();
    ac.abort(new Error('stop'));
    const fn = vi.fn(async () => 1);
    await expect(withRetry(fn, classify, { signal: ac.signal })).rejects.toThrow('stop');
    expect(fn).not.toHaveBeenCalled();
  });

  it('waits for real with the default sleep', async () => {
    let n = 0;
    const t = performance.now();
    await withRetry(async () => {
      if (n++ < 1) throw new HttpError(429, 30);
      return 'ok';
    }, classify);
    expect(performance.now() - t).toBeGreaterThanOrEqual(25);
  });
});
