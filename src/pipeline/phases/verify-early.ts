/**
 * A phase's verification listing started before its creates end (issue 28 item 1), when the creates' time left is
 * down to 1.3 times the listing's (src/load/verify-start.ts decides, at the server's page size, or a small one while
 * no page told it): its pages are read while the creates fill the window, instead of alone at the phase's end. Once it
 * reached the end of the list it follows the creates, read again from its last page as they add pages; after the
 * creates it is read again from there once more (verify.ts).
 */
import type { CreatedKeys } from '../../load/duplicate-check.js';
import { DEFAULT_INDEX_PAGE_SIZE } from '../../load/server-index.js';
import { followDue, LISTED_RESOURCE_MS, listingPageSize, RowRate, verifyStartDue } from '../../load/verify-start.js';
import type { ServerIndex } from '../../load/server-index.js';
import { countSourceLines } from '../../sources/line-count.js';
import type { MappingPhase, RunContext } from './run-context.js';
import { dropListing, startVerifyListing, verifies, type VerifyListing } from './verify.js';

const followReason = (name: string) => `the ${name} listing read again from its last page while the creates go on`;

/** Bytes a source's reader may hold ahead of its rows (read, not parsed yet): the byte estimate counts them unread. */
const READ_AHEAD_BYTES = 1024 * 1024;
/** Rows between two looks at the clock (each look: one sample of the rate). */
const EVERY_ROWS = 16;

export class EarlyVerify {
  #started?: VerifyListing;
  #lines?: number;
  #readRows?: number;
  #rows = 0;
  readonly #rate = new RowRate();
  #on: boolean;

  constructor(
    readonly phase: MappingPhase,
    readonly run: RunContext,
    readonly created: CreatedKeys,
  ) {
    // `never`, a shared state under `auto`, a dry run: no listing, none started early.
    this.#on = run.client !== undefined && !run.opts.dryRun && verifies(run, 1);
  }

  /** A row's outcome is known: `rowsRead` read so far, `rowsDone` of them done. */
  onRow(rowsRead: number, rowsDone: number): void {
    if (this.#started) return this.#follow();
    if (!this.#on) return;
    // Lines counted from the first row done: the phase's first requests (and the listings before them) go first.
    if (this.#rows === 0) void this.#countLines();
    if (++this.#rows % EVERY_ROWS !== 0 && this.#readRows === undefined) return;
    const t = performance.now();
    this.#rate.add(t, rowsDone);
    const rowsPerSec = this.#rate.perSec;
    // A window of 2 leaves no room to overlap; a listing with a `total` is refused once our creates grow it.
    const lookup = this.run.indexes?.peek(this.phase.res.def.type);
    if (this.run.limiter.limit <= 2 || lookup?.carriedTotal) return;
    const pageSize = listingPageSize(this.run.opts.indexPageSize || DEFAULT_INDEX_PAGE_SIZE, this.run.client?.servedPageSize);
    const due = verifyStartDue({
      rowsTotal: this.#readRows ?? this.#lines ?? this.#byBytes(rowsRead),
      rowsRead,
      rowsDone,
      created: this.created.keys.length,
      rowsPerSec,
      listedBefore: lookup?.size ?? 0,
      pageSize,
      pageMs: this.#pageMs(pageSize, rowsPerSec),
    });
    if (!due) return;
    const started = startVerifyListing(this.phase, this.run, this.created);
    this.#started = started;
    this.#followFrom = started.before;
    started.index.then(
      (index) => (this.#listed = index),
      () => {},
    );
  }

  /** The listing's reading that reached the end of the list; undefined while it reads, or once it failed. */
  #listed?: ServerIndex;
  /** Keys created when its last reading began. */
  #followFrom = 0;

  /**
   * The listing reached the end of the list and the creates have added enough since its last reading began
   * (`followDue`): read again from its last page, one reading at a time, so that the phase's end finds little to read.
   */
  #follow(): void {
    const v = this.#started!;
    if (!this.#listed || v.following || !followDue(this.created.keys.length - this.#followFrom, this.#listed.lastPageResources)) return;
    this.#followFrom = this.created.keys.length;
    v.following = v.listing.reread(this.#listed, followReason(this.phase.name)).then(
      () => (v.following = undefined),
      (err: unknown) => {
        // Not followed again; the phase's end lists the type again (a page may have been asked for and not indexed).
        v.following = undefined;
        v.followFailed = { error: err };
        this.#listed = undefined;
      },
    );
  }

  /** The source is read to its end: its rows are known. */
  readEnded(rowsRead: number): void {
    this.#readRows = rowsRead;
  }

  /** The listing started early, for the phase's end to read (once). */
  take(): VerifyListing | undefined {
    const s = this.#started;
    this.#started = undefined;
    this.#on = false;
    return s;
  }

  /** The phase ended without reading it (interrupted, failed): the listing stopped and settled. */
  async drop(): Promise<void> {
    const s = this.take();
    if (s) await dropListing(s);
  }

  async #countLines(): Promise<void> {
    try {
      this.#lines = await countSourceLines(this.phase.source);
    } catch {
      // unreadable now (it was read a moment ago): its bytes tell, or the end of its reading
    }
  }

  /**
   * Rows of the source from its bytes: read ones over the bytes surely parsed. Every byte read before the reading
   * ended (a JSON document is read whole, then parsed): no estimate.
   */
  #byBytes(rowsRead: number): number | undefined {
    const { read, total } = this.phase.bytes;
    const parsed = read - READ_AHEAD_BYTES;
    return total === undefined || parsed <= 0 || read >= total ? undefined : Math.ceil((rowsRead * total) / parsed);
  }

  /**
   * A full page's round trip: a request's round trip now (Little's law: this phase's requests in flight over its
   * rows done per second — not the run's, which counts the mappings alongside; low when rows need no request: late,
   * never early) and the listed resources' cost. Not an earlier
   * listing's pages: the run's first ones are read during the ramp, or alone, and look slower than they will be.
   */
  #pageMs(pageSize: number, rowsPerSec: number | undefined): number {
    const rtt = rowsPerSec ? ((this.phase.sync?.inFlight ?? 0) * 1000) / rowsPerSec : 0;
    return Math.max(1, rtt) + pageSize * LISTED_RESOURCE_MS;
  }
}
