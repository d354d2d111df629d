import type { CareClient } from '../api/client.js';
import { classifyRetry } from '../api/client.js';
import { ApiError, TransportError } from '../api/errors.js';
import type { Resource, StoredResource } from '../api/types.js';
import type { Issue } from '../core/issues.js';
import type { CompiledResource } from '../mapping/compile-mapping.js';
import type { LedgerEntry, LedgerScope, SyncedInput } from '../state/ledger.js';
import { contentHash } from '../state/ledger.js';
import type { MappedResource } from '../transform/transform-source.js';
import type { AdaptiveLimiter } from './adaptive-concurrency.js';
import { withRetry, type RetryOptions } from './retry.js';

export type SyncOutcome =
  | {
      kind: 'created' | 'updated' | 'adopted';
      serverId: string;
      /** CareTeam updates: members (`Practitioner/<id>`) whose participation this write ended (end date set or dropped). */
      endedMembers?: string[];
    }
  | { kind: 'unchanged'; serverId: string }
  | { kind: 'deferred' } // outcome unknown: reconciled at the end of the phase
  | { kind: 'rejected'; issues: Issue[] };

export interface SyncDeps {
  client: CareClient;
  scope: LedgerScope;
  runId: number;
  limiter: AdaptiveLimiter;
  retry: RetryOptions;
  /** The run's date: `period.end` of ended associations. */
  now: Date;
}

interface Deferred {
  item: MappedResource;
  hash: string;
  matchValue?: string;
}

/**
 * How many times a create whose answer was lost is reconciled and re-tried within one run. Each round lists
 * the type once and only runs while something is still unknown; with a fraction p of creates losing their
 * answer, N·p^(rounds+1) creates are expected to stay unknown (3 rounds at p = 8 %: 0.08 of 2,000 — a
 * spurious "outcome-unknown" reject in one run out of twelve).
 */
const RECONCILE_ROUNDS = 10;

function identifierValues(resource: Resource): string[] {
  const ids = (resource.identifier as { system?: string; value?: string }[] | undefined) ?? [];
  return ids.filter((i) => i && i.value !== undefined).map((i) => `${i.system ?? ''}|${i.value}`);
}

function rejectedBy(err: unknown): Issue[] {
  if (err instanceof ApiError) {
    const head: Issue = { severity: 'error', code: `http-${err.status}`, message: err.message };
    return err.issues.length ? [head, ...err.issues.map((i) => ({ ...i }))] : [head];
  }
  return [{ severity: 'error', code: err instanceof TransportError ? `transport-${err.failure}` : 'exception', message: err instanceof Error ? err.message : String(err) }];
}

/**
 * Brings the server in line with one mapping's resources, exactly once per source key:
 * new key → intent recorded durably, then create; changed content → update; same hash → no request.
 * A create whose answer was lost (or a pending intent of an interrupted run) is never re-sent blindly:
 * it is deferred, and `reconcile()` looks the resource up on the server by its match rule first.
 */
export class ResourceSync {
  readonly #deferred: Deferred[] = [];
  readonly #seen: string[] = [];
  /** Successful writes not yet recorded: committed together once per event-loop turn (see #recordSynced). */
  readonly #synced: SyncedInput[] = [];

  constructor(
    readonly res: CompiledResource,
    readonly deps: SyncDeps,
  ) {}

