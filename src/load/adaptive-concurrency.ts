/**
 * AdaptiveLimiter: a FIFO task queue whose concurrency window adapts to the server (concurrency-window.ts) and
 * whose starts are paced after a rate limit (rate-pacer.ts, admitted-rate.ts); it turns the caller's signals into their decisions.
 * Design: docs/design/adaptive-concurrency.md.
 */
import { AdmittedRateEstimator } from './admitted-rate.js';
import { ConcurrencyWindow, type WindowGrowth, type WindowStats } from './concurrency-window.js';
import { FifoQueue } from '../core/fifo-queue.js';
import { LoopStallMeter, type LoopStalls } from './loop-stalls.js';
import { RatePacer } from './rate-pacer.js';

export interface AdaptiveLimiterOptions {
  /** Starting concurrency (a pinned `--concurrency`, or where capacity discovery starts). */
  initial: number;
  /** Lowest concurrency (default 1). */
  min?: number;
  /** Highest concurrency (default `initial`). */
  max?: number;
  /**
   * How the window grows (default `aimd`): `aimd` climbs back to `max` after a decrease; `gradient` discovers the
   * server's capacity from the round-trip times given to `onSuccess` (see concurrency-window.ts).
   */
  growth?: WindowGrowth;
  /** At most one decrease per this many ms for overloads of tasks already in flight (default 1000). */
  cooldownMs?: number;
  /** Monotonic clock in ms (default performance.now). */
  now?: () => number;
  /** Pace starts after an overload (default true). */
  pacing?: boolean;
  /** Shortest span a measured admitted rate is trusted over (default 1000 ms). */
  rateWindowMs?: number;
  /** Lowest pace, starts per second (default 1). */
  minRatePerSec?: number;
  /** Longest Retry-After honoured for the shared pause (default SHARED_PAUSE_CAP_MS). */
  retryAfterCapMs?: number;
  /** Pace after an overload, as a fraction of the measured ceiling (default 0.9). */
  rateDecrease?: number;
  /** Pacing time the cubic growth takes to climb back to the ceiling (default 8000 ms). */
  rateRecoveryMs?: number;
  /**
   * The event loop's stalls on the `now` clock, taken out of each round-trip time given to `onSuccess` (default none;
   * `forRun` measures them with a LoopStallMeter when the window is discovered).
   */
  loopStalls?: LoopStalls;
}

/** The concurrency a run settled on, for its report. */
export interface ConcurrencyStats extends WindowStats {
  /** Most tasks that ran at once. */
  maxInFlight: number;
  /** The window's ceiling (`max`). */
  ceiling: number;
  /** `aimd` = pinned (never above its start), `gradient` = discovered. */
  growth: WindowGrowth;
}

interface Job {
  fn: () => Promise<unknown>;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
  /** Its caller gave up while it waited (rejected already): dropped when it reaches the front. */
  cancelled?: boolean;
  /** Stops watching the caller's signal: once started, a task settles as its `fn` does. */
  detach?: () => void;
}

/** Weight of the newest sample in the task-duration average. */
const LATENCY_EWMA = 0.2;

export class AdaptiveLimiter {
  /** Ceiling of capacity discovery when none is given (`--max-concurrency`): polite to a shared service. */
  static readonly DEFAULT_MAX_CONCURRENCY = 32;
  /** Where discovery starts: low, so that the baseline round-trip time is measured before the server queues. */
  static readonly DISCOVERY_START = 4;
  /**
   * Longest shared pause one 429 imposes on every start (its own request's retry honours the whole Retry-After):
   * a server that still refuses after it says so again, and one 429 never stalls the run for longer.
   */
  static readonly SHARED_PAUSE_CAP_MS = 60_000;

