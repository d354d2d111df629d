/**
 * `run`, after a phase's creates (`--verify-after-load`, issue 24 item 3): the type listed once more and the keys this
 * phase created checked against it (src/load/duplicate-check.ts). Duplicates made by another writer are named with
 * both ids; a key whose create was answered with an id the server lacks goes back to pending, for the next run to
 * reconcile (never created again here: that could duplicate it). Each finding is a reject of the key's row (exit 1).
 */
import { checkCreated, findingIssue, SECOND_WRITER_HINT, shouldVerify, type CreatedKeys, type Finding } from '../../load/duplicate-check.js';
import { isContentIdentity } from '../../load/identity.js';
import { MatchDigest } from '../../load/match-digest.js';
import { ServerIndexes, type IndexBuild, type ServerIndex } from '../../load/server-index.js';
import { loadReject } from '../../transform/reject-record.js';
import type { WritableType } from '../../schemas/resource-types.js';
import type { PhaseVerification } from '../run-report.js';
import type { MappingPhase, RunContext } from './run-context.js';

/** Keys listed per finding kind in the report (the counts are complete). */
const MAX_LISTED = 1000;

/** A phase's verification listing, started while its creates run (verify-early.ts) or after them. */
export interface VerifyListing {
  listing: ServerIndexes;
  index: Promise<ServerIndex>;
  /** `created.keys` before this one were answered before the listing started: the listing holds them. */
  before: number;
  /** Stops the listing when the phase ends without reading it (the run interrupted, or failed). */
  abort: AbortController;
  /** Listed resources hashed: a key known by its content alone can be looked up. */
  hashes: boolean;
  /** Its re-read, when started while it was still being read (`rereadAlongside`). */
  reread?: Promise<IndexBuild>;
  /** A re-read while the creates go on (verify-early.ts, never rejects): the phase's end waits for it, then reads on from where it ended (if it failed: `followFailed`). */
  following?: Promise<unknown>;
  /** Such a re-read failed: the listing is not believed (`reread-failed`), the type is listed again. */
  followFailed?: { error: unknown };
}

/** Why an early listing was not believed and the type listed again after the creates (the report's `fallback`). */
type Fallback = NonNullable<PhaseVerification['fallback']>;

/** Whether the phase's type is listed again: the policy, the state, and something created. */
export function verifies(run: RunContext, created: number): boolean {
  const { opts, indexes, scope } = run;
  if (!indexes || !scope || run.runId === undefined) return false;
  return shouldVerify(opts.verifyAfterLoad ?? 'auto', created, opts.sharedState ?? false);
}

/** The listing started now (in a slot of the run's window, as every listing); keys created from now on are checked by its re-read. */
export function startVerifyListing(phase: MappingPhase, run: RunContext, created: CreatedKeys): VerifyListing {
  const { opts } = run;
  const indexes = run.indexes!;
  const { name, res } = phase;
  const type = res.def.type;
  const abort = new AbortController();
  // each listed resource hashed only if a created key is known by its content alone (issue 28 item 3)
  const hashes = created.keys.some((k) => isContentIdentity(k.matchValue));
  // A listing of its own: the run's indexes (and `indexes` in the report) stay the lookups made before creating.
  const listing = new ServerIndexes(indexes.client, new Map([[type, new Map([[name, created.rule]])]]), {
    ...indexes.opts,
    signal: AbortSignal.any([indexes.opts.signal, abort.signal].filter((s): s is AbortSignal => s !== undefined)),
    keepBodies: false,
    hashes,
    onBuild: (e) => opts.onEvent?.({ type: 'index', ...e, purpose: 'verify' }),
  });
  const before = created.keys.length;
  const index = listing.get(type, `the ${name} key(s) this run created, checked for copies made by another writer`);
  index.catch(() => {}); // met when awaited (verifyPhase), or dropped with the phase (verify-early.ts)
  return { listing, index, before, abort, hashes };
}

/** A listing not read: stopped, and its pages settled. */
export async function dropListing(v: VerifyListing): Promise<void> {
  v.abort.abort();
  await Promise.all([v.index.catch(() => undefined), v.reread?.catch(() => undefined), v.following]);
}

/**
 * The phase's keys checked against its listing — started early (`started`) or now. An early listing is read again
 * from its last page (`confirmEarly`); believed only if that shows every key created since it started, else the type
 * is listed again now, as without an early start (docs/design/second-writer.md).
 */
