/**
 * Stops re-running an expression that keeps hitting its time limit (JSONata D1012): a runaway (a function that
 * calls itself forever) costs `limits.expressionTimeoutMs` on EVERY row — 5 s × 10,000 rows is 14 hours of a
 * run that can only reject them. After TRIP consecutive time-outs the rows are refused without running it, except
 * a probe now and then (after 4, 8, 16, … refused rows: ~log2(rows) more time-outs), since a runaway may depend on
 * the row; an evaluation that ends (a result or another error) closes the breaker again.
 * The refused rows are rejects like the timed-out ones: kept in the rejects file for re-processing.
 */
export class RunawayBreaker {
  static readonly TRIP = 3;
  static readonly FIRST_PROBE_GAP = 4;
  /** Time-outs in a row (reset by any evaluation that ends). */
  private timeouts = 0;
  private refusedSinceProbe = 0;
  private gap = RunawayBreaker.FIRST_PROBE_GAP;

  /** Run the expression on this row? false: refuse the row without running it. */
  admit(): boolean {
    if (this.timeouts < RunawayBreaker.TRIP) return true;
    if (++this.refusedSinceProbe < this.gap) return false;
    this.refusedSinceProbe = 0;
    this.gap *= 2;
    return true;
  }

  /** The evaluation ran over the time limit. */
  timedOut(): void {
    this.timeouts++;
  }

  /** The evaluation ended (a value or an error other than the time limit). */
  ended(): void {
    this.timeouts = 0;
    this.refusedSinceProbe = 0;
    this.gap = RunawayBreaker.FIRST_PROBE_GAP;
  }

  /** Consecutive time-outs so far (for the refusal's message). */
  get timedOutRows(): number {
    return this.timeouts;
  }
}
