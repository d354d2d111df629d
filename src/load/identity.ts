/**
 * How a resource is recognised on the server without the ledger: its match values under the mapping's match
 * rule (identifier, references, JSONata), else its content hash.
 * Design: docs/design/resource-identity.md.
 */
import { prune } from '../mapping/compile-mapping.js';
import { canonicalJson, contentHash } from '../core/content-hash.js';
export { allIdentifierValues, careTeamIdentity, referenceKey } from '../mapping/match-values.js';

/**
 * The resource as a server's answer is compared with a mapped one: top-level `id` and `meta` dropped, then
 * pruned like a mapping's output (null, blank text, empty arrays/objects removed — servers fill absent fields
 * with null in list results), object key order irrelevant (canonical JSON in the hash).
 */
export function comparable(resource: unknown): unknown {
  if (resource === null || typeof resource !== 'object' || Array.isArray(resource)) return prune(resource);
  const { id: _id, meta: _meta, ...rest } = resource as Record<string, unknown>;
  return prune(rest) ?? {};
}

/**
 * sha256 of the comparable form: equal for a mapped resource and the server's copy of the same content. A resource
 * `prune` would leave as it is (a server's answer usually is) is hashed without the pruned copy.
 */
export function comparableHash(resource: unknown): string {
  return contentHash(isPruned(resource) ? resource : comparable(resource));
}

/**
 * `contentHash` and `comparableHash` of one resource, hashed once when they must be equal: a mapping's output
 * is already pruned (`isPruned`), so its comparable form is itself (the loader's hot path: one hash per row).
 */
export function contentAndComparableHash(resource: unknown): { hash: string; comparable: string } {
  const hash = contentHash(resource);
  return { hash, comparable: isPruned(resource) ? hash : contentHash(comparable(resource)) };
}

/** True when `prune` would give a deep-equal copy: plain objects and arrays only, nothing it drops. */
function isPruned(v: unknown): boolean {
  switch (typeof v) {
    case 'string':
      return v.trim() !== '';
    case 'number':
      return Number.isFinite(v);
    case 'boolean':
      return true;
    case 'object': {
      if (v === null) return false;
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) if (!(i in v) || !isPruned(v[i])) return false;
        return v.length > 0;
      }
      const proto = Object.getPrototypeOf(v) as unknown;
      if (proto !== Object.prototype && proto !== null) return false; // a Date, a class instance: prune copies own keys only
      let n = 0;
      for (const k in v) {
        // prune's copy never holds an own `__proto__` (assigning it sets the copy's prototype)
        if (!Object.hasOwn(v, k) || k === '__proto__' || !isPruned((v as Record<string, unknown>)[k])) return false;
        n++;
      }
      return n > 0;
    }
    default:
      return false;
  }
}

/** Last-resort identity: the content itself. */
export function contentIdentity(resource: unknown): string {
  return contentIdentityOfHash(comparableHash(resource));
}

/** The `contentIdentity` of a resource whose `comparableHash` is `hash`. */
export function contentIdentityOfHash(hash: string): string {
  return `${CONTENT}${hash}`;
}

/** A match value that is a `contentIdentity`. */
export function isContentIdentity(matchValue: string): boolean {
  return matchValue.startsWith(CONTENT);
}

const CONTENT = 'content:';

/** One field an update would change: JSON pointer, the server's value and the value the run would send (absent = not there). */
export interface FieldChange {
  path: string;
  before?: unknown;
  after?: unknown;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const pointerSegment = (s: string | number) => String(s).replace(/~/g, '~0').replace(/\//g, '~1');

/**
 * What differs between a server resource and the one a run would send, compared exactly as adoption compares
 * them (`comparable`: `id`, `meta`, nulls and empty values ignored, key order irrelevant): empty if and only if
 * their `comparableHash`es are equal. Objects are compared key by key (sorted), arrays element by element (an
 * element inserted in the middle shows as changes of the ones after it); each leaf or whole-subtree difference
 * is one entry.
 */
export function comparableDiff(server: unknown, next: unknown): FieldChange[] {
  const out: FieldChange[] = [];
  const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);
  const walk = (a: unknown, b: unknown, path: string): void => {
    if (same(a, b)) return;
    if (Array.isArray(a) && Array.isArray(b)) {
      for (let i = 0; i < Math.max(a.length, b.length); i++) {
        const p = `${path}/${i}`;
        if (i >= a.length) out.push({ path: p, after: b[i] });
        else if (i >= b.length) out.push({ path: p, before: a[i] });
        else walk(a[i], b[i], p);
      }
      return;
    }
    if (isPlainObject(a) && isPlainObject(b)) {
      for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
        const p = `${path}/${pointerSegment(k)}`;
        if (!(k in a)) out.push({ path: p, after: b[k] });
        else if (!(k in b)) out.push({ path: p, before: a[k] });
        else walk(a[k], b[k], p);
      }
      return;
    }
    out.push({ path: path || '/', before: a, after: b });
  };
  walk(comparable(server), comparable(next), '');
  return out;
}
