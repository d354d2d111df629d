import type { CareClient } from '../api/client.js';
import { classifyRetry } from '../api/client.js';
import { ApiError, TransportError } from '../api/errors.js';
import type { Resource, StoredResource } from '../api/types.js';
import type { Issue } from '../core/issues.js';
import type { CompiledResource } from '../mapping/compile-mapping.js';
import type { LedgerEntry, LedgerScope } from '../state/ledger.js';
import { contentHash } from '../state/ledger.js';
import type { MappedResource } from '../transform/transform-source.js';
import type { AdaptiveLimiter } from './adaptive-concurrency.js';
import { withRetry, type RetryOptions } from './retry.js';

export type SyncOutcome =
  | { kind: 'created' | 'updated' | 'adopted'; serverId: string }
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

/** How many times a create whose answer was lost is reconciled and re-tried within one run. */
const RECONCILE_ROUNDS = 3;

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
      scope.recordSynced({ mapping: item.mapping, key: item.key, resourceType: item.type, serverId: created.id, versionId: created.meta?.versionId, hash, runId });
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
      if (item.type === 'CareTeam' && this.res.def.onMissing === 'end') {
        body = endDroppedParticipants(body, serverBody ?? (await this.#call(() => client.get('CareTeam', id))), this.deps.now);
      }
      const updated = await this.#call(() => client.update(item.type, id, body));
      scope.recordSynced({ mapping: item.mapping, key: item.key, resourceType: item.type, serverId: id, versionId: updated.meta?.versionId, hash, runId });
      return { kind: 'updated', serverId: id };
    } catch (err) {
      scope.recordRejected({ mapping: item.mapping, key: item.key, resourceType: item.type, runId, reason: (err as Error).message });
      const issues = rejectedBy(err);
      if (err instanceof ApiError && err.status === 404) {
        issues.push({ severity: 'error', code: 'not-found', message: `${item.type}/${id} recorded in the state no longer exists on the server; it is not re-created automatically (remove the key from the state to create it again)` });
      }
      return { kind: 'rejected', issues };
    }
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
   * adopt a match (updating it if its content differs), create what is not there. A create that is lost
   * again is reconciled again, up to RECONCILE_ROUNDS; after that it stays pending for the next run.
   */
  async *reconcile(): AsyncGenerator<{ item: MappedResource; outcome: SyncOutcome }> {
    const { scope, client, runId } = this.deps;
    for (let round = 1; this.#deferred.length && round <= RECONCILE_ROUNDS; round++) {
      const batch = this.#deferred.splice(0);
      const index = new Map<string, StoredResource>();
      for await (const r of client.list(this.res.def.type, { pageSize: 500, retry: this.deps.retry })) {
        for (const v of await this.matchValues(r)) if (!index.has(v)) index.set(v, r as StoredResource);
      }
      for (const d of batch) {
        const found = d.matchValue !== undefined ? index.get(d.matchValue) : undefined;
        if (d.matchValue === undefined) {
          yield { item: d.item, outcome: { kind: 'rejected', issues: [{ severity: 'error', code: 'unreconcilable', message: 'the create may or may not have been stored and the resource has no match value (identifier or `match:`) to find it by; it stays pending' }] } };
          continue;
        }
        if (found) {
          const serverHash = contentHash(found);
          scope.recordSynced({ mapping: d.item.mapping, key: d.item.key, resourceType: d.item.type, serverId: found.id, versionId: found.meta?.versionId, hash: serverHash, runId });
          if (serverHash === d.hash) {
            yield { item: d.item, outcome: { kind: 'adopted', serverId: found.id } };
          } else {
            const entry = scope.get(d.item.mapping, d.item.key)!;
            const outcome = await this.#update(d.item, entry, d.hash, found);
            yield { item: d.item, outcome: outcome.kind === 'updated' ? { kind: 'adopted', serverId: outcome.serverId } : outcome };
          }
          continue;
        }
        const outcome = await this.#create(d.item, d.hash, d.matchValue);
        if (outcome.kind !== 'deferred') yield { item: d.item, outcome };
      }
    }
    for (const d of this.#deferred.splice(0)) {
      yield { item: d.item, outcome: { kind: 'rejected', issues: [{ severity: 'error', code: 'outcome-unknown', message: `the create's outcome stayed unknown after ${RECONCILE_ROUNDS} reconciliations; it stays pending and is reconciled on the next run` }] } };
    }
  }

  /**
   * onMissing: end — a care team loaded earlier whose key is no longer in the export gets `period.end` = run
   * date (and so do its open participants); a Patient/Practitioner gets `active: false`. Nothing is deleted.
   */
  async endMissing(): Promise<{ ended: { key: string; serverId: string }[]; failed: { key: string; issues: Issue[] }[] }> {
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