  /** Runs one request through the limiter with retries; 429s and 503s slow the limiter down. */
  async #call<T>(fn: () => Promise<T>): Promise<T> {
    const { limiter } = this.deps;
    return withRetry(
      () =>
        limiter.run(async () => {
          try {
            const r = await fn();
            limiter.onSuccess();
            return r;
          } catch (err) {
            // A 429 is a rate signal (pace starts); a 503 only means "busy now" (fewer in flight, no global pause).
            if (err instanceof ApiError && err.status === 429) limiter.onOverload(err.retryAfterMs);
            else if (err instanceof ApiError && err.status === 503) limiter.onUnavailable();
            throw err;
          }
        }),
      classifyRetry,
      this.deps.retry,
    );
  }

  async matchValues(resource: Resource): Promise<string[]> {
    if (this.res.evalMatch) {
      const v = await this.res.evalMatch(resource);
      return v === undefined || v === '' ? [] : [v];
    }
    return identifierValues(resource);
  }

  async sync(item: MappedResource): Promise<SyncOutcome> {
    const { scope } = this.deps;
    const hash = contentHash(item.resource);
    const entry = scope.get(item.mapping, item.key);
    if (entry?.status === 'pending') {
      this.#deferred.push({ item, hash, matchValue: entry.matchValue ?? (await this.matchValues(item.resource))[0] });
      return { kind: 'deferred' };
    }
    if (entry?.serverId) {
      if (entry.status === 'synced' && entry.hash === hash && !entry.endedAt) {
        this.#seen.push(item.key);
        if (this.#seen.length >= 1000) this.flushSeen();
        return { kind: 'unchanged', serverId: entry.serverId };
      }
      return this.#update(item, entry, hash);
    }
    return this.#create(item, hash, (await this.matchValues(item.resource))[0]);
  }

  async #create(item: MappedResource, hash: string, matchValue: string | undefined): Promise<SyncOutcome> {
    const { scope, client, runId } = this.deps;
    scope.recordIntent({ mapping: item.mapping, key: item.key, resourceType: item.type, hash, matchValue, runId });
    try {
      const created = await this.#call(() => client.create(item.type, item.resource));
      this.#recordSynced({ mapping: item.mapping, key: item.key, resourceType: item.type, serverId: created.id, versionId: created.meta?.versionId, hash, runId });
      return { kind: 'created', serverId: created.id };
    } catch (err) {
      const maybeStored = (err instanceof TransportError && err.ambiguous) || (err instanceof ApiError && (err.status === 502 || err.status === 504));
      if (maybeStored) {
        this.#deferred.push({ item, hash, matchValue });
        return { kind: 'deferred' };
      }
      // The server answered: nothing was stored.
      scope.recordRejected({ mapping: item.mapping, key: item.key, resourceType: item.type, runId, reason: (err as Error).message });
      return { kind: 'rejected', issues: rejectedBy(err) };
    }
  }

  async #update(item: MappedResource, entry: LedgerEntry, hash: string, serverBody?: StoredResource): Promise<SyncOutcome> {
    const { scope, client, runId } = this.deps;
    const id = entry.serverId!;
    try {
      let body = item.resource;
      let endedMembers: string[] = [];
      if (item.type === 'CareTeam' && this.res.def.onMissing === 'end') {
        const server = serverBody ?? (await this.#call(() => client.get('CareTeam', id)));
        body = endDroppedParticipants(body, server, this.deps.now);
        endedMembers = newlyEndedMembers(server, body);
      }
      const updated = await this.#call(() => client.update(item.type, id, body));
      this.#recordSynced({ mapping: item.mapping, key: item.key, resourceType: item.type, serverId: id, versionId: updated.meta?.versionId, hash, runId });
      return endedMembers.length ? { kind: 'updated', serverId: id, endedMembers } : { kind: 'updated', serverId: id };
    } catch (err) {
      // The entry is left as it was (synced with the last hash the server accepted): the changed content still
      // differs from that hash, so the next run retries the update — and should the key leave the export, the
      // entry is still "synced", so `onMissing: end` still ends the resource (a `rejected` entry never is).
      const issues = rejectedBy(err);
      if (err instanceof ApiError && err.status === 404) {
        issues.push({ severity: 'error', code: 'not-found', message: `${item.type}/${id} recorded in the state no longer exists on the server; it is not re-created automatically (remove the key from the state to create it again)` });
      }
      return { kind: 'rejected', issues };
    }
  }

  /**
   * Answers arriving in the same event-loop turn are recorded in one SQLite transaction instead of one commit
   * each (the commits were the loader's largest CPU cost under load, bench/load-throughput.mjs). Safe: a record
   * lost to a kill leaves the key `pending` (its intent was committed before the request), and the next run
   * reconciles it by its match rule — adopting the resource, never creating it twice.
   */
  #recordSynced(e: SyncedInput): void {
    if (this.#synced.push(e) === 1) setImmediate(() => this.#flushSynced());
  }

  #flushSynced(): void {
    if (!this.#synced.length) return;
    const batch = this.#synced.splice(0);
    this.deps.scope.transaction(() => {
      for (const e of batch) this.deps.scope.recordSynced(e);
    });
  }

  /** Writes what is buffered (seen keys, synced records): call at the end of a phase, also after a failure. */
  flush(): void {
    this.#flushSynced();
    this.flushSeen();
  }

  flushSeen(): void {
    if (!this.#seen.length) return;
    this.deps.scope.markSeen(this.res.def.name, this.#seen.splice(0), this.deps.runId);
  }

  get deferredCount(): number {
    return this.#deferred.length;
  }

  /**
   * Settles every deferred create: list the server's resources of the type once, index them by match value,
   * adopt a match (updating it if its content differs), create what is not there. The items of a round are
   * settled concurrently (the limiter bounds the requests in flight). A create that is lost again is
   * reconciled again, up to RECONCILE_ROUNDS; after that it stays pending for the next run.
   * Pending intents of keys this run did not meet (see `#settleOrphans`) are looked up in the first round.
   * Call once the whole source has been synced.
   */
  async *reconcile(): AsyncGenerator<{ item: MappedResource; outcome: SyncOutcome }> {
    this.flush();
    const { client, scope, runId } = this.deps;
    const deferredKeys = new Set(this.#deferred.map((d) => d.item.key));
    let orphans = scope.pending(this.res.def.name).filter((e) => e.lastRunId !== runId && !deferredKeys.has(e.key) && e.matchValue !== undefined);
    for (let round = 1; (this.#deferred.length || orphans.length) && round <= RECONCILE_ROUNDS; round++) {
      const batch = this.#deferred.splice(0);
      const index = new Map<string, StoredResource>();
      for await (const r of client.list(this.res.def.type, { pageSize: 500, retry: this.deps.retry })) {
        for (const v of await this.matchValues(r)) if (!index.has(v)) index.set(v, r as StoredResource);
      }
      this.#settleOrphans(orphans, index);
      orphans = [];
      const settled = await Promise.allSettled(batch.map((d) => this.#settle(d, index)));
      for (const s of settled) if (s.status === 'rejected') throw s.reason; // e.g. the state file failed
      for (const s of settled) if (s.status === 'fulfilled' && s.value) yield s.value;
    }
    for (const d of this.#deferred.splice(0)) {
      yield { item: d.item, outcome: { kind: 'rejected', issues: [{ severity: 'error', code: 'outcome-unknown', message: `the create's outcome stayed unknown after ${RECONCILE_ROUNDS} reconciliations; it stays pending and is reconciled on the next run` }] } };
    }
  }

  /**
   * A run interrupted (killed) while creating a key leaves its intent pending; if the key is gone from the
   * export before the next run, no row brings it to `reconcile` — yet the create may have been stored. Such a
   * resource is adopted (synced, still "last seen" by the run that intended it, so `onMissing: end` ends it
   * in this run); an intent that never reached the server is closed as rejected (a key that comes back is
   * created then).
   */
  #settleOrphans(orphans: LedgerEntry[], index: Map<string, StoredResource>): void {
    const { scope } = this.deps;
    for (const e of orphans) {
      const found = index.get(e.matchValue!);
      const base = { mapping: e.mapping, key: e.key, resourceType: e.resourceType, runId: e.lastRunId ?? 0 };
      if (found) scope.recordSynced({ ...base, serverId: found.id, versionId: found.meta?.versionId, hash: contentHash(found) });
      else scope.recordRejected({ ...base, reason: 'interrupted create of a key no longer in the source; it was never stored' });
    }
  }

  /** One deferred create against the server's index: adopt, create, or (lost again) defer to the next round (undefined). */
  async #settle(d: Deferred, index: Map<string, StoredResource>): Promise<{ item: MappedResource; outcome: SyncOutcome } | undefined> {
    const { scope, runId } = this.deps;
    if (d.matchValue === undefined) {
      return { item: d.item, outcome: { kind: 'rejected', issues: [{ severity: 'error', code: 'unreconcilable', message: 'the create may or may not have been stored and the resource has no match value (identifier or `match:`) to find it by; it stays pending' }] } };
    }
    const found = index.get(d.matchValue);
    if (found) {
      const serverHash = contentHash(found);
      scope.recordSynced({ mapping: d.item.mapping, key: d.item.key, resourceType: d.item.type, serverId: found.id, versionId: found.meta?.versionId, hash: serverHash, runId });
      if (serverHash === d.hash) return { item: d.item, outcome: { kind: 'adopted', serverId: found.id } };
      const entry = scope.get(d.item.mapping, d.item.key)!;
      const outcome = await this.#update(d.item, entry, d.hash, found);
      return { item: d.item, outcome: outcome.kind === 'updated' ? { ...outcome, kind: 'adopted' } : outcome };
    }
    const outcome = await this.#create(d.item, d.hash, d.matchValue);
    return outcome.kind === 'deferred' ? undefined : { item: d.item, outcome };
  }

  /**
   * onMissing: end — a care team loaded earlier whose key is no longer in the export gets `period.end` = run
   * date (and so do its open participants); a Patient/Practitioner gets `active: false`. Nothing is deleted.
   */
  async endMissing(): Promise<{ ended: { key: string; serverId: string }[]; failed: { key: string; issues: Issue[] }[] }> {
    this.flush(); // "not seen" must see every key this run recorded
    const { scope, client, runId, now } = this.deps;
    const ended: { key: string; serverId: string }[] = [];
    const failed: { key: string; issues: Issue[] }[] = [];
    const end = now.toISOString();
    for (const entry of scope.notSeenSince(this.res.def.name, runId)) {
      if (!entry.serverId) continue;
      const id = entry.serverId;
      try {
        const current = await this.#call(() => client.get(this.res.def.type, id));
        const body: Resource = { ...current };
        delete body.meta;
        if (this.res.def.type === 'CareTeam') {
          body.period = { ...((current.period as object) ?? {}), end: (current.period as { end?: string } | undefined)?.end ?? end };
          if (Array.isArray(body.participant)) {
            body.participant = (body.participant as { period?: { end?: string } }[]).map((p) => (p.period?.end ? p : { ...p, period: { ...p.period, end } }));
          }
        } else {
          // Patient and Practitioner have no period: the spec's only "ended" state is `active: false`.
          body.active = false;
        }
        if (contentHash(body) === contentHash(current)) {
          // Already ended on the server (a run killed between its PUT and markEnded): record it, write nothing.
          scope.markEnded(entry.mapping, entry.key, end, current.meta?.versionId);
          continue;
        }
        const updated = await this.#call(() => client.update(this.res.def.type, id, body));
        scope.markEnded(entry.mapping, entry.key, end, updated.meta?.versionId);
        ended.push({ key: entry.key, serverId: id });
      } catch (err) {
        failed.push({ key: entry.key, issues: rejectedBy(err) });
      }
    }
    return { ended, failed };
  }
}

/** Participants present on the server but gone from the export are kept, with `period.end` = run date. */
export function endDroppedParticipants(mapped: Resource, server: Resource, now: Date): Resource {
  type P = { member?: { reference?: string }; period?: { start?: string; end?: string } };
  const current = (server.participant as P[] | undefined) ?? [];
  const next = (mapped.participant as P[] | undefined) ?? [];
  const kept = new Set(next.map((p) => p.member?.reference));
  const dropped = current
    .filter((p) => p.member?.reference && !kept.has(p.member.reference))
    .map((p) => (p.period?.end ? p : { ...p, period: { ...p.period, end: now.toISOString() } }));
  return dropped.length ? { ...mapped, participant: [...next, ...dropped] } : mapped;
}

/** Members whose participant is open on the server and carries a `period.end` in `next`: the associations `next` ends. */
export function newlyEndedMembers(server: Resource, next: Resource): string[] {
  type P = { member?: { reference?: string }; period?: { end?: string } };
  const open = new Set(((server.participant as P[] | undefined) ?? []).filter((p) => p.member?.reference && !p.period?.end).map((p) => p.member!.reference!));
  return ((next.participant as P[] | undefined) ?? []).filter((p) => p.period?.end && open.has(p.member?.reference ?? '')).map((p) => p.member!.reference!);
}
