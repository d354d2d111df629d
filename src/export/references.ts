import type { LedgerScope } from '../state/ledger.js';

/**
 * `Patient/123`, `https://host/base/Patient/123` or `…/Patient/123/_history/2` → `{ type, id }`;
 * undefined for anything else (contained `#x` references, URNs, blanks).
 */
export function parseReference(reference: unknown): { type: string; id: string } | undefined {
  if (typeof reference !== 'string' || reference === '') return undefined;
  let path = reference;
  const q = path.search(/[?#]/);
  if (q === 0) return undefined;
  if (q > 0) path = path.slice(0, q);
  const parts = path.split('/').filter((p) => p !== '');
  if (parts.length >= 4 && parts[parts.length - 2] === '_history') parts.length -= 2;
  if (parts.length < 2) return undefined;
  const type = parts[parts.length - 2]!;
  const id = parts[parts.length - 1]!;
  if (!/^[A-Z][A-Za-z]+$/.test(type) || !/^[A-Za-z0-9\-.]{1,64}$/.test(id)) return undefined;
  return { type, id };
}

/**
 * Source key (e.g. the MRN) of the resource behind a reference, read from the ledger (`keyOfServerId`),
 * with a bounded cache: one SQLite lookup per distinct reference, memory capped whatever the export size.
 */
export class SourceKeys {
  readonly #scope?: LedgerScope;
  readonly #cache = new Map<string, string | null>();
  readonly #max: number;

  constructor(scope: LedgerScope | undefined, maxCached = 50_000) {
    this.#scope = scope;
    this.#max = maxCached;
  }

  of(reference: unknown): string | undefined {
    if (!this.#scope || typeof reference !== 'string') return undefined;
    const hit = this.#cache.get(reference);
    if (hit !== undefined) return hit ?? undefined;
    const ref = parseReference(reference);
    const key = ref ? (this.#scope.keyOfServerId(ref.type, ref.id)?.key ?? null) : null;
    if (this.#cache.size >= this.#max) this.#cache.clear();
    this.#cache.set(reference, key);
    return key ?? undefined;
  }
}
