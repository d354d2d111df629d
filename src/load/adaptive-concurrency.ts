/**
 * AdaptiveLimiter: a FIFO task queue whose concurrency limit adapts (AIMD) and which paces the starts of
 * new tasks (a rate, plus a shared "not before" time from Retry-After). No dependencies.
 *
 * ## Why a concurrency window alone is not enough
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
 * ## Design: AIMD window + a rate pacer steered like TCP CUBIC
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
 * - The concurrency window (×0.5 per overload event, +1 per round of `limit` successes, within
 *   [min, max]) remains the safety net for overload that is not a rate limit (a saturated server
 *   answering 503 or slowing down). While pacing, the halving stops at Little's law — paced rate ×
 *   average task duration, the concurrency that rate needs — so the window does not starve the rate.
 * - Every Retry-After is honoured: no task starts before the shared "not before" time (it only moves
 *   forward, capped by `retryAfterCapMs`).
 *
 * Measured on a simulated token-bucket server (fake clock, test/load/adaptive-concurrency.test.ts):
 * ≥ 87 % of R with Retry-After: 1 s and a burst of 0.2–1 s worth, ≈ 100 % without Retry-After or with a
 * burst of one second's worth (the sandbox's), a handful of 429s per 30 s.
 *
 * Usage with retries: `withRetry(() => limiter.run(send), classify)` — a request sleeping before its next
 * attempt holds no slot, and its next attempt is queued and paced like any start. In `send`, call
 * `limiter.onSuccess()` for a 2xx, `limiter.onOverload(retryAfterMs)` for a 429 (rate limit: pace and
 * shared pause) and `limiter.onUnavailable()` for a 503/502/504 (window only: random faults must not
 * pause every start).
 */

export interface AdaptiveLimiterOptions {
  /** Starting concurrency (the user's --concurrency). */
  initial: number;
  /** Lowest concurrency (default 1). */
  min?: number;
  /** Highest concurrency (default `initial`). */
  max?: number;
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

interface Job {
  fn: () => Promise<unknown>;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

/** A start this late on the pace schedule still counts as on schedule (timer lag); later = fresh start. */
const PACE_SLACK_MS = 10;
/** Weight of the newest sample in the task-duration average. */
const LATENCY_EWMA = 0.2;
/** Minimum span of observations for a rate measurement. */
const MIN_SPAN_MS = 20;
const MAX_RATE = 1e6;
/** Slow start doubles the pace every this many ms of pacing. */
const SLOW_START_DOUBLING_MS = 500;
/** Longest span used to measure the admitted rate. */
const LONG_WINDOW_MS = 10_000;

export class AdaptiveLimiter {
  private readonly min: number;
  private readonly max: number;
  private readonly cooldownMs: number;
  private readonly now: () => number;
  private readonly pacing: boolean;
  private readonly rateWindowMs: number;
  private readonly minRate: number;
  private readonly retryAfterCapMs: number;
  private readonly beta: number;
  private readonly recoveryMs: number;

  private _limit: number;
  private _inFlight = 0;
  private successesThisRound = 0;
  private lastDecreaseAt = -Infinity;
  private inFlightAtDecrease = 0;
  private lastWindowDecreaseAt = -Infinity;
  private overloadsSinceDecrease = 0;

  private queue: (Job | undefined)[] = [];
  private head = 0;
  private pumping = false;
  private pumpAgain = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Infinity;
  private idleWaiters: (() => void)[] = [];

  /** Shared "not before" time (Retry-After) and the recent pauses [start, end] (for the rate estimate). */
  private notBefore = -Infinity;
  private pauses: [number, number][] = [];

  /** Pace in starts per second; undefined = unpaced (until the first overload). */
  private rate: number | undefined;
  /** Ceiling of the cubic growth; undefined = unknown (slow start from `epochRate`). */
  private wMax: number | undefined;
  private epochRate = 0;
  private epochBeta = 0.9;
  /** Pacing-bound time since the last decrease (drives the growth curve). */
  private growthMs = 0;
  private lastRateUpdate = 0;
  private pacerWaiting = false;
  private lastPacerWaitAt = -Infinity;
  private nextStartAt = -Infinity;

  /** Completion times of recent successes (array + head), for the admitted-rate estimate. */
  private successTimes: number[] = [];
  private successHead = 0;
  /** Start of the current busy period (tasks queued or running); undefined while idle. */
  private activeSince: number | undefined;
  private latencyMs: number | undefined;

