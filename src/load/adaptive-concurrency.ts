/**
 * AdaptiveLimiter: a FIFO task queue whose concurrency window adapts to the server and which paces the starts
 * of new tasks (a rate, plus a shared "not before" time from Retry-After). No dependencies. Its parts, each in
 * its own file: the FIFO (`core/fifo-queue.ts`), the concurrency window (`concurrency-window.ts`: AIMD when pinned,
 * a gradient controller that discovers the server's capacity), the CUBIC start pacer (`rate-pacer.ts`) and the
 * admitted-rate estimator it is set from (`admitted-rate.ts`). This file runs tasks and turns the caller's
 * signals into decisions of those parts.
 *
 * ## Capacity: a concurrency window steered by round-trip times
 * A server's capacity is how many requests it serves at once; past it, requests wait in its queue and the
 * round-trip time grows while the throughput does not. With `growth: 'gradient'` the window starts small and
 * grows while the RTT of successes stays flat, and settles a small queue above the capacity once the RTT rises
 * (details in concurrency-window.ts), within [min, max]. With `growth: 'aimd'` (default; a pinned concurrency)
 * it never grows past `max` and climbs back there by +1 per round of `limit` successes after a decrease.
 * Either way 429s and 503s halve it (below).
 *
 * ## Why a concurrency window alone is not enough against a rate limit
 * A server usually protects itself with a *rate* limit R (requests/s: a token bucket, a fixed window),
 * not a concurrency limit. With concurrency C and latency L we send ≈ C/L requests/s, and pure AIMD on C
 * (halve on 429, +1 per round) behaves badly against it:
 *  - 429 answers are fast, so a slot that gets one is free again at once: the rejected requests (and
 *    their retries) come back at a very high rate — a storm of 429s that no concurrency cut prevents;
 *  - the right C is R·L, which depends on the latency; halving overshoots below it and the additive
 *    increase needs many rounds to climb back: the classic sawtooth averages ~75 % of R;
 *  - with Retry-After every 429 costs a shared pause (often 1 s: 1 s worth of R lost) during which
 *    nothing starts. Throughput depends mostly on *how rarely* we hit the limit.
 *
 * ## Design: the window + a rate pacer steered like TCP CUBIC
 * - Every start (first attempts and retries alike) goes through the pacer once it is active. Until the
 *   first overload there is no pacing: a server without a rate limit is never slowed down.
 * - Overloads are congestion *events*: one decrease per `cooldownMs` (a burst of 429s from requests
 *   already in flight counts once) — unless more overloads arrive than there were tasks in flight at the
 *   decrease: then tasks started *after* it are refused too, the pace is still far too high, and it is
 *   halved again at once (not below the rate the server admitted per wall-clock second lately).
 * - At a decrease we measure what the server *admitted* (successes per second of busy time, Retry-After
 *   pauses excluded, since the previous decrease) and derive the ceiling `wMax` ≈ R from it and from the
 *   pace we had when the server said no; the pace drops to `rateDecrease`·wMax (0.9).
 * - The pace then grows along a cubic curve (TCP CUBIC): quickly back towards wMax, flat around it for a
 *   while, then accelerating above it to discover a limit that was raised. Overloaded *before* clearly
 *   passing the old ceiling → that ceiling was too high (it included a burst the server had banked) →
 *   the next one is set 5 % under where it broke ("fast convergence"). So the plateau settles just under
 *   R where nothing is refused, and the probing costs one 429 (one pause) every 10–20 s.
 * - Early on, measurements are dominated by the server's banked burst (a token bucket starts full): an
 *   overload soon after a (re)start is not trusted as a measurement — the pace is halved, or (first
 *   overload) starts from the successes of the last second and doubles every 500 ms ("slow start") until
 *   the next overload gives a ceiling.
 * - The concurrency window is halved per overload event and per `onUnavailable` (once per cooldown): the
 *   safety net for overload that is not a rate limit (a saturated server answering 503 or a gateway's
 *   502/504). While pacing, the halving stops at Little's law — paced rate × average task duration, the
 *   concurrency that rate needs — so the window does not starve the rate.
 * - Every Retry-After is honoured: no task starts before the shared "not before" time (it only moves
 *   forward, capped by `retryAfterCapMs`).
 *
 * Measured on a simulated token-bucket server (fake clock, test/load/adaptive-concurrency.test.ts):
 * ≥ 87 % of R with Retry-After: 1 s and a burst of 0.2–1 s worth, ≈ 100 % without Retry-After or with a
 * burst of one second's worth (the sandbox's), a handful of 429s per 30 s.
 *
 * Usage with retries: `withRetry(() => limiter.run(send), classify)` — a request sleeping before its next
 * attempt holds no slot, and its next attempt is queued and paced like any start. In `send`, call
 * `limiter.onSuccess(rttMs)` for a 2xx (with the request's round-trip time: the gradient window needs it),
 * `limiter.onOverload(retryAfterMs)` for a 429 (rate limit: pace and shared pause) and
 * `limiter.onUnavailable()` for a 502/503/504 (window only: random faults must not pause every start).
 * src/load/resource-sync.ts does exactly this.
 */
