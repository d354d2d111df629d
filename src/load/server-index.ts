/**
 * The server's resources of one type, indexed by the match values of every mapping of that type — how the
 * loader finds out whether a resource the ledger does not know already exists (the specification shows no
 * search: the only way is to list the type and follow `next` links).
 *
 * Built at most once per type per run, lazily (only when a key the ledger does not know is about to be
 * created, or when asked for up front); creates whose outcome was lost need a fresh listing (`refresh`).
 */
import type { CareClient } from '../api/client.js';
import { isSafeId } from '../api/errors.js';
import type { WritableType } from '../schemas/resource-types.js';
import type { Resource } from '../api/types.js';
import type { CompiledResource } from '../mapping/compile-mapping.js';
import { allIdentifierValues, careTeamIdentity, comparableHash, contentIdentity } from './identity.js';
import type { RetryOptions } from '../core/retry.js';
import type { DigestScheme } from './match-digest.js';

/** A server resource as the index keeps it: what adoption needs, not the whole body. */
export interface IndexedResource {
  id: string;
  versionId?: string;
  /** `comparableHash` of the server's content. */
  hash: string;
}

/** A mapping's match rule on both sides (see src/load/identity.ts). */
export interface MatchRule {
  /** The value a mapped resource is looked up by: the rule's, else its content. Throws a MappingEvalError. */
  ofMapped(resource: Resource): Promise<string>;
  /** The rule's values for a server resource (never throws: a server resource the rule cannot read has none). */
  ofServer(resource: Resource): Promise<string[]>;
}

export function matchRuleOf(res: CompiledResource): MatchRule {
  const rule = res.def.match;
  const serverValues = async (r: Resource): Promise<string[]> => {
    if (rule === 'identifier') return allIdentifierValues(r);
    if (rule === 'references') {
      const v = careTeamIdentity(r);
      return v ? [v] : [];
    }
    try {
      const v = await res.evalMatch?.(r);
      return v === undefined ? [] : [v];
    } catch {
      return [];
    }
  };
  return {
    async ofMapped(r) {
      return (await res.evalMatch?.(r)) ?? contentIdentity(r);
    },
    ofServer: serverValues,
  };
}

export class ServerIndex {
  pages = 0;
  /**
   * Listed resources of this type whose id is not a safe path segment (`isSafeId`): never indexed, so never
   * adopted, recorded or referred to (a key matching one is created instead).
   */
  unsafeIds = 0;
  readonly #byId = new Map<string, IndexedResource>();
  /** mapping → match value → server ids. */
  readonly #byMatch = new Map<string, Map<string, string[]>>();
  /** The listed resources themselves, when asked for (`care-etl plan` shows what an update would change). */
  readonly #bodies?: Map<string, Resource>;
  /** mapping + digest scheme → digest of a match value → server ids: filled at the first `lookupDigest` (match-digest.ts). */
  readonly #byDigest = new Map<string, Map<string, string[]>>();

  constructor(
    readonly resourceType: WritableType,
    readonly rules: ReadonlyMap<string, MatchRule>,
    opts: { keepBodies?: boolean } = {},
  ) {
    for (const name of rules.keys()) this.#byMatch.set(name, new Map());
    if (opts.keepBodies) this.#bodies = new Map();
  }

  get size(): number {
    return this.#byId.size;
  }

