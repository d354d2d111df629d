/**
 * Issue 25 item 1: a cancelled run must not wait out the limiter. Tasks queued behind a shared Retry-After pause
 * (or a full window) reject at once with the signal's reason, are never started, and leave no wake-up timer
 * behind — the timer alone would hold the process alive for the whole pause.
 */
import { describe, expect, it, vi } from 'vitest';
import { AdaptiveLimiter } from '../../src/load/adaptive-concurrency.js';

describe('AdaptiveLimiter: queued tasks and an aborted signal', () => {
  it('a task waiting on a 60 s Retry-After pause rejects at once with the reason, never starts, and the timer is gone', async () => {
    vi.useFakeTimers({ now: 0 });
    try {
      const lim = new AdaptiveLimiter({ initial: 4, now: () => Date.now(), retryAfterCapMs: 120_000 });
      lim.onOverload(60_000);
      const abort = new AbortController();
      const started = vi.fn(async () => 'ran');
      const queued = lim.run(started, abort.signal);
      const other = lim.run(started, abort.signal);
      expect(vi.getTimerCount()).toBe(1); // the wake-up at the end of the pause
      expect(lim.queued).toBe(2);
      const reason = new DOMException('cancelled by SIGINT', 'AbortError');
      abort.abort(reason);
      await expect(queued).rejects.toBe(reason);
      await expect(other).rejects.toBe(reason);
      expect(lim.queued).toBe(0);
      expect(vi.getTimerCount()).toBe(0);
      await vi.advanceTimersByTimeAsync(61_000);
      expect(started).not.toHaveBeenCalled();
      await expect(lim.idle()).resolves.toBeUndefined();
    } finally {
      vi.useRealTimers();
    }
  });

  it('an already aborted signal rejects without queueing; a task behind a full window is dropped, the others still run', async () => {
    const lim = new AdaptiveLimiter({ initial: 1, pacing: false });
    const done = new AbortController();
    done.abort(new Error('gone'));
    await expect(lim.run(async () => 1, done.signal)).rejects.toThrow('gone');

    let release!: () => void;
    const first = lim.run(() => new Promise<string>((r) => (release = () => r('first'))));
    const abort = new AbortController();
    const cancelled = vi.fn(async () => 'cancelled');
    const second = lim.run(cancelled, abort.signal);
    const third = lim.run(async () => 'third');
    abort.abort(new Error('stop'));
    await expect(second).rejects.toThrow('stop');
    expect(lim.queued).toBe(1);
    release();
    await expect(Promise.all([first, third])).resolves.toEqual(['first', 'third']);
    expect(cancelled).not.toHaveBeenCalled();
  });

  it('a task already running is not touched by the abort (its own request sees the signal)', async () => {
    const lim = new AdaptiveLimiter({ initial: 1, pacing: false });
    const abort = new AbortController();
    let release!: () => void;
    const running = lim.run(() => new Promise<string>((r) => (release = () => r('done'))), abort.signal);
    await Promise.resolve();
    expect(lim.inFlight).toBe(1);
    abort.abort(new Error('stop'));
    release();
    await expect(running).resolves.toBe('done');
  });
});
