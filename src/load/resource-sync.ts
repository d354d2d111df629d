import type { CareClient } from '../api/client.js';
import { isWellFormed } from '../core/well-formed.js';
import { classifyRetry } from '../api/client.js';
import { ApiError, ProtocolError, RetryAfterTooLongError, TransportError } from '../api/errors.js';
import type { Resource } from '../api/types.js';
import { hasCode, issue, type Issue } from '../core/issues.js';
import type { CompiledResource } from '../mapping/compile-mapping.js';
import type { IntentInput, LedgerEntry, LedgerScope, SyncedInput } from '../state/ledger.js';
import { contentHash } from '../core/content-hash.js';
import type { WritableType } from '../schemas/resource-types.js';
import { CareEtlError, issuesOf } from '../core/issues.js';
import { MappingEvalError } from '../mapping/errors.js';
import type { ReconcilePolicy } from '../mapping/types.js';
import { comparable, comparableHash, contentAndComparableHash } from './identity.js';
import { matchRuleOf, type IndexedResource, type MatchRule, type ServerIndex, type ServerIndexes } from './server-index.js';
import { decideIdentity, decideIdentityNow, MatchClaims } from './identity-check.js';
import { decide, decideFound, teamUpdate, type FoundDecision, type Looked, type Matches, type MappedView } from './decide.js';
import type { MappedResource } from '../transform/transform-source.js';
import type { AdaptiveLimiter } from './adaptive-concurrency.js';
import { withRetry, type RetryOptions } from '../core/retry.js';
import { foreignDigestMessage, isMatchDigest, MatchDigest } from './match-digest.js';
import { afterSends, afterSendsWith } from './after-sends.js';

export type SyncOutcome =
  | {
      kind: 'created' | 'updated' | 'unchanged';
      serverId: string;
      /** The server id came from the server (found by the match rule), not from the ledger. */
      adopted?: boolean;
      /** CareTeam updates: members (`Practitioner/<id>`) whose participation this write ended (end date set or dropped). */
      endedMembers?: string[];
    }
  | { kind: 'deferred' } // outcome unknown: reconciled at the end of the phase
  | { kind: 'rejected'; issues: Issue[] };

/**
 * What the server holds for one mapped resource (`inspect`: state rebuild and check; nothing is sent). `equal`:
 * a `--reconcile always` run would send nothing for it (`decide`).
 */
export type Inspection =
  | { kind: 'found'; serverId: string; via: 'ledger' | 'match'; equal: boolean }
  /** Not on the server: a run would create it. `vanished`: the ledger records a server id the server no longer has. */
  | { kind: 'absent'; vanished?: string }
  /** Decided by `settleAmbiguousInspections` once the whole source is read. */
  | { kind: 'deferred' }
  | { kind: 'rejected'; issues: Issue[] };

/**
 * What a run would do with one mapped resource (`plan`: `care-etl plan`; nothing is sent or recorded). Bodies are
 * the server's resource as listed (`before`) and the one the run would send (`after`).
 */
export type PlanOutcome =
  /** `recreate`: why a key the state records is created again (its resource is gone from the server). */
  | { kind: 'create'; recreate?: string; note?: string }
  | { kind: 'update'; serverId: string; adopted?: boolean; before: Resource; after: Resource; endedMembers?: string[] }
  /**
   * `drift`: the state says loaded and unchanged, so the run sends nothing — yet the server's copy differs
   * (`before`) or is gone (no `before`); `--reconcile always` would update or create it.
   */
  | { kind: 'unchanged'; serverId: string; adopted?: boolean; drift?: { before?: Resource; after: Resource } }
  /** Decided by `settleAmbiguousPlans` once the whole source is read. */
  | { kind: 'deferred' }
  | { kind: 'rejected'; issues: Issue[] };

/** An association a run would end (`onMissing: end` of a key gone from the export): the body before and after. */
export interface PlannedEnd {
  key: string;
  serverId: string;
  before: Resource;
  after: Resource;
}

export interface SyncDeps {
  client: CareClient;
  scope: LedgerScope;
  runId: number;
  limiter: AdaptiveLimiter;
  retry: RetryOptions;
  /** The run's date: `period.end` of ended associations. */
  now: Date;
  /** The run's server listings (one per type). */
  indexes: ServerIndexes;
  /** This mapping's reconcile policy (flag > mapping > `auto`). */
  policy: ReconcilePolicy;
  /** How match values are kept in the state (CARE_STATE_SECRET; default: unkeyed). Never in clear. */
  matchDigest?: MatchDigest;
  /**
   * The run's cancel (SIGINT/SIGTERM): queue waits, back-offs and requests in flight end at once with its reason.
   * A create so ended keeps its intent pending (outcome unknown); nothing else is recorded for an ended request.
   */
  signal?: AbortSignal;
  /** Called once, at the first key the ledger does not know (the run may start other listings then: issue 28). */
  onUnknownKey?: () => void;
}

/** Without CARE_STATE_SECRET: an unkeyed digest (a local state only; `matchDigestFor`). */
const UNKEYED_DIGEST = new MatchDigest();

interface Deferred {
  item: MappedResource;
  hash: string;
  matchValue: string;
  /** A pending intent left by an earlier (interrupted) run, not a create this run sent. */
  earlier: boolean;
  /** Why the last create's outcome is unknown (for the reject, should it stay unknown). */
  why?: string;
}

/**
 * How many times a create whose answer was lost is reconciled and re-tried within one run. Each round lists
 * the type once and only runs while something is still unknown; with a fraction p of creates losing their
 * answer, N·p^(rounds+1) creates are expected to stay unknown (10 rounds at p = 8 %: ~2·10⁻⁸ of 2,000).
 */
const RECONCILE_ROUNDS = 10;

/** Most keys of a mapping the loader reads from the ledger up front (`#mayKnow`); a larger state is asked per row. */
const MAX_KNOWN_KEYS = 100_000;

/** Most rows in one commit of the loader's buffered ledger writes (see `ResourceSync.#commitCanWait`). */
const WRITE_MAX_BATCH = 256;
/** Longest a buffered ledger write waits for others to share its commit. */
const WRITE_MAX_WAIT_MS = 100;
/** How often waiting ledger writes are looked at when none of the mapping's requests ends meanwhile. */
const WRITE_RECHECK_MS = 5;