  async add(r: Resource): Promise<void> {
    if (r?.resourceType !== this.resourceType) return;
    if (!isSafeId(r.id)) {
      this.unsafeIds++;
      return;
    }
    if (this.#byId.has(r.id)) return;
    const hash = comparableHash(r);
    const meta = r.meta as { versionId?: unknown } | undefined;
    this.#byId.set(r.id, { id: r.id, versionId: typeof meta?.versionId === 'string' ? meta.versionId : undefined, hash });
    this.#bodies?.set(r.id, r);
    const content = `content:${hash}`;
    for (const [name, rule] of this.rules) {
      const m = this.#byMatch.get(name)!;
      for (const v of new Set([...(await rule.ofServer(r)), content])) {
        const ids = m.get(v);
        if (ids) ids.push(r.id);
        else m.set(v, [r.id]);
      }
    }
    this.#byDigest.clear();
  }

  /** Server resources of `mapping` with this match value (more than one: the server holds duplicates). */
  lookup(mapping: string, value: string): IndexedResource[] {
    return (this.#byMatch.get(mapping)?.get(value) ?? []).map((id) => this.#byId.get(id)!);
  }

  /**
   * Server resources of `mapping` whose match value has this digest: how an interrupted create the state recorded
   * (as a digest, never in clear) is found again. One digest per indexed value, computed at the first such lookup.
   */
  lookupDigest(mapping: string, digest: string, scheme: DigestScheme): IndexedResource[] {
    const k = `${mapping}\u0000${scheme.id}`;
    let m = this.#byDigest.get(k);
    if (!m) {
      m = new Map();
      for (const [value, ids] of this.#byMatch.get(mapping) ?? []) m.set(scheme.of(value), ids);
      this.#byDigest.set(k, m);
    }
    return (m.get(digest) ?? []).map((id) => this.#byId.get(id)!);
  }

  get(id: string): IndexedResource | undefined {
    return this.#byId.get(id);
  }

  /** The resource as listed (only with `keepBodies`). */
  body(id: string): Resource | undefined {
    return this.#bodies?.get(id);
  }

  ids(): IterableIterator<string> {
    return this.#byId.keys();
  }
}

/** One listing of a type, as reported to the user. */
export interface IndexBuild {
  resourceType: WritableType;
  /** Why it was needed (first reason given). */
  reason: string;
  pages: number;
  resources: number;
  /** `_count` asked for; undefined when the server refused it (400) or none was asked. */
  pageSize?: number;
  durationMs: number;
  /** Listed resources left out because their id is not a valid FHIR id (only when there were some). */
  unsafeIds?: number;
}

export interface ServerIndexesOptions {
  /** `_count` asked for (default 1000; 0 = ask for none, use the server's default). */
  pageSize?: number;
  retry?: RetryOptions;
  signal?: AbortSignal;
  /** Called when a listing starts and when it ends (for progress lines). */
  onBuild?: (e: { phase: 'start' | 'end'; build: IndexBuild }) => void;
  /**
   * Keep every listed resource in memory, not only its id and hash (`care-etl plan`: field-level diffs and the
   * bodies of ends). Costs the size of the listed types; a run never asks for it.
   */
  keepBodies?: boolean;
}

export const DEFAULT_INDEX_PAGE_SIZE = 1000;

/** The indexes of one run: at most one listing per type, unless a `refresh` is asked for. */
export class ServerIndexes {
  readonly builds: IndexBuild[] = [];
  readonly #cache = new Map<WritableType, Promise<ServerIndex>>();
  readonly #done = new Map<WritableType, ServerIndex>();

  constructor(
    readonly client: CareClient,
    /** Every mapping of the run by type: one listing serves all mappings of a type. */
    readonly rulesByType: ReadonlyMap<WritableType, ReadonlyMap<string, MatchRule>>,
    readonly opts: ServerIndexesOptions = {},
  ) {}

  /** The index of `type`, listing the server the first time it is asked for. */
  get(type: WritableType, reason: string): Promise<ServerIndex> {
    let p = this.#cache.get(type);
    if (!p) {
      p = this.#build(type, reason);
      this.#cache.set(type, p);
      // A failed listing is not cached: the next caller tries again.
      p.catch(() => this.#cache.delete(type));
    }
    return p;
  }

  /** The index if a listing of `type` already completed in this run. */
  peek(type: WritableType): ServerIndex | undefined {
    return this.#done.get(type);
  }

  /** A new listing (resources created since the last one are needed: creates whose answer was lost). */
  refresh(type: WritableType, reason: string): Promise<ServerIndex> {
    const p = this.#build(type, reason);
    this.#cache.set(type, p);
    p.catch(() => this.#cache.delete(type));
    return p;
  }

  async #build(type: WritableType, reason: string): Promise<ServerIndex> {
    const pageSize = this.opts.pageSize ?? DEFAULT_INDEX_PAGE_SIZE;
    const index = new ServerIndex(type, this.rulesByType.get(type) ?? new Map(), { keepBodies: this.opts.keepBodies });
    const build: IndexBuild = { resourceType: type, reason, pages: 0, resources: 0, pageSize: pageSize > 0 ? pageSize : undefined, durationMs: 0 };
    this.opts.onBuild?.({ phase: 'start', build });
    const started = performance.now();
    for await (const page of this.client.pages(type, {
      pageSize: pageSize > 0 ? pageSize : undefined,
      retry: this.opts.retry ?? {},
      signal: this.opts.signal,
    })) {
      index.pages++;
      for (const e of page.entry ?? []) if (e?.resource) await index.add(e.resource);
    }
    build.pages = index.pages;
    build.resources = index.size;
    if (index.unsafeIds) build.unsafeIds = index.unsafeIds;
    if (!this.client.pageSizeAccepted) build.pageSize = undefined;
    build.durationMs = Math.round(performance.now() - started);
    this.builds.push(build);
    this.#done.set(type, index);
    this.opts.onBuild?.({ phase: 'end', build });
    return index;
  }
}
