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

/** Canonical JSON text (sorted keys); `undefined` for values JSON would omit (undefined, functions, symbols). */
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
    return `[${value.map((v) => canonicalJson(v) ?? 'null').join(',')}]`;
  }
  const obj = value as Record<string, unknown>;
  const parts: string[] = [];
  for (const k of Object.keys(obj).sort()) {
    const v = canonicalJson(obj[k]);
    if (v !== undefined) parts.push(`${JSON.stringify(k)}:${v}`);
  }
  return `{${parts.join(',')}}`;
}