/** Why `care-etl plan` lists a type (once, up front, whatever the policy). */
const PLAN_REASON = 'plan: every resource of the type compared with the mapped ones';

/**
 * Brings the server in line with one mapping's resources, exactly once per source key — with or without the
 * ledger (the server is the system of record, the ledger a cache of it):
 * - a key the ledger holds as synced: same hash → no request; changed → one update (a 404 → found again or
 *   created again);
 * - a key the ledger does not know: looked up on the server by its match rule first (`ServerIndexes`, one
 *   listing per type per run) — found once → adopted, updated only if its content differs; found twice →
 *   rejected naming both ids; not found → intent recorded durably, then created;
 * - a create whose answer was lost (or a pending intent of an interrupted run) is never re-sent blindly: it is
 *   deferred, and `reconcile()` looks it up on a fresh listing first.
 */
export class ResourceSync {
  readonly #deferred: Deferred[] = [];
  readonly #seen: string[] = [];
  /** Successful writes not yet recorded: committed together once per event-loop turn (see #recordSynced). */
  readonly #synced: SyncedInput[] = [];
  /** Intents waiting for that same commit; their creates are sent once it returned. */
  readonly #intents: { e: IntentInput; resolve: () => void; reject: (err: unknown) => void }[] = [];
  #writesScheduled = false;
  /** Match value → the keys of this run using it. */
  readonly #claims = new MatchClaims();
  /** Keys whose match value designates several identical server copies: settled once every key is known. */
  readonly #ambiguous: { item: MappedResource; hash: string; matchValue: string; record?: boolean }[] = [];
  /** Server id → key adopted or created for it in this run (the ledger lags by one event-loop turn). */
  readonly #owners = new Map<string, string>();
  readonly #rule: MatchRule;
  /** Why a listing is needed when a key unknown to the ledger comes (decided once, at the first one). */
  #unknownReason?: string;
  /** Interrupted creates of keys gone from the source, recorded under another CARE_STATE_SECRET: left pending. */
  #foreignOrphans = 0;

  constructor(
    readonly res: CompiledResource,
    readonly deps: SyncDeps,
  ) {
    this.#rule = matchRuleOf(res);
  }