export async function verifyPhase(phase: MappingPhase, run: RunContext, created: CreatedKeys, started?: VerifyListing): Promise<void> {
  const { report, scope } = run;
  if (!run.indexes || !scope || run.runId === undefined) return;
  const { name, res } = phase;
  const type = res.def.type;
  let verify = started ?? (verifies(run, created.keys.length) ? startVerifyListing(phase, run, created) : undefined);
  if (verify && !verify.hashes && created.keys.slice(verify.before).some((k) => isContentIdentity(k.matchValue))) {
    // A key created after an early listing started is known by its content alone, which that listing did not hash:
    // listed again now, hashed, as without an early start.
    await dropListing(verify);
    verify = startVerifyListing(phase, run, created);
  }
  if (created.unchecked) report.warnings.push(uncheckedWarning(name, created.unchecked));
  if (!verify) return;
  let index: ServerIndex | undefined;
  let reread: IndexBuild | undefined;
  let fallback: Fallback | undefined;
  // Keys created after it started: it is read again from its last page (a listing started after them all is not).
  const rereads = verify.before < created.keys.length;
  if (rereads) rereadAlongside(verify, type, name);
  try {
    index = await verify.index;
    await verify.following;
    if (verify.followFailed) throw verify.followFailed.error;
    if (rereads) ({ reread, fallback } = await confirmEarly(verify, index, created, name));
  } catch (err) {
    if (!started || run.opts.signal?.aborted) throw err;
    // The early listing refused (a `total` that grew with this run's own creates, a page that failed), or its re-read.
    fallback = index ? 'reread-failed' : 'early-listing-failed';
  }
  if (fallback || !index) {
    // Listed again now, after the creates, as without an early start — its failure then ends the run as it always did.
    await dropListing(verify);
    verify = startVerifyListing(phase, run, created);
    index = await verify.index;
    reread = undefined;
  }
  const keys = created.keys;
  const findings = checkCreated(keys, {
    listed: (id) => index!.get(id) !== undefined,
    copies: (v) => index!.lookup(name, v).map((r) => r.id),
    recorded: (id) => scope.keyOfServerId(type, id) !== undefined,
  });
  const build = verify.listing.builds.find((b) => b !== reread)!; // a re-read alongside may end first
  // Every reading from a last page, while the creates went on (verify-early.ts) and after them.
  const rereadBuilds = reread ? verify.listing.builds.filter((b) => b !== build) : [];
  const v: PhaseVerification = {
    mapping: name,
    resourceType: type,
    checked: keys.length,
    pages: build.pages,
    resources: build.resources,
    durationMs: build.durationMs,
    ...(reread ? { reread: { pages: sum(rereadBuilds, (b) => b.pages), resources: sum(rereadBuilds, (b) => b.resources) } } : {}),
    ...(fallback ? { fallback } : {}),
    duplicateCount: 0,
    missingCount: 0,
    duplicates: [],
    missing: [],
  };
  for (const f of findings) {
    record(v, f);
    if (f.kind === 'missing') {
      // Back to pending (an intent of this run): the next run looks the key up before anything is created again.
      const entry = scope.get(name, f.created.key);
      scope.recordIntent({
        mapping: name,
        key: f.created.key,
        resourceType: type,
        hash: entry?.hash ?? '',
        // As the create recorded it (a digest, src/load/match-digest.ts): never the clear match value.
        matchValue: entry?.matchValue ?? (run.matchDigest ?? new MatchDigest()).of(f.created.matchValue),
        runId: run.runId,
      });
      phase.counts.created--;
    }
    phase.onReject(loadReject(name, f.created, [findingIssue(type, f)]));
  }
  // In mapping order, however the mappings running alongside finished.
  const order = run.compiled.order;
  (report.verification ??= []).push(v);
  report.verification.sort((a, b) => order.indexOf(a.mapping) - order.indexOf(b.mapping));
  if (v.duplicateCount)
    report.warnings.push(
      `${name}: ${v.duplicateCount} key(s) this run created were created by another writer too (duplicate-on-server, both ids in the rejects) — ${SECOND_WRITER_HINT}`,
    );
  if (v.missingCount)
    report.warnings.push(
      `${name}: ${v.missingCount} create(s) were answered with an id the server does not list (created-id-missing): left pending for the next run`,
    );
}

/**
 * An early listing's last page read again, and `next` followed to the end: the union is believed only if it lists
 * every key created since the listing started (then the server lists in the order resources are added, and a copy
 * another writer added after the listing passed its place is in the re-read). Otherwise — another order, or an id
 * the server lacks — the caller lists the type again (as it does when the re-read fails: it throws).
 */
async function confirmEarly(
  verify: VerifyListing,
  index: ServerIndex,
  created: CreatedKeys,
  name: string,
): Promise<{ reread?: IndexBuild; fallback?: Fallback }> {
  const since = created.keys.slice(verify.before);
  const reread = await (verify.reread ?? verify.listing.reread(index, rereadReason(name)));
  return since.every((k) => index.get(k.serverId) !== undefined) ? { reread } : { fallback: 'not-append-ordered' };
}

/**
 * The creates and their reconcile are over but the early listing is still being read (its last page in flight):
 * its re-read starts now, from the page it is reading, rather than after it — the pages it read before that one
 * and the re-read from it, asked for after the creates, cover what a listing started now would
 * (docs/design/second-writer.md). Not before the listing asked for a page: then there is nothing to start from.
 */
function rereadAlongside(verify: VerifyListing, type: WritableType, name: string): void {
  const reading = verify.listing.reading(type);
  if (reading?.lastPageUrl === undefined) return;
  verify.reread = verify.listing.reread(reading, rereadReason(name));
  verify.reread.catch(() => {}); // met when awaited (confirmEarly), or settled with the listing (dropListing)
}

const rereadReason = (name: string) => `the ${name} listing read again from its last page: what was added since it passed there`;

function uncheckedWarning(name: string, n: number): string {
  return `${name}: ${n} created key(s) could not be checked for copies made by another writer`;
}

function record(v: PhaseVerification, f: Finding): void {
  if (f.kind === 'duplicate') {
    if (v.duplicateCount++ < MAX_LISTED) v.duplicates.push({ key: f.created.key, serverIds: [f.created.serverId, ...f.others] });
  } else if (v.missingCount++ < MAX_LISTED) v.missing.push({ key: f.created.key, serverId: f.created.serverId });
}

function sum<T>(xs: readonly T[], of: (x: T) => number): number {
  let n = 0;
  for (const x of xs) n += of(x);
  return n;
}