  /**
   * The limiter of a run: `concurrency` pins the window there (AIMD: 429/503 lower it, it climbs back, never
   * above); without it the capacity is discovered from DISCOVERY_START up to `maxConcurrency` (default
   * DEFAULT_MAX_CONCURRENCY). The caller validates both (integers ≥ 1). A 429's shared pause lasts at most
   * SHARED_PAUSE_CAP_MS, or `maxRetryAfterMs` (`--max-retry-after`) when smaller. `clock`: ms, for tests.
   * `startAt`: where discovery starts instead of DISCOVERY_START (the window an earlier run of the same target
   * settled at, issue 28), within 1…`maxConcurrency`; ignored when pinned.
   */
  static forRun(o: { concurrency?: number; maxConcurrency?: number; maxRetryAfterMs?: number; clock?: () => number; startAt?: number }): AdaptiveLimiter {
    const shared = { retryAfterCapMs: Math.min(AdaptiveLimiter.SHARED_PAUSE_CAP_MS, o.maxRetryAfterMs ?? Infinity), now: o.clock };
    if (o.concurrency !== undefined) return new AdaptiveLimiter({ initial: o.concurrency, max: o.concurrency, min: 1, ...shared });
    const max = o.maxConcurrency ?? AdaptiveLimiter.DEFAULT_MAX_CONCURRENCY;
    const loopStalls = new LoopStallMeter(o.clock);
    const start = o.startAt !== undefined && Number.isInteger(o.startAt) && o.startAt >= 1 ? o.startAt : AdaptiveLimiter.DISCOVERY_START;
    return new AdaptiveLimiter({ initial: Math.min(start, max), max, min: 1, growth: 'gradient', loopStalls, ...shared });
  }

  private readonly max: number;
  private readonly growth: WindowGrowth;
  private readonly cooldownMs: number;
  private readonly now: () => number;
  private readonly pacing: boolean;
  private readonly retryAfterCapMs: number;
  private readonly window: ConcurrencyWindow;
  private readonly pacer: RatePacer;
  private readonly admitted: AdmittedRateEstimator;
  private readonly loopStalls: LoopStalls | undefined;
  /** Round-trip samples ending after the last tick of `loopStalls`: their stalls are not known yet. */
  private unseen: { rttMs: number; t: number; inFlight: number }[] = [];

  private _inFlight = 0;
  private maxInFlight = 0;
  private lastDecreaseAt = -Infinity;
  private inFlightAtDecrease = 0;
  private lastWindowDecreaseAt = -Infinity;
  private overloadsSinceDecrease = 0;

  private queue = new FifoQueue<Job>();
  private pumping = false;
  private pumpAgain = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Infinity;
  private idleWaiters: (() => void)[] = [];
  /** Queued jobs whose signal aborted, not yet dropped from the queue. */
  private cancelledQueued = 0;

  /** Shared "not before" time (Retry-After). */
  private notBefore = -Infinity;
  /** Average task duration (ms): Little's law floor of the window while pacing, and the storm test. */
  private latencyMs: number | undefined;

  constructor(opts: AdaptiveLimiterOptions) {
    const int = (name: string, v: number, lo: number): number => {
      if (!Number.isFinite(v) || v < lo) throw new RangeError(`AdaptiveLimiter: ${name} must be a number ≥ ${lo} (got ${v})`);
      return Math.floor(v);
    };
    const min = int('min', opts.min ?? 1, 1);
    this.max = int('max', opts.max ?? opts.initial, 1);
    if (this.max < min) throw new RangeError(`AdaptiveLimiter: max (${this.max}) < min (${min})`);
    this.growth = opts.growth ?? 'aimd';
    this.window = new ConcurrencyWindow({ initial: int('initial', opts.initial, 1), min, max: this.max, growth: this.growth });
    this.cooldownMs = Math.max(0, opts.cooldownMs ?? 1000);
    this.now = opts.now ?? (() => performance.now());
    this.pacing = opts.pacing ?? true;
    this.retryAfterCapMs = Math.max(0, opts.retryAfterCapMs ?? AdaptiveLimiter.SHARED_PAUSE_CAP_MS);
    this.admitted = new AdmittedRateEstimator(Math.max(1, opts.rateWindowMs ?? 1000));
    this.pacer = new RatePacer({
      minRate: Math.max(1e-3, opts.minRatePerSec ?? 1),
      beta: Math.min(0.99, Math.max(0.1, opts.rateDecrease ?? 0.9)),
      recoveryMs: Math.max(1, opts.rateRecoveryMs ?? 8000),
    });
    this.loopStalls = opts.loopStalls;
    // Samples held for the next tick are judged at that tick, not at the next success: while the window is small its
    // requests end together, and the next success is a round trip away (each doubling of the slow start took two).
    this.loopStalls?.onSeen?.(() => {
      if (this.unseen.length > 0 && this.judgeSeen()) this.pump();
    });
  }

  /** Current concurrency limit. */
  get limit(): number {
    return this.window.limit;
  }

  /** Tasks started and not settled. */
  get inFlight(): number {
    return this._inFlight;
  }

  /** Tasks waiting to start. */
  get queued(): number {
    return this.queue.size - this.cancelledQueued;
  }

  /** Current pace in starts per second, undefined while unpaced. */
  get pacedRate(): number | undefined {
    return this.pacer.rate;
  }

