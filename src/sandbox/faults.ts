/**
 * Fault injection of the sandbox: latency, a per-tenant rate limit, 503s, dropped connections, ambiguous creates
 * and gateway errors after a committed create (both decided in the create handler) and the capacity limit
 * (applied by routing.ts through capacity.ts).
 */
import { mulberry32 } from './observations.js';

export interface FaultOptions {
  /** Added before answering each authenticated request (its service time, while it holds a capacity slot). */
  latencyMs?: number;
  jitterMs?: number;
  /**
   * Requests served at once (`--max-in-flight`); the others wait in a FIFO queue, so past saturation latency
   * grows and throughput does not (see capacity.ts). Default unlimited.
   */
  maxInFlight?: number;
  /** Per-tenant token bucket (burst = one second's worth) → 429 + Retry-After + OperationOutcome. */
  rateLimitPerSecond?: number;
  /** 0..1 → 503 + Retry-After: 1, request NOT processed. */
  error503Rate?: number;
  /** 0..1 → socket destroyed before processing (nothing stored). */
  dropRate?: number;
  /** 0..1 of POST creates: stored, then the socket is destroyed before the answer. */
  ambiguousCreateRate?: number;
  /**
   * 0..1 of POST creates: stored, then answered 502 / 503 / 504 (drawn by the fault PRNG) with an HTML body, as an
   * API gateway does when the backend was slow but committed; a 503 carries `Retry-After: 1`.
   */
  gatewayErrorRate?: number;
  /** Seed of the PRNG that draws the rates (default 1), so a failing run can be replayed. */
  seed?: number;
}

/** Fault-injection state; its PRNG is consumed in request order, so a seed replays the same faults. */
export class Faults {
  private readonly rand: () => number;
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  constructor(readonly opts: FaultOptions) {
    this.rand = mulberry32(opts.seed ?? 1);
  }
  hit(rate: number | undefined): boolean {
    return rate !== undefined && rate > 0 && this.rand() < rate;
  }
  /** The status of a gateway error: 502, 503 or 504, drawn by the PRNG (so a seed replays it). */
  gatewayStatus(): 502 | 503 | 504 {
    return ([502, 503, 504] as const)[Math.min(2, Math.floor(this.rand() * 3))]!;
  }
  delayMs(): number {
    const { latencyMs = 0, jitterMs = 0 } = this.opts;
    return latencyMs + (jitterMs > 0 ? this.rand() * jitterMs : 0);
  }
  /** 0 when the request may proceed, else whole seconds until a token is available (≥ 1). */
  throttle(tenant: string): number {
    const rate = this.opts.rateLimitPerSecond;
    if (!rate) return 0;
    const now = performance.now();
    const cap = Math.max(1, rate);
    let b = this.buckets.get(tenant);
    if (!b) this.buckets.set(tenant, (b = { tokens: cap, at: now }));
    b.tokens = Math.min(cap, b.tokens + ((now - b.at) / 1000) * rate);
    b.at = now;
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - b.tokens) / rate));
  }
}

/** Rejects out-of-range fault options with p-queue style messages. */
export function checkFaults(f: FaultOptions | undefined): void {
  if (!f) return;
  for (const k of ['error503Rate', 'dropRate', 'ambiguousCreateRate', 'gatewayErrorRate'] as const) {
    const v = f[k];
    if (v !== undefined && !(typeof v === 'number' && v >= 0 && v <= 1))
      throw new TypeError(`Expected \`${k}\` to be a number between 0 and 1, got \`${String(v)}\``);
  }
  for (const k of ['latencyMs', 'jitterMs', 'rateLimitPerSecond'] as const) {
    const v = f[k];
    if (v !== undefined && !(typeof v === 'number' && Number.isFinite(v) && v >= 0))
      throw new TypeError(`Expected \`${k}\` to be a finite number ≥ 0, got \`${String(v)}\``);
  }
  const k = f.maxInFlight;
  if (k !== undefined && !(Number.isInteger(k) && k >= 1)) throw new TypeError(`Expected \`maxInFlight\` to be an integer ≥ 1, got \`${String(k)}\``);
}