  constructor(opts: AdaptiveLimiterOptions) {
    const int = (name: string, v: number, lo: number): number => {
      if (!Number.isFinite(v) || v < lo) throw new RangeError(`AdaptiveLimiter: ${name} must be a number ≥ ${lo} (got ${v})`);
      return Math.floor(v);
    };
    this.min = int('min', opts.min ?? 1, 1);
    this.max = int('max', opts.max ?? opts.initial, 1);
    if (this.max < this.min) throw new RangeError(`AdaptiveLimiter: max (${this.max}) < min (${this.min})`);
    this._limit = Math.min(this.max, Math.max(this.min, int('initial', opts.initial, 1)));
    this.cooldownMs = Math.max(0, opts.cooldownMs ?? 1000);
    this.now = opts.now ?? (() => performance.now());
    this.pacing = opts.pacing ?? true;
    this.rateWindowMs = Math.max(1, opts.rateWindowMs ?? 1000);
    this.minRate = Math.max(1e-3, opts.minRatePerSec ?? 1);
    this.retryAfterCapMs = Math.max(0, opts.retryAfterCapMs ?? 60_000);
    this.beta = Math.min(0.99, Math.max(0.1, opts.rateDecrease ?? 0.9));
    this.recoveryMs = Math.max(1, opts.rateRecoveryMs ?? 8000);
  }

  /** Current concurrency limit. */
  get limit(): number {
    return this._limit;
  }

  /** Tasks started and not settled. */
  get inFlight(): number {
    return this._inFlight;
  }

  /** Tasks waiting to start. */
  get queued(): number {
    return this.queue.length - this.head;
  }

  /** Current pace in starts per second, undefined while unpaced. */
  get pacedRate(): number | undefined {
    return this.rate;
  }

  /** Starts are paused until this time (limiter clock), or -Infinity. */
  get pausedUntil(): number {
    return this.notBefore;
  }