  /** Starts are paused until this time (limiter clock), or -Infinity. */
  get pausedUntil(): number {
    return this.notBefore;
  }

  /** The window over the busy time so far: where it settled, the largest, the most tasks run at once. */
  stats(): ConcurrencyStats {
    return { ...this.window.stats(this.now()), maxInFlight: this.maxInFlight, ceiling: this.max, growth: this.growth };
  }

  /**
   * Queues `fn`; it starts when a slot is free and the pause/pace allow. Settles like `fn` — or, if `signal`
   * aborts while it waits (a shared Retry-After pause can last a minute), rejects at once with the signal's reason.
   */
  run<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const job: Job = { fn, resolve: resolve as (v: unknown) => void, reject };
      if (signal) {
        const onAbort = () => {
          job.cancelled = true;
          this.cancelledQueued++;
          reject(signal.reason);
          this.pump(); // drops it, and the wake-up timer with the queue's last job
          this.idleCheck(this.now());
        };
        signal.addEventListener('abort', onAbort, { once: true });
        job.detach = () => signal.removeEventListener('abort', onAbort);
      }
      this.queue.push(job);
      if (!this.admitted.busy) {
        const t = this.now();
        this.admitted.setBusy(true, t);
        this.window.setBusy(true, t);
        this.loopStalls?.setBusy?.(true);
      }
      this.pump();
    });
  }

  /**
   * Report a success (a 2xx) and, for capacity discovery, its round-trip time in ms (the request alone, not its
   * wait in this queue), measured up to now. `aimd`: +1 per round of `limit` successes; `gradient`: the RTTs steer
   * the window, less the event loop's stalls within them (`loopStalls`).
   */
  onSuccess(rttMs?: number): void {
    const t = this.now();
    this.admitted.success(t);
    // Only one of the two grows the window: `onRtt` in gradient mode, `onSuccess` in AIMD mode.
    const grew = (rttMs !== undefined && this.onRtt(rttMs, t)) || this.window.onSuccess(t);
    if (grew) this.pump();
  }

  /**
   * Gives the window the round-trip times less the loop's stalls. A stall is known once a tick ran after it (a
   * response can be handled before the late tick): samples wait in `unseen` until then — a few milliseconds.
   */
  private onRtt(rttMs: number, t: number): boolean {
    if (!this.loopStalls) return this.window.onRtt(rttMs, this._inFlight, t);
    this.unseen.push({ rttMs, t, inFlight: this._inFlight });
    return this.judgeSeen();
  }

  /** Gives the window the held samples whose stalls are known now; returns whether it grew. */
  private judgeSeen(): boolean {
    const stalls = this.loopStalls!;
    let grew = false;
    let n = 0;
    for (const s of this.unseen) {
      if (s.t > stalls.seenUntil) break;
      grew = this.window.onRtt(s.rttMs, s.inFlight, s.t, stalls.delayBefore(s.t - s.rttMs, s.t)) || grew;
      n++;
    }
    if (n > 0) this.unseen.splice(0, n);
    return grew;
  }

  /**
   * Report a rate-limit refusal (429). `retryAfterMs`: the server's Retry-After — no new task starts
   * before it has elapsed (use `onUnavailable` for 503s). The decrease (window ×0.5, pace := 0.9 × estimated ceiling) happens
   * once per congestion event (see the file comment).
   */
  onOverload(retryAfterMs?: number): void {
    const t = this.now();
    const sinceDecrease = t - this.lastDecreaseAt;
    let decrease = sinceDecrease >= this.cooldownMs;
    let storm = false;
    if (!decrease) {
      // Within the cooldown, overloads of tasks that were already in flight at the decrease are the same
      // congestion event. More overloads than there were such tasks means tasks started *after* the
      // decrease are overloaded too: the new pace is still far too high (e.g. it was measured on the
      // server's initial burst) — decrease again without waiting (TCP: a loss in a new window).
      this.overloadsSinceDecrease++;
      storm =
        this.pacer.rate !== undefined &&
        this.latencyMs !== undefined &&
        this.overloadsSinceDecrease > this.inFlightAtDecrease &&
        sinceDecrease >= 2 * this.latencyMs;
      decrease = storm;
    }
    if (decrease) {
      const prevDecreaseAt = this.lastDecreaseAt;
      this.lastDecreaseAt = t;
      this.overloadsSinceDecrease = 0;
      this.inFlightAtDecrease = this._inFlight;
      let next = Math.floor(this.window.limit / 2);
      // Measured before this overload's pause is recorded.
      if (this.pacing) this.pacer.decrease(t, prevDecreaseAt, storm, next, this.admitted);
      const rate = this.pacer.rate;
      if (rate !== undefined && this.latencyMs !== undefined) {
        next = Math.max(next, Math.ceil((rate * this.latencyMs) / 1000)); // Little's law floor
      }
      this.window.decreaseTo(next, t);
      this.lastWindowDecreaseAt = t;
    }
    if (retryAfterMs !== undefined && Number.isFinite(retryAfterMs) && retryAfterMs > 0) {
      const until = t + Math.min(retryAfterMs, this.retryAfterCapMs);
      if (until > this.notBefore) {
        this.admitted.pause(t, until);
        this.notBefore = until;
      }
    }
  }

  /**
   * Report a server fault that is not a rate limit (503 Service Unavailable, a gateway's 502/504): the
   * concurrency window is halved (once per cooldown) — a saturated server recovers with fewer requests in
   * flight — but the pace is left alone and there is no shared pause: a 503 is just as often one failed
   * instance or an injected fault, and pausing every start for each one would stall the run (at 2 % of 503s
   * with `Retry-After: 1`, a simulated run took over 100× longer through `onOverload`). The request's own
   * Retry-After is honoured by its retry (`withRetry`).
   */
  onUnavailable(): void {
    const t = this.now();
    if (t - this.lastWindowDecreaseAt < this.cooldownMs) return;
    this.lastWindowDecreaseAt = t;
    this.window.decreaseTo(Math.floor(this.window.limit / 2), t);
  }

  /** Resolves when nothing is queued or running. */
  idle(): Promise<void> {
    if (this._inFlight === 0 && this.queued === 0) return Promise.resolve();
    return new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  // ---------------------------------------------------------------------------------------------------

  private pump(): void {
    if (this.pumping) {
      this.pumpAgain = true; // a task started synchronously called run()/onSuccess(): loop once more
      return;
    }
    this.pumping = true;
    try {
      do {
        this.pumpAgain = false;
        this.startReady();
      } while (this.pumpAgain);
    } finally {
      this.pumping = false;
    }
  }

  private startReady(): void {
    for (;;) {
      const t = this.now();
      this.pacer.update(t);
      this.dropCancelled();
      if (this.queue.size === 0 || this._inFlight >= this.window.limit) {
        this.pacer.notHolding();
        return;
      }
      if (t < this.notBefore) {
        this.pacer.notHolding();
        this.wakeAt(this.pacer.rate !== undefined ? Math.max(this.notBefore, this.pacer.nextStartAt) : this.notBefore, t);
        return;
      }
      const hold = this.pacer.holdUntil(t);
      if (hold !== undefined) {
        this.wakeAt(hold, t);
        return;
      }
      const job = this.queue.shift()!;
      this.pacer.started(t);
      this.start(job, t);
    }
  }

  /** Cancelled jobs at the front leave the queue; an empty queue needs no wake-up (its timer would hold the process). */
  private dropCancelled(): void {
    while (this.queue.peek()?.cancelled) {
      this.queue.shift();
      this.cancelledQueued--;
    }
    if (this.queue.size === 0 && this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.timerAt = Infinity;
    }
  }

  private start(job: Job, startedAt: number): void {
    job.detach?.();
    this._inFlight++;
    if (this._inFlight > this.maxInFlight) this.maxInFlight = this._inFlight;
    let p: Promise<unknown>;
    try {
      p = Promise.resolve(job.fn());
    } catch (err) {
      p = Promise.reject(err);
    }
    p.then(
      (v) => {
        this.settled(startedAt);
        job.resolve(v);
      },
      (e) => {
        this.settled(startedAt);
        job.reject(e);
      },
    );
  }

  private settled(startedAt: number): void {
    this._inFlight--;
    const t = this.now();
    const d = Math.max(0, t - startedAt);
    this.latencyMs = this.latencyMs === undefined ? d : this.latencyMs + LATENCY_EWMA * (d - this.latencyMs);
    this.pump();
    this.idleCheck(t);
  }

  private idleCheck(t: number): void {
    if (this._inFlight === 0 && this.queued === 0) {
      this.admitted.setBusy(false, t);
      this.window.setBusy(false, t);
      this.loopStalls?.setBusy?.(false);
      this.unseen = [];
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }

  private wakeAt(at: number, t: number): void {
    if (this.timer !== undefined && this.timerAt <= at) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.timerAt = Infinity;
        this.pump();
      },
      Math.max(1, Math.ceil(at - t)),
    );
  }
}
