/**
 * The server's resources of one type, indexed by the match values of every mapping of that type — how the
 * loader finds out whether a resource the ledger does not know already exists (the specification shows no
 * search: the only way is to list the type and follow `next` links).
 *
 * Built at most once per type per run, lazily (only when a key the ledger does not know is about to be
 * created, or when asked for up front); creates whose outcome was lost need a fresh listing (`refresh`).
 */
import { versionIdOf } from '../core/state-text.js';
import { afterSendsWith } from './after-sends.js';
import type { CareClient } from '../api/client.js';
import { isSafeId, ProtocolError, SAFE_ID_RULE } from '../api/errors.js';
import { CareEtlError, issue } from '../core/issues.js';
import { nestsDeeperThan } from '../core/json-depth.js';
import { redactKnown } from '../core/secret.js';
import type { WritableType } from '../schemas/resource-types.js';
import type { Bundle, Resource } from '../api/types.js';
import { identifierMatch, type CompiledResource } from '../mapping/compile-mapping.js';
import { allIdentifierValues, careTeamIdentity, comparableHash, contentIdentity, contentIdentityOfHash, isContentIdentity } from './identity.js';
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
  /**
   * The same two without a promise, for a rule that needs no JSONata (`identifier`, `references`, none: the content):
   * the loader's per-row path (issue 28 item 3). Undefined for a JSONata `match:`.
   */
  readonly now?: { ofMapped(resource: Resource): string; ofServer(resource: Resource): string[] };
}

export function matchRuleOf(res: CompiledResource): MatchRule {
  const now = directRule(res);
  // The built-in rules are written once, in `directRule`; only a JSONata `match:` needs the evaluator.
  if (now) return { ofMapped: async (r) => now.ofMapped(r), ofServer: async (r) => now.ofServer(r), now };
  return {
    async ofMapped(r) {
      return (await res.evalMatch?.(r)) ?? contentIdentity(r);
    },
    async ofServer(r) {
      try {
        const v = await res.evalMatch?.(r);
        return v === undefined ? [] : [v];
      } catch {
        return [];
      }
    },
  };
}

/** `MatchRule.now`: what `evalMatch` computes for the built-in rules (compile-mapping.ts `matchEvaluator`), called directly. */
function directRule(res: CompiledResource): MatchRule['now'] {
  const rule = res.def.match;
  if (!res.evalMatch) return { ofMapped: (r) => contentIdentity(r), ofServer: () => [] };
  if (rule === 'identifier') return { ofMapped: (r) => identifierMatch(r) ?? contentIdentity(r), ofServer: (r) => allIdentifierValues(r) };
  if (rule === 'references') {
    return {
      ofMapped: (r) => careTeamIdentity(r) ?? contentIdentity(r),
      ofServer: (r) => {
        const v = careTeamIdentity(r);
        return v ? [v] : [];
      },
    };
  }
  return undefined;
}

export class ServerIndex {
  pages = 0;
  /** The URL its last page was read from (`ServerIndexes.reread` starts there). */
  lastPageUrl?: string;
  /** Resources on the page read last: what a re-read from `lastPageUrl` reads again. */
  lastPageResources = 0;
  /** Its pages carried a `total` (a listing read while resources are added to it is then refused). */
  carriedTotal = false;
  readonly #byId = new Map<string, IndexedResource>();
  /** mapping → match value → server ids. */
  readonly #byMatch = new Map<string, Map<string, string[]>>();
  /** The listed resources themselves, when asked for (`care-etl plan` shows what an update would change). */
  readonly #bodies?: Map<string, Resource>;
  /** False: no content hash (`hash` is empty, no `content:` identity) — see `ServerIndexesOptions.hashes`. */
  readonly #hashes: boolean;
  /** mapping + digest scheme → digest of a match value → server ids: filled at the first `lookupDigest` (match-digest.ts). */
  readonly #byDigest = new Map<string, Map<string, string[]>>();

