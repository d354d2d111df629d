import { hash } from 'node:crypto';

/**
 * Stable hash of a resource's content: canonical JSON (object keys sorted recursively, `undefined`
 * members dropped, JSON semantics otherwise — `toJSON` honoured, non-finite numbers → null) → sha256 hex.
 * The top-level `id` and `meta` are ignored (server-assigned), so a resource read back from the server
 * hashes like the one that was sent.
 */
export function contentHash(resource: unknown): string {
  let root = resource;
  if (root !== null && typeof root === 'object' && !Array.isArray(root)) {
    const { id: _id, meta: _meta, ...rest } = root as Record<string, unknown>;
    root = rest;
  }
  return hash('sha256', canonicalJson(root) ?? 'null', 'hex'); // one-shot: no Hash object per resource (UTF-8, as update())
}

/**
 * Canonical JSON text (sorted keys); `undefined` for values JSON would omit (undefined, functions, symbols). Built by
 * concatenation, keys quoted once per process (`quotedKey`): the loader hashes every row (issue 28 item 3). The text
 * must never change — the state keeps these hashes — so a sparse array's hole stays an empty slot, as `Array.map` +
 * `join` made it (`test/core/content-hash.test.ts` checks it against that first version).
 */
export function canonicalJson(value: unknown): string | undefined {
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    value = (value as { toJSON: () => unknown }).toJSON();
  }
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? JSON.stringify(value) : 'null';
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      throw new TypeError('contentHash: BigInt values cannot be hashed as JSON');
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
  }
  if (value === null) return 'null';
  if (Array.isArray(value)) {
    let text = '[';
    for (let i = 0; i < value.length; i++) {
      if (i) text += ',';
      if (i in value) text += canonicalJson(value[i]) ?? 'null';
    }
    return `${text}]`;
  }
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj);
  if (keys.length > 1) sortKeys(keys);
  let text = '';
  for (const k of keys) {
    const v = canonicalJson(obj[k]);
    if (v !== undefined) text += `${text ? ',' : ''}${quotedKey(k)}:${v}`;
  }
  return `{${text}}`;
}

/**
 * Sorts in place in `Array.prototype.sort`'s default order (UTF-16 code units: what `<` compares; keys are distinct).
 * An insertion sort for the few keys of a resource's objects: the built-in sort allocates its work arrays on every
 * call — the largest allocation per create of the loader (issue 28 item 3).
 */
function sortKeys(keys: string[]): void {
  if (keys.length > 16) {
    keys.sort();
    return;
  }
  for (let i = 1; i < keys.length; i++) {
    const k = keys[i]!;
    let j = i - 1;
    for (; j >= 0 && keys[j]! > k; j--) keys[j + 1] = keys[j]!;
    keys[j + 1] = k;
  }
}

/** Object keys as JSON text, remembered: a mapping's outputs use a few dozen names (at most QUOTED_KEYS kept). */
const QUOTED = new Map<string, string>();
const QUOTED_KEYS = 4096;

function quotedKey(k: string): string {
  let q = QUOTED.get(k);
  if (q === undefined) {
    q = JSON.stringify(k);
    if (QUOTED.size < QUOTED_KEYS) QUOTED.set(k, q);
  }
  return q;
}
