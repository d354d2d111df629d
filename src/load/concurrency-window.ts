/**
 * The concurrency window of the AdaptiveLimiter: how many tasks may run at once. Clock-free (every call takes `t`);
 * `aimd` (a pinned --concurrency) or `gradient` (capacity discovery from round-trip times).
 * Design: docs/design/adaptive-concurrency.md.
 */

export type WindowGrowth = 'aimd' | 'gradient';

export interface ConcurrencyWindowOptions {
  initial: number;
  min: number;
  max: number;
  growth: WindowGrowth;
}

/** What the window did over a run, for the report. */
export interface WindowStats {
  /** The window the busy time was mostly spent at: the time-weighted median while tasks were queued or running. */
  settled: number;
  /** Largest window reached. */
  max: number;
  /** Window now. */
  current: number;
}

/** RTT up to this much above the baseline still counts as flat (no queueing). */
const FLAT_TOLERANCE = 0.1;
/** …plus this many ms: timer and event-loop jitter of a fast local server. */
const NOISE_MS = 1;
/** Share of the way to the target taken per round when the RTT is inflated. */
const SMOOTHING = 0.5;
/** Fewest RTT samples per round (a round is one window's worth). */
const MIN_ROUND_SAMPLES = 4;
/** The baseline is the lowest round median over this span: long enough to see a drained server again. */
const BASELINE_WINDOW_MS = 10_000;
/** No flat round for this long: drain one round so that the baseline is measured again. */
const DRAIN_AFTER_MS = 4_000;
/**
 * The same spans in baseline round trips, used when longer (same 2.5 : 1): a server answering in seconds still gets
 * several rounds between drains, and its baseline outlives them.
 */
const DRAIN_AFTER_RTTS = 10;
const BASELINE_WINDOW_RTTS = 25;

export class ConcurrencyWindow {
  private estimate: number;
  private successesThisRound = 0;
  private maxReached: number;

  // gradient
  private samples: number[] = [];
  /** The same round's samples minus the client's own stalls (loop-stalls.ts): what the server took at most. */
  private served: number[] = [];
  private roundMaxInFlight = 0;
  /** Sliding-window minimum of round medians: [time, rtt], rtt increasing. */
  private baseline: [number, number][] = [];
  private lastFlatAt = -Infinity;
  /** Doubling per flat round, until the first sign of queueing or overload. */
  private slowStart = true;
  /** Samples of requests started before the last change of the window describe the old window: ignored. */
  private freshAfter = -Infinity;

  // time-weighted history of the window while busy
  private busy = false;
  private lastMark = 0;
  private timeAt = new Map<number, number>();

  constructor(private readonly o: ConcurrencyWindowOptions) {
    this.estimate = Math.min(o.max, Math.max(o.min, o.initial));
    this.maxReached = this.limit;
  }

  get limit(): number {
    return Math.max(this.o.min, Math.min(this.o.max, Math.floor(this.estimate)));
  }

  /** A success (AIMD): +1 per round of `limit` successes. Returns whether the window grew. */
  onSuccess(t: number): boolean {
    if (this.o.growth !== 'aimd') return false;
    if (++this.successesThisRound < this.limit) return false;
    this.successesThisRound = 0;
    if (this.limit >= this.o.max) return false;
    this.set(this.limit + 1, t);
    return true;
  }

  /**
   * One round-trip time (ms) of a success, with the tasks running (it included) when it ended, and `stalledMs` of it
   * during which this process's event loop was stalled (the client's delay, not the server's). Returns whether it grew.
   */
  onRtt(rttMs: number, inFlight: number, t: number, stalledMs = 0): boolean {
    if (this.o.growth !== 'gradient' || !Number.isFinite(rttMs) || rttMs < 0 || t - rttMs < this.freshAfter) return false;
    this.samples.push(rttMs);
    this.served.push(Math.max(0, rttMs - Math.max(0, stalledMs)));
    this.roundMaxInFlight = Math.max(this.roundMaxInFlight, inFlight);
    if (this.samples.length < Math.max(MIN_ROUND_SAMPLES, this.limit)) return false;
    const measured = median(this.samples);
    const short = median(this.served);
    const busiest = this.roundMaxInFlight;
    this.samples = [];
    this.served = [];
    this.roundMaxInFlight = 0;
    const before = this.limit;
    this.adjust(short, measured, busiest, t);
    return this.limit > before;
  }