  constructor(
    readonly resourceType: WritableType,
    readonly rules: ReadonlyMap<string, MatchRule>,
    opts: { keepBodies?: boolean; hashes?: boolean } = {},
  ) {
    for (const name of rules.keys()) this.#byMatch.set(name, new Map());
    if (opts.keepBodies) this.#bodies = new Map();
    this.#hashes = opts.hashes ?? true;
  }

  get size(): number {
    return this.#byId.size;
  }

  /**
   * A listed resource (checked by `ListingCheck`: of this type, a usable id, bounded nesting). A promise only when a
   * mapping's rule is a JSONata `match:`.
   */
  add(r: Resource & { id: string }): Promise<void> | void {
    if (this.#byId.has(r.id)) return;
    const hash = this.#hashes ? comparableHash(r) : '';
    const meta = r.meta as { versionId?: unknown } | undefined;
    this.#byId.set(r.id, { id: r.id, versionId: versionIdOf(meta?.versionId), hash });
    this.#bodies?.set(r.id, r);
    const content = this.#hashes ? [contentIdentityOfHash(hash)] : [];
    this.#byDigest.clear();
    const later: Promise<void>[] = [];
    for (const [name, rule] of this.rules) {
      if (rule.now) this.#indexValues(name, r.id, [...rule.now.ofServer(r), ...content]);
      else later.push(rule.ofServer(r).then((values) => this.#indexValues(name, r.id, [...values, ...content])));
    }
    if (later.length) return Promise.all(later).then(() => undefined);
  }

  #indexValues(mapping: string, id: string, values: string[]): void {
    const m = this.#byMatch.get(mapping)!;
    for (const v of new Set(values)) {
      const ids = m.get(v);
      if (ids) ids.push(id);
      else m.set(v, [id]);
    }
  }

  /** Server resources of `mapping` with this match value (more than one: the server holds duplicates). */
  lookup(mapping: string, value: string): IndexedResource[] {
    if (!this.#hashes && isContentIdentity(value)) throw new Error(`care-etl: a content identity looked up in an index without hashes (${this.resourceType})`);
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
  /**
   * False: index ids and the rules' match values only, without hashing each listed resource (`--verify-after-load`
   * when no created key is known by its content alone: it asks which ids are listed and which share a match value).
   */
  hashes?: boolean;
  /**
   * Runs a whole listing (its pages follow one another: one request in flight) in a slot of the run's window, so
   * that listings and writes together never exceed it (issue 28: listings start up front, alongside writes).
   */
  slot?: <T>(listing: () => Promise<T>) => Promise<T>;
}

export const DEFAULT_INDEX_PAGE_SIZE = 1000;

/** The indexes of one run: at most one listing per type, unless a `refresh` is asked for. */
export class ServerIndexes {
  readonly builds: IndexBuild[] = [];
  readonly #cache = new Map<WritableType, Promise<ServerIndex>>();
  readonly #done = new Map<WritableType, ServerIndex>();
  /** The index of each listing still being read (its pages so far). */
  readonly #reading = new Map<WritableType, ServerIndex>();

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

  /** The index of a listing of `type` still being read: its pages so far, and the page it reads (`lastPageUrl`). */
  reading(type: WritableType): ServerIndex | undefined {
    return this.#reading.get(type);
  }

  /** A new listing (resources created since the last one are needed: creates whose answer was lost). */
  refresh(type: WritableType, reason: string): Promise<ServerIndex> {
    const p = this.#build(type, reason);
    this.#cache.set(type, p);
    p.catch(() => this.#cache.delete(type));
    return p;
  }

  #build(type: WritableType, reason: string): Promise<ServerIndex> {
    const index = new ServerIndex(type, this.rulesByType.get(type) ?? new Map(), { keepBodies: this.opts.keepBodies, hashes: this.opts.hashes });
    const list = async () => {
      this.#reading.set(type, index);
      try {
        await this.#list(index, reason);
        return index;
      } finally {
        if (this.#reading.get(type) === index) this.#reading.delete(type);
      }
    };
    return this.opts.slot ? this.opts.slot(list) : list();
  }

  /**
   * A listing read again from its last page on, following `next` to the end (issue 28: what was appended since the
   * listing passed that page): its pages checked as any listing's, resources already indexed skipped, new ones added
   * to `index`. Its build counts the pages read and the resources added.
   */
  reread(index: ServerIndex, reason: string): Promise<IndexBuild> {
    const from = index.lastPageUrl;
    if (from === undefined) return Promise.reject(new Error(`care-etl: ${index.resourceType} was never listed: nothing to read again`));
    const list = () => this.#list(index, reason, from);
    return this.opts.slot ? this.opts.slot(list) : list();
  }

  async #list(index: ServerIndex, reason: string, from?: string): Promise<IndexBuild> {
    const type = index.resourceType;
    const pageSize = this.opts.pageSize ?? DEFAULT_INDEX_PAGE_SIZE;
    const build: IndexBuild = { resourceType: type, reason, pages: 0, resources: 0, pageSize: pageSize > 0 ? pageSize : undefined, durationMs: 0 };
    this.opts.onBuild?.({ phase: 'start', build });
    const started = performance.now();
    const check = new ListingCheck(type);
    const pages = this.client.pages(type, {
      pageSize: pageSize > 0 ? pageSize : undefined,
      retry: this.opts.retry ?? {},
      signal: this.opts.signal,
      from,
      onPageUrl: (url) => (index.lastPageUrl = url),
    });
    let read = 0;
    let added = 0;
    let ended = false;
    try {
      let next = pages.next();
      for (;;) {
        const got = await next;
        if (got.done) break;
        // The next page is asked for before this one is indexed (issue 28: pages follow `next` links one at a time,
        // so indexing a page of 1,000 while nothing is in flight was a third of a listing); its request is written
        // first (after-sends.ts), and its failure, if any, is met when it is awaited.
        next = pages.next();
        next.catch(() => {});
        await afterSendsWith(undefined);
        index.pages++;
        index.lastPageResources = got.value.entry?.length ?? 0;
        read++;
        for (const r of check.page(got.value)) {
          const size = index.size;
          const adding = index.add(r);
          if (index.size > size) added++; // not `size` afterwards: a re-read may run alongside the listing it reads again
          if (adding) await adding;
        }
      }
      ended = true;
      check.end(index.size); // a re-read's total counts what the first reading listed too
      if (check.total !== undefined) index.carriedTotal = true;
    } catch (err) {
      throw refusedUnlessKnown(type, err);
    } finally {
      // Stopped early (a page refused, the run cancelled): the page asked for ahead is settled, never left running.
      if (!ended) await pages.return(undefined).catch(() => {});
    }
    build.pages = read;
    build.resources = added; // a re-read's: the resources it added
    if (!this.client.pageSizeAccepted) build.pageSize = undefined;
    build.durationMs = Math.round(performance.now() - started);
    this.builds.push(build);
    this.#done.set(type, index);
    this.opts.onBuild?.({ phase: 'end', build });
    return build;
  }
}

/** Nesting levels a listed resource may have (the schemas' resources need fewer than 10). */
const MAX_LISTED_DEPTH = 64;
/** Problems named in a refusal (the rest counted). */
const NAMED_PROBLEMS = 5;

/** A value from the listing, for a message: JSON-quoted, shortened, known secrets masked (the server chose it). */
function shown(v: unknown): string {
  const text =
    typeof v === 'string' ? JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v) : v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v;
  return redactKnown(text);
}

/**
 * A listing that cannot be believed (issue 25): care-etl lists a type to find what the state does not know before
 * creating it, so a listing that may be missing resources would make it create second copies. It stops the run.
 */
export class ListingRefusedError extends ProtocolError {
  constructor(type: WritableType, problem: string) {
    super(`list ${type}: the server's listing cannot be believed: ${problem}; nothing the listing should show is created`, {
      operation: 'list',
      hint: 'care-etl lists a type before creating what its state does not know, so that nothing is created twice; this listing is incomplete or inconsistent. Report it to the service operator, and run again once it is fixed (rows not loaded are loaded then; nothing was rejected for it).',
    });
    this.name = 'ListingRefusedError';
  }

  override toIssues() {
    return [issue.error('listing-refused', this.message)];
  }
}

/**
 * An error of the listing as the run sees it: care-etl's own errors (HTTP, transport, protocol) and aborts as they
 * are; anything else — a JavaScript error on a body no check foresaw — a refusal naming it, not a row's reject.
 */
function refusedUnlessKnown(type: WritableType, err: unknown): unknown {
  if (err instanceof CareEtlError || (err as Error)?.name === 'AbortError') return err;
  const name = err instanceof Error ? err.name : typeof err;
  return new ListingRefusedError(type, `reading it failed (${name}: ${redactKnown(String((err as Error)?.message ?? err)).slice(0, 120)})`);
}

/**
 * What a listing must be before the index built from it is believed: every `entry` an object holding a resource
 * of the listed type with a usable id (`isSafeId`) and at most MAX_LISTED_DEPTH levels of nesting; `total`, when a
 * page sends one, a count that every page agrees on and that the distinct resources listed reach exactly.
 */
class ListingCheck {
  #page = 0;
  #total: number | undefined;

  constructor(readonly type: WritableType) {}

  /** The `total` the pages sent, if any. */
  get total(): number | undefined {
    return this.#total;
  }

  /** The resources of one page, or a ListingRefusedError naming what is wrong with it. */
  page(bundle: Bundle): (Resource & { id: string })[] {
    this.#page++;
    this.#checkTotal((bundle as { total?: unknown }).total);
    const out: (Resource & { id: string })[] = [];
    const problems: string[] = [];
    const entries: unknown[] = bundle.entry ?? [];
    entries.forEach((e, i) => {
      const problem = this.#problemOf(e);
      if (problem) problems.push(`entry ${i + 1} ${problem}`);
      else out.push((e as { resource: Resource & { id: string } }).resource);
    });
    if (problems.length > 0) {
      const more = problems.length > NAMED_PROBLEMS ? `; and ${problems.length - NAMED_PROBLEMS} more entries` : '';
      throw new ListingRefusedError(this.type, `page ${this.#page}: ${problems.slice(0, NAMED_PROBLEMS).join('; ')}${more}`);
    }
    return out;
  }

  /** After the last page: the distinct resources listed against the `total` the pages sent. */
  end(listed: number): void {
    if (this.#total !== undefined && this.#total !== listed) {
      throw new ListingRefusedError(this.type, `its total says ${this.#total} resources, its ${this.#page} page(s) list ${listed}`);
    }
  }

  #checkTotal(total: unknown): void {
    if (total === undefined) return;
    if (typeof total !== 'number' || !Number.isSafeInteger(total) || total < 0) {
      throw new ListingRefusedError(this.type, `page ${this.#page}: its total is ${shown(total)}, not a count`);
    }
    if (this.#total !== undefined && total !== this.#total) {
      throw new ListingRefusedError(
        this.type,
        `page ${this.#page}: its total is ${total}, an earlier page said ${this.#total} (the listing changed while it was read)`,
      );
    }
    this.#total = total;
  }

  #problemOf(e: unknown): string | undefined {
    if (e === null || typeof e !== 'object' || Array.isArray(e)) return `is ${shown(e)}, not an object`;
    const r = (e as { resource?: unknown }).resource;
    if (r === null || typeof r !== 'object' || Array.isArray(r)) return r === undefined ? 'holds no resource' : `holds ${shown(r)}, not a resource`;
    const { resourceType, id } = r as { resourceType?: unknown; id?: unknown };
    if (resourceType !== this.type) return `is a ${shown(resourceType)} resource, not a ${this.type}`;
    if (id === undefined) return 'carries no id';
    if (!isSafeId(id)) return `has the id ${shown(id)}, which cannot be used (${SAFE_ID_RULE})`;
    if (nestsDeeperThan(r, MAX_LISTED_DEPTH)) return `(id ${shown(id)}) is nested more than ${MAX_LISTED_DEPTH} levels deep`;
    return undefined;
  }
}
