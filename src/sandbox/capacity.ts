/**
 * The sandbox's capacity model (`--max-in-flight K`): at most K requests are served at once; the others wait in
 * a FIFO queue, so past saturation the latency grows while the throughput does not — what a loader's capacity
 * discovery must find. Unlimited by default; the counters (served at once, queued) run either way, so tests and
 * benches can check what a client really had in flight.
 */
import { FifoQueue } from '../core/fifo-queue.js';

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
}
export class CapacityGate {
  private limit = Infinity;
  private serving = 0;
  private readonly waiting = new FifoQueue<() => void>();
  private maxServing = 0;
  private maxWaiting = 0;
  private waitedTotal = 0;

  /** K requests at once; undefined = unlimited (those waiting are let in as slots allow). */
  setLimit(k: number | undefined): void {
    this.limit = k ?? Infinity;
    while (this.queued > 0 && this.serving < this.limit) this.admitNext();
  }

  private get queued(): number {
    return this.waiting.size;
  }

  /** Takes a slot: undefined when one was free (no wait), else a promise settled when the request's turn comes. */
  acquire(): Promise<void> | undefined {
    if (this.serving < this.limit && this.queued === 0) {
      this.admitted();
      return undefined;
    }
    this.waitedTotal++;
    const turn = new Promise<void>((resolve) => this.waiting.push(resolve));
    this.maxWaiting = Math.max(this.maxWaiting, this.queued);
    return turn;
  }

  /** Gives the slot back: the oldest waiting request gets it. */
  release(): void {
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
    };
  }

  private admitNext(): void {
    const resolve = this.waiting.shift()!;
    this.admitted();
    resolve();
  }

  private admitted(): void {
    this.serving++;
    this.maxServing = Math.max(this.maxServing, this.serving);
  }
}
