/**
 * The sandbox's capacity model (`--max-in-flight K`): at most K requests are served at once; the others wait in
 * a FIFO queue, so past saturation the latency grows while the throughput does not — what a loader's capacity
 * discovery must find. A request whose client goes away while it waits leaves the queue (it is never served). Unlimited by default; the counters (served at once, queued) run either way, so tests and
 * benches can check what a client really had in flight.
 */
import { FifoQueue } from '../core/fifo-queue.js';

const TIMELINE_BUCKET_MS = 100;
/** The timeline covers the first 10 minutes after the first admission (a bench's run): a long-lived sandbox keeps no more. */
const TIMELINE_MAX_BUCKETS = 6000;

export interface CapacityStats {
  /** K, or null when unlimited. */
  limit: number | null;
  /** Requests being served now, and waiting for a slot now. */
  inFlight: number;
  queued: number;
  /** Most requests served at once, and most waiting at once, since the start. */
  maxInFlight: number;
  maxQueued: number;
  /** Requests that had to wait for a slot. */
  queuedTotal: number;
  /**
   * Time-weighted mean of the requests served at once, from the first request admitted to the last answered
   * (idle gaps between them included: a client's phase changes count); 0 before any request.
   */
  meanInFlight: number;
  /** That span in ms. */
  spanMs: number;
}
/** Requests served at once over time: the time-weighted mean per bucket of `bucketMs`, from the first admission. */
export interface CapacityTimeline {
  bucketMs: number;
  /** The first admission, in ms since the epoch (to line the buckets up with another process's clock). */
  startEpochMs: number;
  meanInFlight: number[];
}

/** A request waiting for a slot: `admitted` resolves true when its turn comes, false once it has `leave`n the queue. */
export interface CapacityTurn {
  admitted: Promise<boolean>;
  /** The client went away: give up the place in the queue (no-op once admitted). */
  leave(): void;
}

interface Waiter {
  resolve: (admitted: boolean) => void;
  /** Admitted or left: no longer waiting (left ones stay in the FIFO until their turn, then are skipped). */
  done: boolean;
}

export class CapacityGate {
  private limit = Infinity;
  private serving = 0;
  private readonly waiting = new FifoQueue<Waiter>();
  /** Waiters still waiting (those that left are in `waiting` until skipped). */
  private queued = 0;
  private maxServing = 0;
  private maxWaiting = 0;
  private waitedTotal = 0;
  /** ∫ serving dt (request·ms) since the first admission, and the times it spans. */
  private servedArea = 0;
  private firstAt: number | undefined;
  private markAt = 0;
  private lastReleaseAt = 0;
  /** ∫ serving dt per TIMELINE_BUCKET_MS since the first admission (a bench's picture of where the in-flight went). */
  private readonly buckets: number[] = [];

  /** K requests at once; undefined = unlimited (those waiting are let in as slots allow). */
  setLimit(k: number | undefined): void {
    this.limit = k ?? Infinity;
    while (this.queued > 0 && this.serving < this.limit) this.admitNext();
  }

  /** Takes a slot: undefined when one was free (no wait), else the request's place in the queue. */
  acquire(): CapacityTurn | undefined {
    if (this.serving < this.limit && this.queued === 0) {
      this.admitted();
      return undefined;
    }
    this.waitedTotal++;
    let resolve!: (admitted: boolean) => void;
    const admitted = new Promise<boolean>((r) => (resolve = r));
    const w: Waiter = { resolve, done: false };
    this.waiting.push(w);
    this.queued++;
    this.maxWaiting = Math.max(this.maxWaiting, this.queued);
    const leave = (): void => {
      if (w.done) return;
      w.done = true;
      this.queued--;
      resolve(false);
    };
    return { admitted, leave };
  }

  /** Gives the slot back: the oldest waiting request gets it. */
  release(): void {
    this.lastReleaseAt = this.mark();
    this.serving--;
    if (this.queued > 0 && this.serving < this.limit) this.admitNext();
  }

  /** Lets every waiting request in (the server is closing: they see it and drop their sockets). */
  drain(): void {
    while (this.queued > 0) this.admitNext();
  }

  stats(): CapacityStats {
    return {
      limit: Number.isFinite(this.limit) ? this.limit : null,
      inFlight: this.serving,
      queued: this.queued,
      maxInFlight: this.maxServing,
      maxQueued: this.maxWaiting,
      queuedTotal: this.waitedTotal,
      ...this.meanServed(),
    };
  }

  /** `stats().meanInFlight` per 100 ms bucket, from the first admission up to now (10 minutes at most). */
  timeline(): CapacityTimeline {
    this.mark();
    const first = this.firstAt ?? performance.now();
    return {
      bucketMs: TIMELINE_BUCKET_MS,
      startEpochMs: Math.round(performance.timeOrigin + first),
      meanInFlight: this.buckets.map((a) => Math.round((a / TIMELINE_BUCKET_MS) * 10) / 10),
    };
  }

  /** The oldest request still waiting gets a slot (`queued` > 0: there is one). */
  private admitNext(): void {
    let w = this.waiting.shift()!;
    while (w.done) w = this.waiting.shift()!;
    w.done = true;
    this.queued--;
    this.admitted();
    w.resolve(true);
  }

  private admitted(): void {
    this.mark();
    this.firstAt ??= this.markAt;
    this.serving++;
    this.maxServing = Math.max(this.maxServing, this.serving);
  }

  /** Adds the time since the last change of `serving` to its integral; returns now (ms). */
  private mark(): number {
    const t = performance.now();
    if (this.firstAt !== undefined) {
      this.servedArea += this.serving * (t - this.markAt);
      if (this.serving > 0) this.addToBuckets(this.markAt - this.firstAt, t - this.firstAt);
    }
    this.markAt = t;
    return t;
  }

  /** Spreads `serving` over the buckets between `from` and `to` (ms since the first admission). */
  private addToBuckets(from: number, to: number): void {
    while (from < to) {
      const i = Math.floor(from / TIMELINE_BUCKET_MS);
      if (i >= TIMELINE_MAX_BUCKETS) return;
      const end = Math.min(to, (i + 1) * TIMELINE_BUCKET_MS);
      while (this.buckets.length <= i) this.buckets.push(0);
      this.buckets[i] = (this.buckets[i] ?? 0) + this.serving * (end - from);
      from = end;
    }
  }

  private meanServed(): { meanInFlight: number; spanMs: number } {
    if (this.firstAt === undefined) return { meanInFlight: 0, spanMs: 0 };
    // Up to the last answer: the time since (an idle server after the run) is not the client's.
    const area = this.servedArea + this.serving * (performance.now() - this.markAt);
    const end = this.serving > 0 ? performance.now() : this.lastReleaseAt;
    const spanMs = end - this.firstAt;
    return { meanInFlight: spanMs > 0 ? Math.round((area / spanMs) * 100) / 100 : 0, spanMs: Math.round(spanMs) };
  }
}
