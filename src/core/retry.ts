/**
 * Retry policy: exponential backoff with full jitter, server-specified delays (Retry-After) first. Pure; it knows
 * nothing about HTTP (the caller's `classify` says what may be retried). Wrap a limiter inside the retry.
 * Design: docs/design/retry.md.
 */
import { setTimeout as sleepTimer } from 'node:timers/promises';

export interface RetryOptions {
  /** Total attempts, the first included (default 6). 1 = no retry. */
  attempts?: number;
  /** Backoff base (default 200 ms): attempt n waits up to base·2^(n-1). */
  baseDelayMs?: number;
  /** Backoff ceiling before jitter (default 20 000 ms). */
  maxDelayMs?: number;
  /** Longest server-specified delay honoured (default 60 000 ms); longer Retry-After values are capped. */
  retryAfterCapMs?: number;
  /** Uniform [0, 1) source for jitter (default Math.random). */
  random?: () => number;
  /** Waits `ms`; must reject when `signal` aborts (default: node:timers/promises setTimeout). */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Aborts the waiting between attempts and prevents further attempts. */
  signal?: AbortSignal;
  /** Called before each wait: `attempt` is the attempt that just failed (1-based). */
  onRetry?: (info: { attempt: number; delayMs: number; reason: string }) => void;
}

export type RetryDecision =
  | { retry: false }
  | {
      retry: true;
      /** Server-specified delay, e.g. from Retry-After; takes precedence over the backoff. */
      delayMs?: number;
      reason: string;
    };

/** The error thrown by `withRetry` carries how many attempts were made (and the reasons of the retries). */
export interface RetryInfo {
  attempts: number;
  retryReasons: string[];
}

export const RETRY_DEFAULTS = {
  attempts: 6,
  baseDelayMs: 200,
  maxDelayMs: 20_000,
  retryAfterCapMs: 60_000,
} as const;

/**
 * Delay before the attempt after `attempt` (1-based: `attempt` is the one that failed).
 * Full jitter (AWS "Exponential Backoff and Jitter"): uniform in [0, min(max, base·2^(attempt-1))) —
 * spreads a burst of clients that failed together over the whole window instead of re-synchronising them.
 * A server-specified delay (`retryAfterMs`) wins, capped by `retryAfterCapMs`, without jitter: the server
 * asked for "not before", and starts after a shared pause are spread by the limiter's pacer.
 */
export function backoffDelay(
  attempt: number,
  opts: Pick<RetryOptions, 'baseDelayMs' | 'maxDelayMs' | 'retryAfterCapMs' | 'random'> & { retryAfterMs?: number } = {},
): number {
  const cap = opts.retryAfterCapMs ?? RETRY_DEFAULTS.retryAfterCapMs;
  if (opts.retryAfterMs !== undefined && Number.isFinite(opts.retryAfterMs) && opts.retryAfterMs >= 0) {
    return Math.min(opts.retryAfterMs, cap);
  }
  const base = opts.baseDelayMs ?? RETRY_DEFAULTS.baseDelayMs;
  const max = opts.maxDelayMs ?? RETRY_DEFAULTS.maxDelayMs;
  const random = opts.random ?? Math.random;
  const n = Math.max(1, Math.floor(attempt));
  // 2^(n-1) overflows to Infinity for huge n; min() keeps it at max.
  const ceiling = Math.min(max, base * 2 ** (n - 1));
  const r = Math.min(Math.max(random(), 0), 1);
  return Math.floor(r * ceiling);
}

/** Attempts recorded on an error thrown by `withRetry`, if any. */
export function retryInfoOf(err: unknown): RetryInfo | undefined {
  if (err === null || typeof err !== 'object') return undefined;
  const e = err as Partial<RetryInfo>;
  return typeof e.attempts === 'number' ? { attempts: e.attempts, retryReasons: e.retryReasons ?? [] } : undefined;
}

/** Thrown in place of a non-object error (a thrown string…), so attempt info can still be attached. */
export class RetryFailedError extends Error {
  constructor(readonly value: unknown) {
    super(String(value), { cause: value });
    this.name = 'RetryFailedError';
  }
}

/**
 * Annotates the error in place (keeps its class, so `instanceof` checks still work) with non-enumerable
 * `attempts` / `retryReasons`. Frozen objects and primitives are wrapped in `RetryFailedError`.
 */
function annotate<E>(err: E, info: RetryInfo): E & RetryInfo {
  let target: object = err !== null && (typeof err === 'object' || typeof err === 'function') ? (err as object) : new RetryFailedError(err);
  try {
    Object.defineProperty(target, 'attempts', { value: info.attempts, configurable: true, writable: true, enumerable: false });
    Object.defineProperty(target, 'retryReasons', { value: info.retryReasons, configurable: true, writable: true, enumerable: false });
  } catch {
    target = new RetryFailedError(err);
    Object.defineProperty(target, 'attempts', { value: info.attempts, configurable: true, writable: true, enumerable: false });
    Object.defineProperty(target, 'retryReasons', { value: info.retryReasons, configurable: true, writable: true, enumerable: false });
  }
  return target as E & RetryInfo;
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

const defaultSleep = (ms: number, signal?: AbortSignal): Promise<void> => sleepTimer(ms, undefined, { signal });

/**
 * Calls `fn(attempt)` until it resolves, `classify` says no, or the attempts are used up; then throws the
 * last error annotated with `attempts` / `retryReasons` (see `retryInfoOf`). If `signal` aborts, no new
 * attempt starts and a pending wait ends at once with the signal's reason (an AbortError): the caller
 * asked to stop. (An attempt that fails while the signal is already aborted throws its own error.)
 */
export function withRetry<T>(
  fn: (attempt: number) => Promise<T>,
  classify: (err: unknown, attempt: number) => RetryDecision,
  opts: RetryOptions = {},
): Promise<T> {
  // The first attempt without the loop's async frame: most calls succeed at once (the loader's every create).
  const signal = opts.signal;
  if (signal?.aborted) return Promise.reject(abortReason(signal));
  let first: Promise<T>;
  try {
    first = Promise.resolve(fn(1));
  } catch (e) {
    first = Promise.reject(e);
  }
  return first.then(undefined, (err: unknown) => retryAfterFirst(err, fn, classify, opts));
}

/** `withRetry` once its first attempt failed with `firstError`. */
async function retryAfterFirst<T>(
  firstError: unknown,
  fn: (attempt: number) => Promise<T>,
  classify: (err: unknown, attempt: number) => RetryDecision,
  opts: RetryOptions,
): Promise<T> {
  const attempts = Math.max(1, Math.floor(opts.attempts ?? RETRY_DEFAULTS.attempts));
  const sleep = opts.sleep ?? defaultSleep;
  const signal = opts.signal;
  const reasons: string[] = [];
  let err = firstError;
  for (let attempt = 1; ; attempt++) {
    if (attempt > 1) {
      if (signal?.aborted) throw abortReason(signal);
      try {
        return await fn(attempt);
      } catch (e) {
        err = e;
      }
    }
    const decision = classify(err, attempt);
    if (!decision.retry || attempt >= attempts || signal?.aborted) {
      throw annotate(err, { attempts: attempt, retryReasons: reasons });
    }
    const delayMs = backoffDelay(attempt, { ...opts, retryAfterMs: decision.delayMs });
    reasons.push(decision.reason);
    opts.onRetry?.({ attempt, delayMs, reason: decision.reason });
    try {
      await sleep(delayMs, signal);
    } catch (sleepErr) {
      if (signal?.aborted) throw abortReason(signal);
      throw sleepErr;
    }
  }
}