import { AdmittedRateEstimator } from './admitted-rate.js';
import { ConcurrencyWindow, type WindowGrowth, type WindowStats } from './concurrency-window.js';
import { FifoQueue } from '../core/fifo-queue.js';
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
  /** Longest Retry-After honoured for the shared pause (default 60 000 ms). */
  retryAfterCapMs?: number;
  /** Pace after an overload, as a fraction of the measured ceiling (default 0.9). */
  rateDecrease?: number;
  /** Pacing time the cubic growth takes to climb back to the ceiling (default 8000 ms). */
  rateRecoveryMs?: number;
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
}

/** Weight of the newest sample in the task-duration average. */
const LATENCY_EWMA = 0.2;

export class AdaptiveLimiter {
  /** Ceiling of capacity discovery when none is given (`--max-concurrency`): polite to a shared service. */
  static readonly DEFAULT_MAX_CONCURRENCY = 32;
  /** Where discovery starts: low, so that the baseline round-trip time is measured before the server queues. */
  static readonly DISCOVERY_START = 4;

  /**
   * The limiter of a run: `concurrency` pins the window there (AIMD: 429/503 lower it, it climbs back, never
   * above); without it the capacity is discovered from DISCOVERY_START up to `maxConcurrency` (default
   * DEFAULT_MAX_CONCURRENCY). The caller validates both (integers ≥ 1).
   */
  static forRun(o: { concurrency?: number; maxConcurrency?: number }): AdaptiveLimiter {
    if (o.concurrency !== undefined) return new AdaptiveLimiter({ initial: o.concurrency, max: o.concurrency, min: 1 });
    const max = o.maxConcurrency ?? AdaptiveLimiter.DEFAULT_MAX_CONCURRENCY;
    return new AdaptiveLimiter({ initial: Math.min(AdaptiveLimiter.DISCOVERY_START, max), max, min: 1, growth: 'gradient' });
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
    this.retryAfterCapMs = Math.max(0, opts.retryAfterCapMs ?? 60_000);
    this.admitted = new AdmittedRateEstimator(Math.max(1, opts.rateWindowMs ?? 1000));
    this.pacer = new RatePacer({
      minRate: Math.max(1e-3, opts.minRatePerSec ?? 1),
      beta: Math.min(0.99, Math.max(0.1, opts.rateDecrease ?? 0.9)),
      recoveryMs: Math.max(1, opts.rateRecoveryMs ?? 8000),
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
    return this.queue.size;
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

  /** Queues `fn`; it starts when a slot is free and the pause/pace allow. Settles like `fn`. */
  run<T>(fn: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ fn, resolve: resolve as (v: unknown) => void, reject });
      if (!this.admitted.busy) {
        const t = this.now();
        this.admitted.setBusy(true, t);
        this.window.setBusy(true, t);
      }
      this.pump();
    });
  }

  /**
   * Report a success (a 2xx) and, for capacity discovery, its round-trip time in ms (the request alone, not its
   * wait in this queue). `aimd`: +1 per round of `limit` successes; `gradient`: the RTTs steer the window.
   */
  onSuccess(rttMs?: number): void {
    const t = this.now();
    this.admitted.success(t);
    // Only one of the two grows the window: `onRtt` in gradient mode, `onSuccess` in AIMD mode.
    const grew = (rttMs !== undefined && this.window.onRtt(rttMs, this._inFlight, t)) || this.window.onSuccess(t);
    if (grew) this.pump();
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

  private start(job: Job, startedAt: number): void {
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
    if (this._inFlight === 0 && this.queued === 0) {
      this.admitted.setBusy(false, t);
      this.window.setBusy(false, t);
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