  /** Decrease to at most `next` (never below min); a new round of growth starts. */
  decreaseTo(next: number, t: number): void {
    this.slowStart = false;
    this.successesThisRound = 0;
    this.samples = [];
    this.served = [];
    this.roundMaxInFlight = 0;
    this.set(Math.max(this.o.min, Math.min(this.limit, next)), t);
  }

  /** Work arrived (`true`) or everything settled (`false`): the history counts busy time only. */
  setBusy(busy: boolean, t: number): void {
    this.mark(t);
    this.busy = busy;
  }

  stats(t: number): WindowStats {
    this.mark(t);
    let total = 0;
    for (const ms of this.timeAt.values()) total += ms;
    let settled = this.limit;
    if (total > 0) {
      let acc = 0;
      for (const [w, ms] of [...this.timeAt].sort((a, b) => a[0] - b[0])) {
        acc += ms;
        if (acc >= total / 2) {
          settled = w;
          break;
        }
      }
    }
    return { settled, max: this.maxReached, current: this.limit };
  }

  /**
   * `short`: the round's median with the loop's stalls taken out (a lower bound of the server's share); `measured`:
   * as measured (an upper bound). The baseline comes from `measured`, so that a stall subtracted too generously never
   * lowers it; queueing is judged on `short`, so that a stalled loop never reads as a queue at the server.
   */
  private adjust(short: number, measured: number, busiest: number, t: number): void {
    const base = this.addBaseline(t, measured);
    const flat = short <= base * (1 + FLAT_TOLERANCE) + NOISE_MS;
    if (flat || this.lastFlatAt === -Infinity) this.lastFlatAt = t;
    const est = this.estimate;
    const allowance = Math.sqrt(est);
    if (!flat) this.slowStart = false;
    let next: number;
    if (flat) next = this.slowStart ? 2 * est : est + allowance;
    else if (t - this.lastFlatAt >= Math.max(DRAIN_AFTER_MS, DRAIN_AFTER_RTTS * base)) {
      next = (est * base) / short;
      this.lastFlatAt = t; // the next drain, if this one does not bring a flat round, waits as long again
    } else next = est + SMOOTHING * ((est * base) / short + allowance - est);
    // An unused window says nothing about the server: do not grow it.
    if (next > est && busiest < est / 2) return;
    this.set(Math.max(this.o.min, Math.min(this.o.max, next)), t);
  }

  /** Adds a round median to the sliding-window minimum; returns the minimum. */
  private addBaseline(t: number, rtt: number): number {
    const b = this.baseline;
    while (b.length > 0 && b[b.length - 1]![1] >= rtt) b.pop();
    b.push([t, rtt]);
    while (b[0]![0] < t - Math.max(BASELINE_WINDOW_MS, BASELINE_WINDOW_RTTS * b[0]![1])) b.shift();
    return b[0]![1];
  }

  private set(estimate: number, t: number): void {
    this.mark(t);
    this.freshAfter = Math.max(this.freshAfter, t);
    this.estimate = estimate;
    this.maxReached = Math.max(this.maxReached, this.limit);
  }

  private mark(t: number): void {
    if (t < this.lastMark) return; // a round-trip sample held until the loop's stalls were known ends in the past
    if (this.busy && t > this.lastMark) this.timeAt.set(this.limit, (this.timeAt.get(this.limit) ?? 0) + (t - this.lastMark));
    this.lastMark = t;
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}
