/**
 * What a server admitted lately: success times and Retry-After pauses over the last seconds, for the rate pacer
 * (src/load/rate-pacer.ts) to set its ceiling from. Clock-free: every method takes the time `t`.
 */

/** Minimum span of observations for a rate measurement. */
const MIN_SPAN_MS = 20;
/** Longest span used to measure the admitted rate. */
const LONG_WINDOW_MS = 10_000;

export interface AdmittedRate {
  /** Successes per second of unpaused busy time since the last decrease or pause (see `measure`). */
  long: number;
  /** Whether `long` spans enough time to be a rate rather than the server's banked burst. */
  trusted: boolean;
  /** Successes per second of unpaused time over the last `windowMs` — what we are doing right now. */
  recent: number;
}

export class AdmittedRateEstimator {
  /** Completion times of recent successes (array + head). */
  private times: number[] = [];
  private head = 0;
  /** Recent Retry-After pauses [start, end]. */
  private pauses: [number, number][] = [];
  /** Start of the current busy period (tasks queued or running); undefined while idle. */
  private activeSince: number | undefined;

  constructor(private readonly windowMs: number) {}

  get busy(): boolean {
    return this.activeSince !== undefined;
  }

  /** Work arrived (`true`) or everything settled (`false`). */
  setBusy(busy: boolean, t: number): void {
    if (busy) this.activeSince ??= t;
    else this.activeSince = undefined;
  }

  success(t: number): void {
    this.times.push(t);
    this.prune(t);
  }

  /** A shared pause (Retry-After) from `t` to `until`; overlapping pauses are merged. */
  pause(t: number, until: number): void {
    const last = this.pauses[this.pauses.length - 1];
    if (last && last[1] >= t) last[1] = until;
    else this.pauses.push([t, until]);
  }

  /**
   * Successes per second of wall time (pauses included) over the last `windowMs` — counted over the whole window
   * even at the start of a busy period, so that a burst the server had banked does not look like a rate.
   */
  wallClockRate(t: number): number {
    this.prune(t);
    return (this.countSince(Math.max(this.activeSince ?? -Infinity, t - this.windowMs)) * 1000) / this.windowMs;
  }

  /**
   * The rate the server admitted: successes per second of unpaused busy time.
   *
   * `long`: since the previous decrease (`prevDecreaseAt`) or the end of the last Retry-After pause (at both the
   * server's bucket had just been emptied), over at most LONG_WINDOW_MS. A token bucket lets through R·t plus what
   * it banked (≤ its burst B) over an active span t, so this errs high by ≤ B/t: `trusted` once the span reaches
   * `windowMs` with 4 successes; too high a ceiling is corrected by the next overloads.
   * `recent`: the last `windowMs` (4× with fewer than 4 successes). Undefined with fewer than 2 successes.
   */
  measure(t: number, prevDecreaseAt: number): AdmittedRate | undefined {
    this.prune(t);
    const busyFrom = this.activeSince ?? -Infinity;
    let from = Math.max(busyFrom, t - this.windowMs);
    let n = this.countSince(from);
    if (n < 4) {
      from = Math.max(busyFrom, t - 4 * this.windowMs);
      n = this.countSince(from);
    }
    let span = this.activeSpan(from, t);
    if (n < 2 || span < MIN_SPAN_MS) return undefined;
    const recent = (n * 1000) / span;

    let lastPauseEnd = -Infinity;
    for (const [, pe] of this.pauses) if (pe <= t && pe > lastPauseEnd) lastPauseEnd = pe;
    from = Math.max(busyFrom, prevDecreaseAt, lastPauseEnd, t - LONG_WINDOW_MS);
    span = this.activeSpan(from, t);
    n = this.countSince(from);
    const trusted = span >= this.windowMs && n >= 4;
    return { long: trusted ? (n * 1000) / span : recent, trusted, recent };
  }

  private countSince(from: number): number {
    let n = 0;
    for (let i = this.times.length - 1; i >= this.head && this.times[i]! > from; i--) n++;
    return n;
  }

  /** Time from `from` to `t` minus the pauses within it. */
  private activeSpan(from: number, t: number): number {
    let span = t - from;
    for (const [ps, pe] of this.pauses) {
      const overlap = Math.min(t, pe) - Math.max(from, ps);
      if (overlap > 0) span -= overlap;
    }
    return span;
  }

  private prune(t: number): void {
    const keepFrom = t - Math.max(LONG_WINDOW_MS, 4 * this.windowMs);
    const times = this.times;
    while (this.head < times.length && times[this.head]! < keepFrom) this.head++;
    if (this.head > 1024 && this.head * 2 > times.length) {
      this.times = times.slice(this.head);
      this.head = 0;
    }
    while (this.pauses.length > 0 && this.pauses[0]![1] < keepFrom) this.pauses.shift();
  }
}