  get #type(): WritableType {
    return this.res.def.type;
  }

  /**
   * Runs one request through the limiter with retries; its round-trip time steers the limiter's window, 429s and
   * 502/503/504s slow it down.
   */
  async #call<T>(fn: (signal?: AbortSignal) => Promise<T>): Promise<T> {
    const { limiter, signal } = this.deps;
    const answer = await withRetry(
      () =>
        limiter.run(async () => {
          const sentAt = performance.now();
          try {
            const r = await this.#counted(fn, signal);
            limiter.onSuccess(performance.now() - sentAt);
            return r;
          } catch (err) {
            // A 429 is a rate signal (pace starts); a 503 (or a gateway's 502/504) only means "busy now" (fewer in
            // flight, no global pause).
            if (err instanceof ApiError && err.status === 429) limiter.onOverload(err.retryAfterMs);
            else if (err instanceof ApiError && (err.status === 502 || err.status === 503 || err.status === 504)) limiter.onUnavailable();
            throw err;
          } finally {
            this.#writeTurnAfterSends(); // a slot frees: buffered intents may be needed now
          }
        }, signal),
      classifyRetry,
      (this.#retryOptions ??= { ...this.deps.client.retryOptions(this.deps.retry), signal }),
    );
    // The limiter sent the next request when this one's answer came; what the answer leads to waits until it is written.
    return afterSendsWith(answer);
  }

  #inFlight = 0;

  /** This mapping's requests in flight now (the run's limiter counts every mapping's and the listings). */
  get inFlight(): number {
    return this.#inFlight;
  }

  async #counted<T>(fn: (signal?: AbortSignal) => Promise<T>, signal: AbortSignal | undefined): Promise<T> {
    this.#inFlight++;
    try {
      return await fn(signal);
    } finally {
      this.#inFlight--;
    }
  }

  /** `#call`'s retry options: the same for every request (built once). */
  #retryOptions?: RetryOptions;

  /** The run was cancelled: whatever a request ended with, the run stops (the caller's reason, an AbortError). */
  #throwIfCancelled(): void {
    this.deps.signal?.throwIfAborted();
  }

  /** The value this mapped resource is found by on the server (see src/load/identity.ts). */
  matchValue(resource: Resource): Promise<string> {
    return this.#rule.ofMapped(resource);
  }

  /** `always`: list the type before the phase, so recorded resources are checked against the server too. */
  async prepare(): Promise<void> {
    if (this.deps.policy === 'always') await this.deps.indexes.get(this.#type, `--reconcile always (${this.res.def.name})`);
  }

  async sync(item: MappedResource): Promise<SyncOutcome> {
    try {
      // Every row, known to the state or not: the offline loops decide the same, and a rule that only fails once
      // the state is lost would fail at the worst time.
      const view = this.#mapped(item);
      const mapped = view instanceof Promise ? await view : view; // no promise per row for the built-in match rules
      const entry = this.#mayKnow(item.key) ? this.deps.scope.get(item.mapping, item.key) : undefined;
      // `always` listed the type before the phase: the server, not the ledger, says what is there.
      const listed = this.deps.policy === 'always' ? this.deps.indexes.peek(this.#type) : undefined;
      const byId = entry?.serverId && listed ? (listed.get(entry.serverId) ?? null) : undefined;
      const looked = this.#decide(item, entry, byId, mapped);
      return await this.#carryOut(item, entry, looked instanceof Promise ? await looked : looked, mapped); // no promise per row once listed
    } catch (err) {
      // The state file or the server failed, or the run was interrupted: the run cannot go on (not this row's fault).
      this.#throwIfCancelled();
      if ((err instanceof CareEtlError && !(err instanceof MappingEvalError)) || (err as Error)?.name === 'AbortError') throw err;
      return { kind: 'rejected', issues: issuesOf(err) };
    }
  }

  /**
   * Whether the ledger may hold an entry of `key`: the mapping's keys are read once, when its first row comes (up to
   * MAX_KNOWN_KEYS; more: every row is looked up), and a key not among them has no entry — a phase meets each key
   * once, so an entry written later in it is never of a key still to come. A statement per new row was 3 % of a
   * second run's CPU (issue 28); a first load has no key to read. A key with a lone UTF-16 surrogate is always asked:
   * the state stores its bytes as they come and reads them back as replacement characters (U+FFFD), so only the
   * statement finds it again.
   */
  #mayKnow(key: string): boolean {
    if (this.#keysAtStart === undefined) this.#keysAtStart = this.deps.scope.keys(this.res.def.name, MAX_KNOWN_KEYS) ?? null;
    return this.#keysAtStart === null || this.#keysAtStart.has(key) || !isWellFormed(key);
  }

  /** The mapping's keys in the ledger when its first row came; null: too many to hold. */
  #keysAtStart?: Set<string> | null;

  /** The run's part: what `decide` says, done. */
  async #carryOut(item: MappedResource, entry: LedgerEntry | undefined, d: Looked, mapped: MappedView): Promise<SyncOutcome> {
    const matchValue = matchValueOf(mapped);
    switch (d.kind) {
      case 'reject':
        return { kind: 'rejected', issues: d.issues };
      case 'defer':
        if (d.why === 'pending')
          this.#deferred.push({ item, hash: mapped.hash, matchValue: this.#recordedMatch(entry, matchValue), earlier: entry?.lastRunId !== this.deps.runId });
        return { kind: 'deferred' };
      case 'unchanged':
        this.#seen.push(item.key);
        if (this.#seen.length >= 1000) this.flushSeen();
        return { kind: 'unchanged', serverId: d.serverId };
      case 'update': {
        const outcome = await this.#update(item, d.serverId, mapped.hash);
        if (outcome.kind !== 'rejected' || !outcome.issues.some((i) => hasCode(i, 'http-404'))) return outcome;
        // The server no longer has the recorded id: decided again, knowing it is gone (never an update then).
        return this.#carryOut(
          item,
          entry,
          await this.#decide(item, entry, null, mapped, `${this.#type}/${d.serverId} recorded in the state answered 404`),
          mapped,
        );
      }
      case 'adopt':
        return this.#adopt(item, mapped.hash, d.resource);
      case 'create':
        return this.#create(item, mapped.hash, matchValue);
    }
  }

  /** What `decide` is given of the mapped resource. */
  #mapped(item: MappedResource): MappedView | Promise<MappedView> {
    const { hash, comparable } = contentAndComparableHash(item.resource);
    const identity = decideIdentityNow(this.#rule, item.resource);
    if (identity) return { type: this.#type, identity, hash, comparable };
    return decideIdentity(this.#rule, item.resource).then((decided) => ({ type: this.#type, identity: decided, hash, comparable }));
  }

  /**
   * `decide`, searching the server by match rule when it asks to (`look`: the key is claimed, the type listed).
   * A key left ambiguous is kept for the settling once every key is known. Never returns `look`.
   */
  #decide(
    item: MappedResource,
    entry: LedgerEntry | undefined,
    byId: IndexedResource | null | undefined,
    mapped: MappedView,
    why?: string,
    policy = this.deps.policy,
  ): Looked | Promise<Looked> {
    const first = decide(entry, { byId }, mapped, policy);
    if (first.kind !== 'look' && !(first.kind === 'create' && first.blind)) return first;
    const matchValue = matchValueOf(mapped);
    this.#claim(matchValue, item.key);
    if (first.kind !== 'look') return first;
    const listing = this.deps.indexes.get(this.#type, why ?? first.gone ?? this.#reasonToLook());
    const decideListed = (index: ServerIndex): Looked => {
      const d = decide(entry, { byId, matches: this.#found(item.key, matchValue, mapped.comparable, index) }, mapped, policy);
      if (d.kind === 'defer') this.#ambiguous.push({ item, hash: mapped.hash, matchValue });
      return d;
    };
    // The listing every row awaits is done after the first rows: decided at once (issue 28 item 3: no promise per row).
    if (this.#listed?.listing === listing) return decideListed(this.#listed.index);
    return listing.then((index) => {
      this.#listed = { listing, index };
      return decideListed(index);
    });
  }

  /** The last listing `#decide` awaited, once it came (the same promise from `indexes.get`: the same listing). */
  #listed?: { listing: Promise<ServerIndex>; index: ServerIndex };

  /** Why this mapping needs a listing before creating a key the ledger does not know (decided once, at the first one). */
  #reasonToLook(): string {
    if (this.#unknownReason === undefined) {
      this.#unknownReason =
        listingCertain(this.res.def.name, this.deps.scope, 'auto') ?? `${this.res.def.name} keys unknown to the state (it may be older than the server)`;
      this.deps.onUnknownKey?.();
    }
    return this.#unknownReason;
  }

  /** A deferred key against a final listing (every key sharing its match value known): adopted, created or rejected. */
  #settled(a: { item: MappedResource; matchValue: string }, index: ServerIndex): Exclude<FoundDecision, { kind: 'defer' }> {
    const d = decideFound(this.#found(a.item.key, a.matchValue, comparableHash(a.item.resource), index, true), comparableHash(a.item.resource));
    return d.kind === 'defer'
      ? { kind: 'reject', issues: [issue.error('duplicate-on-server', `several identical server copies match ${describeMatch(a.matchValue)}`)] }
      : d;
  }

  /** Keys left `ambiguous` by `#found`, now that every key sharing their match value is known. */
  async *#settleAmbiguous(): AsyncGenerator<{ item: MappedResource; outcome: SyncOutcome }> {
    for (const a of this.#ambiguous.splice(0)) {
      const index = await this.deps.indexes.get(this.#type, 'ambiguous match');
      const d = this.#settled(a, index);
      yield {
        item: a.item,
        outcome:
          d.kind === 'adopt'
            ? await this.#adopt(a.item, a.hash, d.resource)
            : d.kind === 'create'
              ? await this.#create(a.item, a.hash, a.matchValue)
              : { kind: 'rejected', issues: d.issues },
      };
    }
  }

  /** Keys `inspect` left ambiguous, now that every key sharing their match value is known. */
  async *settleAmbiguousInspections(record: boolean): AsyncGenerator<{ item: MappedResource; inspection: Inspection }> {
    for (const a of this.#ambiguous.splice(0)) {
      const index = await this.deps.indexes.get(this.#type, 'ambiguous match');
      yield { item: a.item, inspection: this.#inspection(a.item, undefined, this.#settled(a, index), record) };
    }
  }

  /**
   * The one server resource a key's match value designates, if any. Resources already taken by another key
   * are not candidates (two source keys sharing an identifier are two resources). Of several candidates, the
   * one holding exactly the mapped content is taken if it is the only one; otherwise the key is rejected
   * naming them all — care-etl never picks one of two copies by chance.
   */
  #found(key: string, matchValue: string, mappedHash: string, index: ServerIndex, final = false): Matches {
    const owner = (id: string) => this.#owners.get(id) ?? this.deps.scope.keyOfServerId(this.#type, id)?.key;
    const listed = this.#lookup(index, matchValue);
    if (!listed) return { kind: 'rejected', issues: [issue.error('state-secret-mismatch', foreignDigestMessage(this.#digest))] };
    let hits = listed.filter((r) => {
      const o = owner(r.id);
      return o === undefined || o === key;
    });
    if (hits.length > 1) {
      const same = hits.filter((r) => r.hash === mappedHash);
      if (same.length === 1) hits = same;
      // Identical copies are interchangeable when as many source keys share the value (e.g. one person under
      // two keys, as in the FHIR R4 examples): decided once the whole source has been read (`settleAmbiguous`).
      else if (same.length > 1 && !final) return { kind: 'ambiguous' };
      else if (same.length > 1 && same.length <= this.#claims.sharing(matchValue)) hits = [same[0]!];
    }
    if (hits.length > 1) {
      const ids = hits.map((r) => `${this.#type}/${r.id}`);
      return {
        kind: 'rejected',
        issues: [
          issue.error(
            'duplicate-on-server',
            `the server holds ${hits.length} ${this.#type} resources matching ${describeMatch(matchValue)}: ${ids.join(', ')}; care-etl will not pick one — merge or retire the extra one on the server (or change \`match:\`), then run again`,
          ),
        ],
      };
    }
    return hits.length ? { kind: 'one', resource: hits[0]! } : { kind: 'none' };
  }

  get #digest(): MatchDigest {
    return this.deps.matchDigest ?? UNKEYED_DIGEST;
  }

  /**
   * The match value an interrupted create recorded, to find its server copy by: the key's current one when the
   * recorded digest is of it (its clear value serves the claims and messages), else the recorded digest itself
   * (or the clear value an older state recorded).
   */
  #recordedMatch(entry: LedgerEntry | undefined, current: string): string {
    const stored = entry?.matchValue;
    if (stored === undefined || stored === current || this.#digest.of(current) === stored) return current;
    return stored;
  }

  /** Server resources with this match value, clear or a recorded digest; undefined: a digest under another secret. */
  #lookup(index: ServerIndex, matchValue: string): IndexedResource[] | undefined {
    const stored = this.#digest.reading(matchValue);
    if (stored.kind === 'clear') return index.lookup(this.res.def.name, matchValue);
    return stored.kind === 'digest' ? index.lookupDigest(this.res.def.name, matchValue, stored.scheme) : undefined;
  }

  /** Interrupted creates of keys gone from the source left pending: recorded under another CARE_STATE_SECRET. */
  get foreignOrphans(): number {
    return this.#foreignOrphans;
  }

  /** Notes which key uses a match value; keys sharing one are counted (`sharedMatchValues`). */
  #claim(matchValue: string, key: string): void {
    this.#claims.claim(matchValue, key);
  }

  /** Keys of this run whose match value another key of the mapping also has (told apart by content only). */
  get sharedMatchValues(): number {
    return this.#claims.shared;
  }

  /** Takes a server resource over for this key: recorded, and updated only if its content differs. */
  async #adopt(item: MappedResource, hash: string, found: IndexedResource): Promise<SyncOutcome> {
    const { scope, runId } = this.deps;
    this.#owners.set(found.id, item.key);
    if (found.hash === comparableHash(item.resource)) {
      this.#recordSynced({ mapping: item.mapping, key: item.key, resourceType: item.type, serverId: found.id, versionId: found.versionId, hash, runId });
      return { kind: 'unchanged', serverId: found.id, adopted: true };
    }
    // Recorded with the server's content first: should the update fail, the next run still knows the id and retries it.
    scope.recordSynced({
      mapping: item.mapping,
      key: item.key,
      resourceType: item.type,
      serverId: found.id,
      versionId: found.versionId,
      hash: found.hash,
      runId,
    });
    const outcome = await this.#update(item, found.id, hash);
    return outcome.kind === 'updated' || outcome.kind === 'unchanged' ? { ...outcome, adopted: true } : outcome;
  }

  async #create(item: MappedResource, hash: string, matchValue: string): Promise<SyncOutcome> {
    const { scope, client, runId } = this.deps;
    // Kept as a digest: equality is all a later run needs of it (src/load/match-digest.ts). Durable before the POST.
    await this.#recordIntent({ mapping: item.mapping, key: item.key, resourceType: item.type, hash, matchValue: this.#digest.of(matchValue), runId });
    try {
      const created = await this.#call((signal) => client.create(item.type, item.resource, signal));
      // The client checked the answer (type, a safe id, not one it was given for another create of this run);
      // an id the ledger holds for another key is no more believable: the outcome is unknown.
      // Nor is an id the listing made before this create already held (another resource, loaded by another writer).
      const owner = this.#owners.get(created.id);
      const recorded = owner === undefined ? scope.keyOfServerId(this.#type, created.id) : undefined;
      const listedBefore = owner === undefined && this.deps.indexes.peek(this.#type)?.get(created.id) !== undefined;
      if ((owner !== undefined && owner !== item.key) || (recorded && (recorded.mapping !== item.mapping || recorded.key !== item.key)) || listedBefore) {
        const holder = listedBefore && !recorded ? 'which the server held before this create' : 'which the state holds for another key';
        this.#deferred.push({ item, hash, matchValue, earlier: false, why: `the server answered the create with ${this.#type}/${created.id}, ${holder}` });
        return { kind: 'deferred' };
      }
      this.#owners.set(created.id, item.key);
      this.#recordSynced({
        mapping: item.mapping,
        key: item.key,
        resourceType: item.type,
        serverId: created.id,
        versionId: created.meta?.versionId,
        hash,
        runId,
      });
      return { kind: 'created', serverId: created.id };
    } catch (err) {
      if (err instanceof RetryAfterTooLongError) throw err; // the run stops; the intent stays pending
      // Cancelled: perhaps sent, perhaps stored — the intent stays pending, as after a kill (never "rejected": that would allow a blind create).
      this.#throwIfCancelled();
      // Maybe stored: a lost answer (time-out, reset after sending), any 5xx (ApiError.ambiguous: a gateway's
      // 502/503/504 after the backend committed) or a 2xx answer that cannot be believed (ProtocolError.ambiguous:
      // no id, an unsafe or reused id, another type, not JSON, too large).
      const maybeStored =
        (err instanceof TransportError && err.ambiguous) || (err instanceof ProtocolError && err.ambiguous) || (err instanceof ApiError && err.ambiguous);
      if (maybeStored) {
        this.#deferred.push({ item, hash, matchValue, earlier: false, why: (err as Error).message });
        return { kind: 'deferred' };
      }
      // The server answered: nothing was stored.
      scope.recordRejected({ mapping: item.mapping, key: item.key, resourceType: item.type, runId, reason: (err as Error).message });
      return { kind: 'rejected', issues: issuesOf(err) };
    }
  }

  async #update(item: MappedResource, id: string, hash: string): Promise<SyncOutcome> {
    const { client, runId } = this.deps;
    try {
      let body = item.resource;
      let endedMembers: string[] = [];
      if (item.type === 'CareTeam' && this.res.def.onMissing === 'end') {
        const server = await this.#call((signal) => client.get('CareTeam', id, signal));
        const team = teamUpdate(body, server, this.deps.now);
        ({ body, endedMembers } = team);
        // The mapped team plus the participants it keeps ended may be what the server holds already (an adoption
        // after the state was lost): then there is nothing to send.
        if (team.same) {
          this.#recordSynced({ mapping: item.mapping, key: item.key, resourceType: item.type, serverId: id, versionId: server.meta?.versionId, hash, runId });
          return { kind: 'unchanged', serverId: id };
        }
      }
      const updated = await this.#call((signal) => client.update(item.type, id, body, signal));
      this.#recordSynced({ mapping: item.mapping, key: item.key, resourceType: item.type, serverId: id, versionId: updated.meta?.versionId, hash, runId });
      return endedMembers.length ? { kind: 'updated', serverId: id, endedMembers } : { kind: 'updated', serverId: id };
    } catch (err) {
      if (err instanceof RetryAfterTooLongError) throw err;
      this.#throwIfCancelled(); // nothing recorded: the entry stays as it was
      // The entry is left as it was (synced with the last hash the server accepted): the changed content still
      // differs from that hash, so the next run retries the update — and should the key leave the export, the
      // entry is still "synced", so `onMissing: end` still ends the resource (a `rejected` entry never is).
      return { kind: 'rejected', issues: issuesOf(err) };
    }
  }

  /**
   * What the server holds for this key, without sending anything (`care-etl state rebuild|check`): decided as a
   * `--reconcile always` run would (every key checked against the listing). With `record`, a resource found is
   * recorded in the ledger (synced, with the server's content hash unless it equals the mapped one, so the next
   * run updates exactly what differs) and a recorded id the server no longer has is forgotten (the next run
   * creates the key again).
   */
  async inspect(item: MappedResource, record: boolean): Promise<Inspection> {
    try {
      const index = await this.deps.indexes.get(this.#type, `state ${record ? 'rebuild' : 'check'}`);
      const mapped = await this.#mapped(item);
      const entry = this.deps.scope.get(item.mapping, item.key);
      const byId = entry?.serverId ? (index.get(entry.serverId) ?? null) : undefined;
      // rebuild: decided as the entry it records will be (the server's copy, its content hash).
      const seenAs =
        record && entry && byId
          ? { ...entry, status: 'synced' as const, hash: byId.hash === mapped.comparable ? mapped.hash : byId.hash, endedAt: undefined }
          : entry;
      const d = await this.#decide(item, seenAs, byId, mapped, undefined, 'always');
      const settled =
        d.kind === 'defer' && d.why === 'pending' ? this.#settled({ item, matchValue: this.#recordedMatch(entry, matchValueOf(mapped)) }, index) : d;
      return this.#inspection(item, entry, settled, record, byId === null ? entry?.serverId : undefined);
    } catch (err) {
      this.#throwIfCancelled();
      if (err instanceof CareEtlError && !(err instanceof MappingEvalError)) throw err;
      return { kind: 'rejected', issues: issuesOf(err) };
    }
  }

  /** The `state` part: a decision told as what the server holds (recorded with `record`). */
  #inspection(item: MappedResource, entry: LedgerEntry | undefined, d: Looked, record: boolean, vanished?: string): Inspection {
    const write = (r: IndexedResource | undefined) => {
      if (!r) return;
      this.#owners.set(r.id, item.key);
      if (!record) return;
      const hash = r.hash === comparableHash(item.resource) ? contentHash(item.resource) : r.hash;
      this.deps.scope.recordSynced({
        mapping: item.mapping,
        key: item.key,
        resourceType: item.type,
        serverId: r.id,
        versionId: r.versionId,
        hash,
        runId: this.deps.runId,
      });
    };
    switch (d.kind) {
      case 'reject':
        return { kind: 'rejected', issues: d.issues };
      case 'defer':
        return { kind: 'deferred' };
      case 'unchanged':
      case 'update':
        write(d.onServer);
        return { kind: 'found', serverId: d.serverId, via: 'ledger', equal: d.kind === 'unchanged' };
      case 'adopt':
        write(d.resource);
        return { kind: 'found', serverId: d.resource.id, via: 'match', equal: !d.update };
      case 'create':
        if (record && entry) this.deps.scope.forget(item.mapping, item.key);
        return vanished ? { kind: 'absent', vanished } : { kind: 'absent' };
    }
  }

  /**
   * What a run would do with this key — `decide` as `sync` calls it (same ledger rules, same match rule, same
   * reconcile policy), without sending or recording anything (`care-etl plan`). Needs the run's indexes built
   * with `keepBodies`: the type is listed once and every outcome carries the server's body, so an update can be
   * shown as a field-level diff. Keys the state records are compared with the listing too (`drift`).
   */
  async plan(item: MappedResource): Promise<PlanOutcome> {
    try {
      return await this.#plan(item);
    } catch (err) {
      if ((err instanceof CareEtlError && !(err instanceof MappingEvalError)) || (err as Error)?.name === 'AbortError') throw err;
      return { kind: 'rejected', issues: issuesOf(err) };
    }
  }

  async #plan(item: MappedResource): Promise<PlanOutcome> {
    const mapped = await this.#mapped(item);
    if (!mapped.identity.ok) return { kind: 'rejected', issues: mapped.identity.issues }; // as `sync`: before any listing
    const index = await this.deps.indexes.get(this.#type, PLAN_REASON);
    const entry = this.deps.scope.get(item.mapping, item.key);
    const byId = entry?.serverId ? (index.get(entry.serverId) ?? null) : undefined;
    const d = await this.#decide(item, entry, byId, mapped);
    if (d.kind === 'defer' && d.why === 'pending') {
      // The run reconciles it against a fresh listing: found → adopted, else created.
      const settled = this.#settled({ item, matchValue: this.#recordedMatch(entry, mapped.identity.matchValue) }, index);
      return this.#described(item, settled, index, { note: 'an interrupted create of an earlier run that never reached the server' });
    }
    return this.#described(item, d, index, { matchValue: mapped.identity.matchValue });
  }

  /** The `plan` part: a decision told with the server's bodies (`before`) and what the run would send (`after`). */
  #described(item: MappedResource, d: Looked, index: ServerIndex, { note, matchValue = '' }: { note?: string; matchValue?: string } = {}): PlanOutcome {
    switch (d.kind) {
      case 'reject':
        return { kind: 'rejected', issues: d.issues };
      case 'defer':
        return { kind: 'deferred' };
      case 'unchanged':
        this.#owners.set(d.serverId, item.key);
        return d.drift
          ? {
              kind: 'unchanged',
              serverId: d.serverId,
              drift: { before: d.drift === 'differs' ? this.#body(index, d.serverId) : undefined, after: item.resource },
            }
          : { kind: 'unchanged', serverId: d.serverId };
      case 'update':
        return this.#planUpdate(item, d.serverId, index, false);
      case 'adopt':
        this.#owners.set(d.resource.id, item.key);
        return d.update ? this.#planUpdate(item, d.resource.id, index, true) : { kind: 'unchanged', serverId: d.resource.id, adopted: true };
      case 'create': {
        // --reconcile never: created without looking — say so when the server already holds a copy.
        const hits = d.blind ? index.lookup(this.res.def.name, matchValue).map((r) => `${this.#type}/${r.id}`) : [];
        if (hits.length) note = `the server already holds ${hits.join(', ')} matching it; with reconcile: never the run creates another copy`;
        return { kind: 'create', ...(d.recreate ? { recreate: d.recreate } : {}), ...(note ? { note } : {}) };
      }
    }
  }

  /** What an update would send: a care team with `onMissing: end` keeps its dropped participants, ended (`teamUpdate`). */
  #planUpdate(item: MappedResource, serverId: string, index: ServerIndex, adopted: boolean): PlanOutcome {
    const before = this.#body(index, serverId);
    let after = item.resource;
    let endedMembers: string[] = [];
    this.#owners.set(serverId, item.key);
    if (item.type === 'CareTeam' && this.res.def.onMissing === 'end') {
      // A listing may fill absent fields with nulls: compared pruned, as the run compares the team it reads.
      const team = teamUpdate(after, comparable(before) as Resource, this.deps.now);
      if (team.same) return { kind: 'unchanged', serverId, ...(adopted ? { adopted } : {}) };
      ({ body: after, endedMembers } = team);
    }
    return { kind: 'update', serverId, ...(adopted ? { adopted } : {}), before, after, ...(endedMembers.length ? { endedMembers } : {}) };
  }

  #body(index: ServerIndex, id: string): Resource {
    const body = index.body(id);
    if (!body) throw new Error(`internal: the ${this.#type} listing was built without bodies (keepBodies)`);
    return body;
  }

  /** Keys `plan` left ambiguous, now that every key sharing their match value is known. */
  async *settleAmbiguousPlans(): AsyncGenerator<{ item: MappedResource; outcome: PlanOutcome }> {
    for (const a of this.#ambiguous.splice(0)) {
      const index = await this.deps.indexes.get(this.#type, PLAN_REASON);
      yield { item: a.item, outcome: this.#described(a.item, this.#settled(a, index), index) };
    }
  }

  /**
   * What `endMissing` would do, for `plan`: what `onMissing: end` would end — the state's loaded, not yet ended
   * entries whose key is not among `seen` (every key of the source, rejected rows included) — with the body
   * before and after. One the server no longer has would fail (404); one already ended is only recorded by the
   * run (not listed).
   */
  async planEnds(seen: ReadonlySet<string>): Promise<{ ends: PlannedEnd[]; failed: { key: string; issues: Issue[] }[]; wouldEnd: number }> {
    const index = await this.deps.indexes.get(this.#type, PLAN_REASON);
    const end = this.deps.now.toISOString();
    const ends: PlannedEnd[] = [];
    const failed: { key: string; issues: Issue[] }[] = [];
    /** What the run's `missingEntries` would count (the ending guard's number): already ended ones included. */
    let wouldEnd = 0;
    for (const e of [...this.deps.scope.entries(this.res.def.name)]) {
      if (seen.has(e.key) || e.status !== 'synced' || e.endedAt || !e.serverId) continue;
      wouldEnd++;
      const listed = index.body(e.serverId);
      if (!listed) {
        failed.push({
          key: e.key,
          issues: [issue.error('http-404', `${this.#type}/${e.serverId} recorded in the state is gone from the server: ending it would fail`)],
        });
        continue;
      }
      const current = comparable(listed) as Resource;
      const after = endedBody(this.#type, current, end);
      if (contentHash(after) !== contentHash(current)) ends.push({ key: e.key, serverId: e.serverId, before: listed, after });
    }
    return { ends, failed, wouldEnd };
  }

  /**
   * The ledger writes of one event-loop turn — answers recorded as synced, intents of creates about to be sent —
   * are committed in one transaction (`recordBatch`) instead of one commit each (the commits were the loader's
   * largest CPU cost, bench/load-throughput.mjs). Safe: an intent's create waits for that commit (the intent is
   * durable before its POST); a synced record lost to a kill leaves the key `pending` (its intent was committed
   * before the request), and the next run reconciles it by its match rule — adopting it, never creating it twice.
   */
  #recordSynced(e: SyncedInput): void {
    if (this.#recordFailure) throw this.#recordFailure;
    this.#synced.push(e);
    this.#scheduleWrites();
  }

  /** Resolves once the intent is committed (with the turn's other writes); rejects if that commit failed. */
  #recordIntent(e: IntentInput): Promise<void> {
    if (this.#recordFailure) return Promise.reject(this.#recordFailure);
    return new Promise((resolve, reject) => {
      this.#intents.push({ e, resolve, reject });
      this.#scheduleWrites();
    });
  }

  /**
   * `#writeTurn`, once the requests dispatched so far are written (after-sends.ts): a commit run in an answer's
   * callback held up the request sent into the freed slot and every answer read after it in that loop turn (most
   * commits ran there: issue 28, the window's "sent, not at server"); one run by the timer, the creates started in
   * the loop turn before.
   */
  #writeTurnAfterSends(): void {
    if (!this.#writesScheduled || this.#turnAfterSends) return;
    this.#turnAfterSends = true;
    afterSends(() => {
      this.#turnAfterSends = false;
      this.#writeTurn();
    });
  }

  #turnAfterSends = false;

  #scheduleWrites(): void {
    if (this.#writesScheduled) return;
    this.#writesScheduled = true;
    this.#bufferedSince = performance.now();
    // After the requests dispatched in this iteration are written (after-sends.ts): a commit never holds one back.
    afterSends(() => this.#writeTurn());
  }

  /**
   * Commits the buffered writes — or, while they can wait (`#commitCanWait`), leaves them for the next look: when one
   * of this mapping's requests ends (a slot frees: `#call`), else WRITE_RECHECK_MS later. Fewer, larger commits (a
   * commit costs about as much as the rows in it: issue 28 item 3).
   */
  #writeTurn(): void {
    if (!this.#writesScheduled) return;
    if (this.#commitCanWait()) {
      this.#recheck ??= setTimeout(() => {
        this.#recheck = undefined;
        this.#writeTurnAfterSends();
      }, WRITE_RECHECK_MS);
      return;
    }
    this.#writesDue();
    // issue 25: outside any caller (a full disk): kept and thrown by the next record or flush, never uncaught;
    // the batch's keys stay `pending` (their intents were committed) and the next run reconciles them.
    try {
      this.#flushWrites();
    } catch (err) {
      this.#recordFailure ??= err;
    }
  }

  /**
   * Intents wait while the limiter holds enough requests ready to start (half the window: ~half a round trip of
   * work), so the window never waits for a commit; synced records alone wait up to WRITE_MAX_WAIT_MS. Never more
   * than WRITE_MAX_BATCH rows.
   */
  #commitCanWait(): boolean {
    if (this.#recordFailure || this.#synced.length + this.#intents.length >= WRITE_MAX_BATCH) return false;
    if (performance.now() - this.#bufferedSince >= WRITE_MAX_WAIT_MS) return false;
    const { limiter } = this.deps;
    return !this.#intents.length || limiter.queued >= Math.max(2, limiter.limit / 2);
  }

  /** The buffered writes are being committed now: nothing is left to look at later. */
  #writesDue(): void {
    clearTimeout(this.#recheck);
    this.#recheck = undefined;
    this.#writesScheduled = false;
  }

  /** When the oldest write not yet committed was buffered. */
  #bufferedSince = 0;
  #recheck?: ReturnType<typeof setTimeout>;

  /** The failure of a deferred ledger write (see `#recordSynced`). */
  #recordFailure: unknown;

  #flushWrites(): void {
    if (this.#recordFailure) {
      for (const w of this.#intents.splice(0)) w.reject(this.#recordFailure);
      throw this.#recordFailure;
    }
    if (!this.#synced.length && !this.#intents.length) return;
    const synced = this.#synced.splice(0);
    const intents = this.#intents.splice(0);
    try {
      this.deps.scope.recordBatch(
        intents.map((w) => w.e),
        synced,
      );
    } catch (err) {
      for (const w of intents) w.reject(err); // not durable: their creates are never sent
      throw err;
    }
    for (const w of intents) w.resolve();
  }

  /** Writes what is buffered (seen keys, synced records, intents): call at the end of a phase, also after a failure. */
  flush(): void {
    this.#writesDue();
    this.#flushWrites();
    this.flushSeen();
  }

  flushSeen(): void {
    if (!this.#seen.length) return;
    this.deps.scope.markSeen(this.res.def.name, this.#seen.splice(0), this.deps.runId);
  }

  /**
   * Settles every deferred create: list the type afresh, adopt a match (updating it if its content differs),
   * create what is not there. The items of a round are settled concurrently (the limiter bounds the requests
   * in flight). A create that is lost again is reconciled again, up to RECONCILE_ROUNDS; after that it stays
   * pending for the next run. Pending intents of keys this run did not meet (see `#settleOrphans`) are looked
   * up in the first round. Call once the whole source has been synced.
   */
  async *reconcile(): AsyncGenerator<{ item: MappedResource; outcome: SyncOutcome }> {
    this.flush();
    yield* this.#settleAmbiguous();
    this.flush();
    const { scope, runId } = this.deps;
    const deferredKeys = new Set(this.#deferred.map((d) => d.item.key));
    let orphans = scope.pending(this.res.def.name).filter((e) => e.lastRunId !== runId && !deferredKeys.has(e.key) && e.matchValue !== undefined);
    for (let round = 1; (this.#deferred.length || orphans.length) && round <= RECONCILE_ROUNDS; round++) {
      const batch = this.#deferred.splice(0);
      const index = await this.deps.indexes.refresh(
        this.#type,
        `${batch.length + orphans.length} ${this.res.def.name} create(s) with unknown outcome (round ${round})`,
      );
      this.#settleOrphans(orphans, index);
      orphans = [];
      const settled = await Promise.allSettled(batch.map((d) => this.#settle(d, index)));
      for (const s of settled) if (s.status === 'rejected') throw s.reason; // e.g. the state file failed
      for (const s of settled) if (s.status === 'fulfilled' && s.value) yield s.value;
    }
    for (const d of this.#deferred.splice(0)) {
      const why = d.why ? ` (last: ${d.why.length > 300 ? `${d.why.slice(0, 299)}…` : d.why})` : '';
      yield {
        item: d.item,
        outcome: {
          kind: 'rejected',
          issues: [
            issue.error(
              'outcome-unknown',
              `the create's outcome stayed unknown after ${RECONCILE_ROUNDS} reconciliations${why}; it stays pending and is reconciled on the next run`,
            ),
          ],
        },
      };
    }
  }

  /**
   * A run interrupted (killed) while creating a key leaves its intent pending; if the key is gone from the
   * export before the next run, no row brings it to `reconcile` — yet the create may have been stored. Such a
   * resource is adopted (synced, still "last seen" by the run that intended it, so `onMissing: end` ends it
   * in this run); an intent that never reached the server is closed as rejected (a key that comes back is
   * created then).
   */
  #settleOrphans(orphans: LedgerEntry[], index: ServerIndex): void {
    const { scope } = this.deps;
    for (const e of orphans) {
      const hits = this.#lookup(index, e.matchValue!);
      if (!hits) {
        this.#foreignOrphans++; // stays pending: never closed as "never stored" on a digest this run cannot compute
        continue;
      }
      const base = { mapping: e.mapping, key: e.key, resourceType: e.resourceType, runId: e.lastRunId ?? 0 };
      if (hits.length === 1) scope.recordSynced({ ...base, serverId: hits[0]!.id, versionId: hits[0]!.versionId, hash: hits[0]!.hash });
      else
        scope.recordRejected({
          ...base,
          reason: hits.length
            ? `interrupted create of a key no longer in the source; ${hits.length} server resources match it`
            : 'interrupted create of a key no longer in the source; it was never stored',
        });
    }
  }

  /** One deferred create against a fresh listing: adopt, create, or (lost again) defer to the next round (undefined). */
  async #settle(d: Deferred, index: ServerIndex): Promise<{ item: MappedResource; outcome: SyncOutcome } | undefined> {
    const settled = this.#settled(d, index);
    if (settled.kind === 'reject') return { item: d.item, outcome: { kind: 'rejected', issues: settled.issues } };
    if (settled.kind === 'adopt') {
      const outcome = await this.#adopt(d.item, d.hash, settled.resource);
      // This run's own create, stored though its answer was lost: it counts as created.
      if (!d.earlier && outcome.kind !== 'rejected' && outcome.kind !== 'deferred') return { item: d.item, outcome: { ...outcome, kind: 'created' } };
      return { item: d.item, outcome };
    }
    const outcome = await this.#create(d.item, d.hash, d.matchValue);
    return outcome.kind === 'deferred' ? undefined : { item: d.item, outcome };
  }

  /** Loaded, not ended entries whose key this run did not see: what `endMissing` would end (the ending guard counts them first). */
  missingEntries(): LedgerEntry[] {
    this.flush(); // "not seen" must see every key this run recorded
    return this.deps.scope.notSeenSince(this.res.def.name, this.deps.runId).filter((e) => e.serverId);
  }

  /**
   * onMissing: end — a care team loaded earlier whose key is no longer in the export gets `period.end` = run
   * date (and so do its open participants); a Patient/Practitioner gets `active: false`. Nothing is deleted.
   */
  async endMissing(
    missing: LedgerEntry[] = this.missingEntries(),
  ): Promise<{ ended: { key: string; serverId: string }[]; failed: { key: string; issues: Issue[] }[] }> {
    const { scope, client, now } = this.deps;
    const ended: { key: string; serverId: string }[] = [];
    const failed: { key: string; issues: Issue[] }[] = [];
    const end = now.toISOString();
    for (const entry of missing) {
      const id = entry.serverId!;
      try {
        const current = await this.#call((signal) => client.get(this.res.def.type, id, signal));
        const body = endedBody(this.res.def.type, current, end);
        if (contentHash(body) === contentHash(current)) {
          // Already ended on the server (a run killed between its PUT and markEnded): record it, write nothing.
          scope.markEnded(entry.mapping, entry.key, end, current.meta?.versionId);
          continue;
        }
        const updated = await this.#call((signal) => client.update(this.res.def.type, id, body, signal));
        scope.markEnded(entry.mapping, entry.key, end, updated.meta?.versionId);
        ended.push({ key: entry.key, serverId: id });
      } catch (err) {
        if (err instanceof RetryAfterTooLongError) throw err;
        this.#throwIfCancelled();
        failed.push({ key: entry.key, issues: issuesOf(err) });
      }
    }
    return { ended, failed };
  }
}

/**
 * The body that ends a resource (`onMissing: end`): a care team gets `period.end` = `end` (and so do its open
 * participants); a Patient/Practitioner, which has no period, gets `active: false`. Equal to `current` (by
 * `contentHash`) when it is already ended.
 */
export function endedBody(type: WritableType, current: Resource, end: string): Resource {
  const body: Resource = { ...current };
  delete body.meta;
  if (type === 'CareTeam') {
    body.period = { ...((current.period as object) ?? {}), end: (current.period as { end?: string } | undefined)?.end ?? end };
    if (Array.isArray(body.participant)) {
      body.participant = (body.participant as { period?: { end?: string } }[]).map((p) => (p.period?.end ? p : { ...p, period: { ...p.period, end } }));
    }
  } else {
    // Patient and Practitioner have no period: the spec's only "ended" state is `active: false`.
    body.active = false;
  }
  return body;
}

/**
 * Why a mapping will list its type whatever its rows are, or undefined when that depends on its rows: `always`
 * lists before the phase; under `auto`, a state holding none of its keys for this target looks every key up.
 * The run starts such listings up front (issue 28), so that no phase's creates wait for its listing.
 */
export function listingCertain(mapping: string, scope: LedgerScope, policy: ReconcilePolicy): string | undefined {
  if (policy === 'always') return `--reconcile always (${mapping})`;
  if (policy === 'auto' && scope.counts(mapping).synced === 0) return `the state holds no loaded ${mapping} for this server and tenant (new or lost state)`;
  return undefined;
}

/** The mapped resource's match value ('' when its rule rejected it: then `decide` rejects the key first). */
function matchValueOf(m: MappedView): string {
  return m.identity.ok ? m.identity.matchValue : '';
}

/** A match value for messages: identifiers and references as they are, content identities shortened. */
function describeMatch(v: string): string {
  if (isMatchDigest(v)) return 'the match value the state recorded (a digest)';
  return v.startsWith('content:') ? `identical content (${v.slice(0, 20)}…)` : `\`${v}\``;
}
