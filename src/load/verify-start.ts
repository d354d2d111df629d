/**
 * When a phase's verification listing (duplicate-check.ts) starts (issue 28 item 1): before the phase's creates end,
 * so that its pages — one request at a time, `next` links only — are read while the creates still fill the window,
 * ending about when they do. After the creates the listing is read again from its last page (verify.ts): too early
 * makes that re-read longer (the pages added since), too late leaves the listing alone at the end with one request
 * in flight, as before: the estimates err late (rows counted high, the rate measured low).
 */

/** What a phase knows of its own progress when an answer comes. */
export interface VerifyStartInput {
  /** Rows the source holds: exact once it is read to its end, else an estimate (its lines); undefined: unknown. */
  rowsTotal: number | undefined;
  /** Rows read so far: an estimate below them is wrong (unknown), not "every row done". */
  rowsRead: number;
  /** Rows whose outcome is known (answered, rejected, skipped). */
  rowsDone: number;
  /** Keys the phase created so far. */
  created: number;
  /** Rows done per second, recently; undefined until measured. */
  rowsPerSec: number | undefined;
  /** Resources of the type the server listed before the phase (its lookup listing). */
  listedBefore: number;
  /** Resources per listing page (`_count`; the server's own page when unknown). */
  pageSize: number;
  /** A full page's round trip, ms. */
  pageMs: number;
}

/**
 * The listing starts when the creates' time left is down to this multiple of its estimated time: above 1, so that it
 * ends a little before the creates do. Every listing is read again from its last page after the creates (verify.ts):
 * ending early costs nothing but the resources created since, on that page (a second page once they and the page's
 * own pass a page's size); ending late leaves the listing alone at the phase's end. Measured with
 * TIMELINE=1 in bench/run-window.mjs (5,000 patients, 2 runs of each): at ¾ the listings ended 0 – 130 ms after their
 * creates, at 1.3 they ended 0.12 – 0.51 s before, each re-read one page of ~40 ms; the server under 8 in flight at
 * the care teams' start 50 – 80 ms instead of 100 – 110 in the first runs (second runs 90 – 130 vs 100 – 150).
 */
const START_BIAS = 1.3;

/** Whether the listing starts now: the creates' time left is down to (START_BIAS times) the listing's. */
export function verifyStartDue(i: VerifyStartInput): boolean {
  if (i.created === 0 || i.rowsTotal === undefined || i.rowsTotal < i.rowsRead || !i.rowsPerSec || i.rowsPerSec <= 0) return false;
  const rowsLeft = Math.max(0, i.rowsTotal - i.rowsDone);
  // What the listing will page through: what is there, and the creates still to come at the phase's rate of creates.
  const createdShare = i.rowsDone > 0 ? Math.min(1, i.created / i.rowsDone) : 1;
  const resources = i.listedBefore + i.created + createdShare * rowsLeft;
  const listingMs = Math.max(1, Math.ceil(resources / Math.max(1, i.pageSize))) * i.pageMs;
  return (rowsLeft / i.rowsPerSec) * 1000 <= START_BIAS * listingMs;
}

/**
 * Resources per page a listing's time is estimated with while no page of this run told the server's own: a common
 * default of FHIR servers. A server that ignores `_count` may page by 10 – 100, and a listing estimated at the 1,000
 * asked for started far too late there (`COUNT_PARAM=ignore PAGE_SIZE=50 node bench/run-window.mjs 5000`: the first
 * run's window 0.61, its care teams' listing 5 s alone at the end); estimated small, it starts early and follows the
 * creates (verify-early.ts), which costs little when the pages turn out large.
 */
export const UNSEEN_PAGE_SIZE = 20;

/**
 * The page size a listing's time is estimated with: the one asked for (`_count`), or the server's own when it served
 * smaller pages in this run (it ignores or caps `_count`); while no page told, UNSEEN_PAGE_SIZE at most.
 */
export function listingPageSize(asked: number, served: number | undefined): number {
  return Math.max(1, Math.min(asked, served ?? UNSEEN_PAGE_SIZE));
}

/**
 * Fewest creates between two re-reads of a listing that reached the end of the list while the phase's creates go on.
 * Each re-read reads the last page again (`lastPageResources`) and what was added after it: waiting for twice as many
 * new resources keeps what it reads again under half of what it adds, whatever the page size (at once, a page of 1,000
 * was parsed again for every 1,000 added), and leaves at most ~3 pages to the phase's end.
 */
export const FOLLOW_MIN_CREATES = 32;

/** Whether a listing that reached the end is read again now: `createdSince` keys created since its last reading began. */
export function followDue(createdSince: number, lastPageResources: number): boolean {
  return createdSince >= Math.max(FOLLOW_MIN_CREATES, 2 * lastPageResources);
}

/** Client-side cost of a listed resource (the server's serialising, the client's parsing and indexing), ms: measured, 25 ms latency, pages of 1,000. */
export const LISTED_RESOURCE_MS = 0.008;

/** Rows done per second over about the last second (older samples dropped): the phase's rate now, not its ramp. */
export class RowRate {
  readonly #samples: { t: number; rows: number }[] = [];
  #head = 0;

  constructor(readonly spanMs = 1000) {}

  add(t: number, rows: number): void {
    this.#samples.push({ t, rows });
    while (this.#samples.length - this.#head > 2 && t - this.#samples[this.#head + 1]!.t >= this.spanMs) this.#head++;
    if (this.#head > 1024) {
      this.#samples.splice(0, this.#head);
      this.#head = 0;
    }
  }

  /** Undefined until two samples at least 8 rows and some time apart. */
  get perSec(): number | undefined {
    const first = this.#samples[this.#head];
    const last = this.#samples[this.#samples.length - 1];
    if (!first || !last || last.t <= first.t || last.rows - first.rows < 8) return undefined;
    return ((last.rows - first.rows) * 1000) / (last.t - first.t);
  }
}