  /** Queues `fn`; it starts when a slot is free and the pause/pace allow. Settles like `fn`. */
  run<T>(fn: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ fn, resolve: resolve as (v: unknown) => void, reject });
      if (this.activeSince === undefined) this.activeSince = this.now();
      this.pump();
    });
  }

  /** Report a success (a 2xx): additive increase of the window, +1 per `limit` successes. */
  onSuccess(): void {
    const t = this.now();
    this.successTimes.push(t);
    this.pruneSuccesses(t);
    if (++this.successesThisRound >= this._limit) {
      this.successesThisRound = 0;
      if (this._limit < this.max) {
        this._limit++;
        this.pump();
      }
    }
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
        this.rate !== undefined &&
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
      this.successesThisRound = 0;
      let next = Math.floor(this._limit / 2);
      if (this.pacing) this.decreaseRate(t, prevDecreaseAt, storm, next); // measure before this overload's pause
      if (this.rate !== undefined && this.latencyMs !== undefined) {
        next = Math.max(next, Math.ceil((this.rate * this.latencyMs) / 1000)); // Little's law floor
      }
      this._limit = Math.max(this.min, Math.min(this._limit, next));
      this.lastWindowDecreaseAt = t;
    }
    if (retryAfterMs !== undefined && Number.isFinite(retryAfterMs) && retryAfterMs > 0) {
      const until = t + Math.min(retryAfterMs, this.retryAfterCapMs);
      if (until > this.notBefore) {
        const last = this.pauses[this.pauses.length - 1];
        if (last && last[1] >= t) last[1] = until;
        else this.pauses.push([t, until]);
        this.notBefore = until;
      }
    }
  }

  /**
   * Report a server fault that is not a rate limit (503 Service Unavailable, 502/504): the concurrency
   * window is halved (once per cooldown) — a saturated server recovers with fewer requests in flight —
   * but the pace is left alone and there is no shared pause: a 503 is just as often one failed instance
   * or an injected fault, and pausing every start for each one would stall the run (at 2 % of 503s with
   * `Retry-After: 1`, a simulated run took over 100× longer through `onOverload`). The request's own
   * Retry-After is honoured by its retry (`withRetry`).
   */
  onUnavailable(): void {
    const t = this.now();
    if (t - this.lastWindowDecreaseAt < this.cooldownMs) return;
    this.lastWindowDecreaseAt = t;
    this.successesThisRound = 0;
    this._limit = Math.max(this.min, Math.floor(this._limit / 2));
  }

  /** Resolves when nothing is queued or running. */
  idle(): Promise<void> {
    if (this._inFlight === 0 && this.queued === 0) return Promise.resolve();
    return new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  // ---------------------------------------------------------------------------------------------------

  private decreaseRate(t: number, prevDecreaseAt: number, storm: boolean, newLimit: number): void {
    this.updateRate(t);
    const r = this.rate;
    if (storm && r !== undefined) {
      // Tasks started after the last decrease are overloaded too: the pace is still too high. Halve it
      // (the cubic climbs back towards r, the pace known to be too high) — but not below what the server
      // has admitted per second of wall time lately: a server that refuses everything for a while (a
      // fixed window used up) would otherwise drive the pace to nothing.
      const admitted = this.wallClockRate(t);
      this.setCeiling(r, t, Math.min(1, Math.max(0.5, admitted / r)));
      return;
    }
    const m = this.estimateRate(t, prevDecreaseAt);
    if (r === undefined) {
      // First overload. Admitted over a long enough span: that is the ceiling. Overloaded soon after
      // starting: what we saw is mostly the burst the server had banked (or a window's quota), not its
      // rate — start from the successes of the last `rateWindowMs` counted as one window's worth (exact
      // for a fixed-window quota, low for a token bucket) and double until the next overload. No success
      // at all: from the halved concurrency per second.
      if (m?.trusted) this.setCeiling(m.long, t);
      else this.slowStart(m === undefined ? Math.max(1, newLimit) : Math.max(1, this.wallClockRate(t)), t);
      return;
    }
    // Was the pacer what held starts back just now (so that we really were sending at r)?
    const binding = t - this.lastPacerWaitAt <= Math.max(100, 2000 / r);
    let ceiling: number;
    if (!binding) {
      // Window- or work-bound: we sent less than r; what the server admitted is the better ceiling.
      ceiling = m === undefined ? r / 2 : Math.min(r, m.recent);
    } else if (this.wMax === undefined) {
      // Leaving slow start: r doubled while the server's banked burst (or a window's quota) hid the
      // limit, so it can overshoot R several times over; what the server admitted per second of wall
      // time in the last window is close to R. At least r/4.
      ceiling = Math.min(r, Math.max(this.wallClockRate(t), r / 4));
    } else if (m === undefined || !m.trusted) {
      // Overloaded soon after a (re)start at pace r: r is far above R, only the banked burst hid it.
      this.setCeiling(r, t, 0.5);
      return;
    } else {
      // On the cubic curve: we overflowed the bucket at r, just past R — or further past it in the
      // convex part, where the admitted rate tells how far.
      ceiling = Math.min(r, Math.max(m.recent, m.long));
    }
    // Overloaded before the pace got clearly past the previous ceiling: that ceiling was too high (the
    // limit went down, or it was reached with a banked burst). Aim below where it broke (CUBIC's "fast
    // convergence") — this is what settles the plateau just under R, where 429s become rare.
    if (this.wMax !== undefined && r < this.wMax * 1.02) ceiling = Math.min(ceiling, (r * (1 + this.beta)) / 2);
    this.setCeiling(ceiling, t);
  }

  private slowStart(rate: number, t: number): void {
    this.rate = Math.min(MAX_RATE, Math.max(this.minRate, rate));
    this.wMax = undefined;
    this.epochRate = this.rate;
    this.resetGrowth(t);
  }

  /** New epoch: the pace drops to beta·ceiling and climbs back along the cubic curve. */
  private setCeiling(ceiling: number, t: number, beta = this.beta): void {
    this.wMax = Math.min(MAX_RATE, Math.max(this.minRate, ceiling));
    this.epochBeta = beta;
    this.rate = Math.max(this.minRate, beta * this.wMax);
    this.resetGrowth(t);
  }

  private resetGrowth(t: number): void {
    this.growthMs = 0;
    this.lastRateUpdate = t;
    this.pacerWaiting = false;
  }

  /** Advances the growth curve by the time the pacer has been holding starts back since the last update. */
  private updateRate(t: number): void {
    if (this.rate === undefined) return;
    if (this.pacerWaiting) this.growthMs += Math.max(0, t - this.lastRateUpdate);
    this.lastRateUpdate = t;
    let r: number;
    if (this.wMax === undefined) {
      r = this.epochRate * 2 ** (this.growthMs / SLOW_START_DOUBLING_MS);
    } else {
      const x = this.growthMs / this.recoveryMs - 1; // -1 at the decrease, 0 at the ceiling
      r = this.wMax * (1 + (1 - this.epochBeta) * x * x * x);
    }
    this.rate = Math.min(MAX_RATE, Math.max(this.minRate, r));
  }

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
      this.updateRate(t);
      if (this.head >= this.queue.length || this._inFlight >= this._limit) {
        this.pacerWaiting = false;
        return;
      }
      const paced = this.rate !== undefined;
      if (t < this.notBefore) {
        this.pacerWaiting = false;
        this.wakeAt(paced ? Math.max(this.notBefore, this.nextStartAt) : this.notBefore, t);
        return;
      }
      if (paced && t < this.nextStartAt) {
        this.pacerWaiting = true;
        this.lastPacerWaitAt = t;
        this.wakeAt(this.nextStartAt, t);
        return;
      }
      const job = this.queue[this.head]!;
      this.queue[this.head] = undefined;
      this.head++;
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue = this.queue.slice(this.head);
        this.head = 0;
      }
      if (paced) {
        // Slightly late (timer lag): keep the schedule so the average pace is exact. Late by more
        // (idle, paused): restart the schedule from now — no burst after a quiet spell.
        const interval = 1000 / this.rate!;
        this.nextStartAt = t - this.nextStartAt <= PACE_SLACK_MS ? this.nextStartAt + interval : t + interval;
      }
      this.start(job, t);
    }
  }

  private start(job: Job, startedAt: number): void {
    this._inFlight++;
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
      this.activeSince = undefined;
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

  private pruneSuccesses(t: number): void {
    const keepFrom = t - Math.max(LONG_WINDOW_MS, 4 * this.rateWindowMs);
    const times = this.successTimes;
    while (this.successHead < times.length && times[this.successHead]! < keepFrom) this.successHead++;
    if (this.successHead > 1024 && this.successHead * 2 > times.length) {
      this.successTimes = times.slice(this.successHead);
      this.successHead = 0;
    }
    while (this.pauses.length > 0 && this.pauses[0]![1] < keepFrom) this.pauses.shift();
  }

  /**
   * Successes per second of wall time (pauses included) over the last `rateWindowMs` — counted over the
   * whole window even at the start of a busy period, so that a burst the server had banked does not look
   * like a rate.
   */
  private wallClockRate(t: number): number {
    this.pruneSuccesses(t);
    const from = Math.max(this.activeSince ?? -Infinity, t - this.rateWindowMs);
    const times = this.successTimes;
    let n = 0;
    for (let i = times.length - 1; i >= this.successHead && times[i]! > from; i--) n++;
    return (n * 1000) / this.rateWindowMs;
  }

  /**
   * The rate the server admitted: successes per second of unpaused busy time.
   *
   * `long`: since the previous decrease or the end of the last Retry-After pause (at both the server's
   * bucket had just been emptied), over at most LONG_WINDOW_MS. A token bucket lets through R·t plus what
   * it banked (≤ its burst B) over an active span t, so this errs high by ≤ B/t: `trusted` once the span
   * reaches `rateWindowMs` with 4 successes; too high a ceiling is corrected by the next overloads.
   * `recent`: the last `rateWindowMs` (4× with fewer than 4 successes) — what we are doing right now.
   * Undefined with fewer than 2 successes.
   */
  private estimateRate(t: number, prevDecreaseAt: number): { long: number; trusted: boolean; recent: number } | undefined {
    this.pruneSuccesses(t);
    const times = this.successTimes;
    const busyFrom = this.activeSince ?? -Infinity;
    const countSince = (from: number): number => {
      let n = 0;
      for (let i = times.length - 1; i >= this.successHead && times[i]! > from; i--) n++;
      return n;
    };
    const activeSpan = (from: number): number => {
      let span = t - from;
      for (const [ps, pe] of this.pauses) {
        const overlap = Math.min(t, pe) - Math.max(from, ps);
        if (overlap > 0) span -= overlap;
      }
      return span;
    };
    let from = Math.max(busyFrom, t - this.rateWindowMs);
    let n = countSince(from);
    if (n < 4) {
      from = Math.max(busyFrom, t - 4 * this.rateWindowMs);
      n = countSince(from);
    }
    let span = activeSpan(from);
    if (n < 2 || span < MIN_SPAN_MS) return undefined;
    const recent = (n * 1000) / span;

    let lastPauseEnd = -Infinity;
    for (const [, pe] of this.pauses) if (pe <= t && pe > lastPauseEnd) lastPauseEnd = pe;
    from = Math.max(busyFrom, prevDecreaseAt, lastPauseEnd, t - LONG_WINDOW_MS);
    span = activeSpan(from);
    n = countSince(from);
    const trusted = span >= this.rateWindowMs && n >= 4;
    return { long: trusted ? (n * 1000) / span : recent, trusted, recent };
  }
}
