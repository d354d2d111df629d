/**
 * The client's own delay, kept apart from the server's (issue 28): a response that reached the socket while this
 * process's event loop was busy (our own work, or the OS running other processes) waits for the loop, and its
 * round-trip time grows by a delay the server never caused. A drift timer (LoopStallMeter) ticks every TICK_MS
 * while the limiter is busy; a tick that fires late marks [due, fired] as a stall. The limiter asks how much of a
 * request's round trip was stalled. Design: docs/design/adaptive-concurrency.md ("The client's own delay").
 */

/** Period of the drift timer: short enough to see the stalls of a 50 ms round trip, cheap (200 wake-ups/s while busy). */
const TICK_MS = 5;
/** A tick this late or less is timer granularity, not a stall. */
const MIN_STALL_MS = 1;
/** A response handled this long after a stall ended did not wait for it: the next tick would have seen the loop busy. */
const FREE_AFTER_MS = TICK_MS + MIN_STALL_MS;
/** Stalls older than this are forgotten (no round trip the limiter measures is longer). */
const KEEP_MS = 120_000;

/** Where the limiter reads the stalls from (a LoopStallMeter, or a StallTimeline fed by a test). */
export interface LoopStalls {
  /** Time up to which stalls are known (the last tick): a response handled later may still have been held up. */
  readonly seenUntil: number;
  /** How long a response handled at `to` (sent at `from`) waited for the loop, at most (see StallTimeline). */
  delayBefore(from: number, to: number): number;
  /** Work arrived (`true`) or everything settled (`false`): a meter measures only while busy. */
  setBusy?(busy: boolean): void;
  /** Calls `listener` whenever `seenUntil` moved on (a meter's tick): samples held for it can be judged. One listener. */
  onSeen?(listener: () => void): void;
}

/** Stall intervals on the limiter's clock, in order; clock-free (every call takes its times). */
export class StallTimeline implements LoopStalls {
  private starts: number[] = [];
  private ends: number[] = [];
  private head = 0;
  private seen = -Infinity;

  get seenUntil(): number {
    return this.seen;
  }

  /** A tick due at `dueAt` ran at `firedAt`: the loop was held up in between (if late by more than the granularity). */
  add(dueAt: number, firedAt: number): void {
    this.seen = Math.max(this.seen, firedAt);
    if (firedAt - dueAt <= MIN_STALL_MS) return;
    const last = this.ends.length > this.head ? this.ends[this.ends.length - 1]! : -Infinity;
    this.starts.push(Math.max(dueAt, last));
    this.ends.push(firedAt);
    this.prune(firedAt - KEEP_MS);
  }

  /**
   * How long a response handled at `to` (sent at `from`) waited for the loop, at most: the part of [from, to] in the
   * stall it was handled in or just after. The late tick that ended a stall ran at its end, so the loop was free there:
   * a response that arrived before would have been handled then, and earlier stalls fell within the server's time.
   */
  delayBefore(from: number, to: number): number {
    let lo = this.head;
    let hi = this.starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.starts[mid]! < to) lo = mid + 1;
      else hi = mid;
    }
    const i = lo - 1; // the last stall that began before `to`
    if (i < this.head || this.ends[i]! < to - FREE_AFTER_MS) return 0;
    return Math.max(0, Math.min(to, this.ends[i]!) - Math.max(from, this.starts[i]!));
  }

  private prune(before: number): void {
    while (this.head < this.ends.length && this.ends[this.head]! < before) this.head++;
    if (this.head > 1024 && this.head * 2 > this.ends.length) {
      this.starts = this.starts.slice(this.head);
      this.ends = this.ends.slice(this.head);
      this.head = 0;
    }
  }
}

/** The drift timer: ticks while busy (unref'd: it never holds the process), records late ticks in a StallTimeline. */
export class LoopStallMeter implements LoopStalls {
  private readonly timeline = new StallTimeline();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private seenListener: (() => void) | undefined;

  constructor(private readonly now: () => number = () => performance.now()) {}

  get seenUntil(): number {
    return this.timeline.seenUntil;
  }

  setBusy(busy: boolean): void {
    if (!busy) {
      clearTimeout(this.timer);
      this.timer = undefined;
    } else if (this.timer === undefined) this.tick(this.now() + TICK_MS);
  }

  delayBefore(from: number, to: number): number {
    return this.timeline.delayBefore(from, to);
  }

  onSeen(listener: () => void): void {
    this.seenListener = listener;
  }

  private tick(dueAt: number): void {
    this.timer = setTimeout(() => {
      const t = this.now();
      this.timeline.add(dueAt, t);
      this.tick(t + TICK_MS);
      this.seenListener?.();
    }, TICK_MS);
    this.timer.unref?.();
  }
}
