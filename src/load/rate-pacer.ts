/**
 * The start pacer of the AdaptiveLimiter: starts per second, steered like TCP CUBIC after a rate limit (429).
 * Unpaced until the first `decrease`. See the design notes in src/load/adaptive-concurrency.ts.
 */
import type { AdmittedRateEstimator } from './admitted-rate.js';

/** A start this late on the pace schedule still counts as on schedule (timer lag); later = fresh start. */
const PACE_SLACK_MS = 10;
const MAX_RATE = 1e6;
/** Slow start doubles the pace every this many ms of pacing. */
const SLOW_START_DOUBLING_MS = 500;

export interface RatePacerOptions {
  /** Lowest pace, starts per second. */
  minRate: number;
  /** Pace after an overload, as a fraction of the measured ceiling (CUBIC's beta). */
  beta: number;
  /** Pacing time the cubic growth takes to climb back to the ceiling. */
  recoveryMs: number;
}

export class RatePacer {
  /** Pace in starts per second; undefined = unpaced (until the first overload). */
  private _rate: number | undefined;
  /** Ceiling of the cubic growth; undefined = unknown (slow start from `epochRate`). */
  private wMax: number | undefined;
  private epochRate = 0;
  private epochBeta = 0.9;
  /** Pacing-bound time since the last decrease (drives the growth curve). */
  private growthMs = 0;
  private lastUpdate = 0;
  private waiting = false;
  private lastWaitAt = -Infinity;
  private _nextStartAt = -Infinity;

  constructor(private readonly o: RatePacerOptions) {}

  get rate(): number | undefined {
    return this._rate;
  }

  /** When the next start is due on the pace schedule. */
  get nextStartAt(): number {
    return this._nextStartAt;
  }

  /** Nothing to start, or held by something else (window full, shared pause): the pace is not what binds. */
  notHolding(): void {
    this.waiting = false;
  }

  /** The time a start must wait for (the pace binds), or undefined when a start may go now. */
  holdUntil(t: number): number | undefined {
    if (this._rate === undefined || t >= this._nextStartAt) return undefined;
    this.waiting = true;
    this.lastWaitAt = t;
    return this._nextStartAt;
  }

  /** A task started at `t`: schedule the next start. */
  started(t: number): void {
    if (this._rate === undefined) return;
    // Slightly late (timer lag): keep the schedule so the average pace is exact. Late by more (idle, paused):
    // restart the schedule from now — no burst after a quiet spell.
    const interval = 1000 / this._rate;
    this._nextStartAt = t - this._nextStartAt <= PACE_SLACK_MS ? this._nextStartAt + interval : t + interval;
  }

  /** Advances the growth curve by the time the pacer has been holding starts back since the last update. */
  update(t: number): void {
    if (this._rate === undefined) return;
    if (this.waiting) this.growthMs += Math.max(0, t - this.lastUpdate);
    this.lastUpdate = t;
    let r: number;
    if (this.wMax === undefined) {
      r = this.epochRate * 2 ** (this.growthMs / SLOW_START_DOUBLING_MS);
    } else {
      const x = this.growthMs / this.o.recoveryMs - 1; // -1 at the decrease, 0 at the ceiling
      r = this.wMax * (1 + (1 - this.epochBeta) * x * x * x);
    }
    this._rate = this.clamp(r);
  }

  /**
   * A congestion event (429) at `t`: set a new ceiling from what the server admitted since `prevDecreaseAt`.
   * `storm`: tasks started after the previous decrease were refused too. `newLimit`: the halved window, the
   * starting pace when nothing was measured at all.
   */
  decrease(t: number, prevDecreaseAt: number, storm: boolean, newLimit: number, admitted: AdmittedRateEstimator): void {
    this.update(t);
    const r = this._rate;
    if (storm && r !== undefined) {
      // The pace is still too high. Halve it (the cubic climbs back towards r, the pace known to be too high) —
      // but not below what the server has admitted per second of wall time lately: a server that refuses
      // everything for a while (a fixed window used up) would otherwise drive the pace to nothing.
      this.setCeiling(r, t, Math.min(1, Math.max(0.5, admitted.wallClockRate(t) / r)));
      return;
    }
    const m = admitted.measure(t, prevDecreaseAt);
    if (r === undefined) {
      // First overload. Admitted over a long enough span: that is the ceiling. Overloaded soon after starting:
      // what we saw is mostly the burst the server had banked (or a window's quota), not its rate — start from the
      // successes of the last window counted as one window's worth (exact for a fixed-window quota, low for a
      // token bucket) and double until the next overload. No success at all: from the halved concurrency per second.
      if (m?.trusted) this.setCeiling(m.long, t);
      else this.slowStart(m === undefined ? Math.max(1, newLimit) : Math.max(1, admitted.wallClockRate(t)), t);
      return;
    }
    // Was the pacer what held starts back just now (so that we really were sending at r)?
    const binding = t - this.lastWaitAt <= Math.max(100, 2000 / r);
    let ceiling: number;
    if (!binding) {
      // Window- or work-bound: we sent less than r; what the server admitted is the better ceiling.
      ceiling = m === undefined ? r / 2 : Math.min(r, m.recent);
    } else if (this.wMax === undefined) {
      // Leaving slow start: r doubled while the server's banked burst (or a window's quota) hid the limit, so it
      // can overshoot R several times over; what the server admitted per second of wall time in the last window
      // is close to R. At least r/4.
      ceiling = Math.min(r, Math.max(admitted.wallClockRate(t), r / 4));
    } else if (m === undefined || !m.trusted) {
      // Overloaded soon after a (re)start at pace r: r is far above R, only the banked burst hid it.
      this.setCeiling(r, t, 0.5);
      return;
    } else {
      // On the cubic curve: we overflowed the bucket at r, just past R — or further past it in the convex part,
      // where the admitted rate tells how far.
      ceiling = Math.min(r, Math.max(m.recent, m.long));
    }
    // Overloaded before the pace got clearly past the previous ceiling: that ceiling was too high (the limit went
    // down, or it was reached with a banked burst). Aim below where it broke (CUBIC's "fast convergence") — this
    // is what settles the plateau just under R, where 429s become rare.
    if (this.wMax !== undefined && r < this.wMax * 1.02) ceiling = Math.min(ceiling, (r * (1 + this.o.beta)) / 2);
    this.setCeiling(ceiling, t);
  }

  private slowStart(rate: number, t: number): void {
    this._rate = this.clamp(rate);
    this.wMax = undefined;
    this.epochRate = this._rate;
    this.resetGrowth(t);
  }

  /** New epoch: the pace drops to beta·ceiling and climbs back along the cubic curve. */
  private setCeiling(ceiling: number, t: number, beta = this.o.beta): void {
    this.wMax = this.clamp(ceiling);
    this.epochBeta = beta;
    this._rate = Math.max(this.o.minRate, beta * this.wMax);
    this.resetGrowth(t);
  }

  private resetGrowth(t: number): void {
    this.growthMs = 0;
    this.lastUpdate = t;
    this.waiting = false;
  }

  private clamp(r: number): number {
    return Math.min(MAX_RATE, Math.max(this.o.minRate, r));
  }
}
