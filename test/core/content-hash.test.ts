/**
 * The content hash is stored in every state (each entry's `hash`): its canonical JSON text must never change, or every
 * recorded resource would look changed to the next run. The oracle is the first implementation (array `map` + `join`),
 * kept here verbatim; the faster one (issue 28 item 3) must give the same text for any value.
 */
import { hash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, contentHash } from '../../src/core/content-hash.js';

function firstCanonicalJson(value: unknown): string | undefined {
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
  if (Array.isArray(value)) return `[${value.map((v) => firstCanonicalJson(v) ?? 'null').join(',')}]`;
  const obj = value as Record<string, unknown>;
  const parts: string[] = [];
  for (const k of Object.keys(obj).sort()) {
    const v = firstCanonicalJson(obj[k]);
    if (v !== undefined) parts.push(`${JSON.stringify(k)}:${v}`);
  }
  return `{${parts.join(',')}}`;
}

/** Values a mapping or a server can produce, and the odd ones the hash must still treat as before. */
const value: fc.Arbitrary<unknown> = fc.letrec<{ v: unknown }>((tie) => ({
  v: fc.oneof(
    { depthSize: 'small' },
    fc.string({ unit: 'binary' }),
    fc.double(),
    fc.integer(),
    fc.boolean(),
    fc.constantFrom(null, undefined, -0, Number.NaN, () => 1, new Date(0), { toJSON: () => ({ b: 1, a: [2] }) }),
    fc.array(tie('v'), { maxLength: 5 }),
    fc.array(tie('v'), { maxLength: 5 }).map((a) => {
      const sparse = [...a];
      sparse.length += 2; // holes at the end
      return sparse;
    }),
    fc.dictionary(fc.oneof(fc.string({ unit: 'binary' }), fc.constantFrom('__proto__', 'id', 'meta', 'a', 'B', 'é', '10', '9')), tie('v'), { maxKeys: 6 }),
  ),
})).v;

describe('canonicalJson / contentHash', () => {
  it('gives the text the first implementation gave, for any value (the stored hashes stay valid)', () => {
    fc.assert(
      fc.property(value, (v) => {
        expect(canonicalJson(v)).toBe(firstCanonicalJson(v));
      }),
      { numRuns: 2000 },
    );
  });

  it('orders any set of keys as the built-in sort did, below the insertion sort limit and past it', () => {
    const keys = fc.oneof(fc.string({ unit: 'binary', maxLength: 4 }), fc.constantFrom('10', '9', '0', '__proto__', 'Z', 'a', 'é', '\u{1F600}', '\uFF21'));
    fc.assert(
      fc.property(fc.dictionary(keys, fc.integer(), { minKeys: 2, maxKeys: 24 }), (obj) => {
        expect(canonicalJson(obj)).toBe(firstCanonicalJson(obj));
      }),
      { numRuns: 2000 },
    );
  });

  it('a resource hashes as it always has (sha256 of the sorted JSON, id and meta ignored)', () => {
    const r = { resourceType: 'Patient', id: 'x', meta: { versionId: '3' }, name: [{ given: ['Ann', , 'B'], family: 'Lé' }], active: false }; // eslint-disable-line no-sparse-arrays
    const text = '{"active":false,"name":[{"family":"Lé","given":["Ann",,"B"]}],"resourceType":"Patient"}';
    expect(canonicalJson({ ...r, id: undefined, meta: undefined })).toBe(text);
    expect(contentHash(r)).toBe(hash('sha256', text, 'hex'));
    expect(contentHash(r)).toBe('4be69cccbfdd3fd9dd7320036ad58939bf3dcc008fb6658434e56d5531b9223a'); // as the first implementation hashed it
  });
});

describe('contentHash written into a buffer', () => {
  it('hashes any resource as sha256 of the canonical text without id and meta', () => {
    const resource = fc.dictionary(
      fc.oneof(fc.string({ unit: 'binary', maxLength: 4 }), fc.constantFrom('id', 'meta', 'toJSON', '__proto__', 'resourceType')),
      value,
      { maxKeys: 24 },
    );
    fc.assert(
      fc.property(resource, (r) => {
        const { id: _id, meta: _meta, ...rest } = r;
        expect(contentHash(r)).toBe(hash('sha256', firstCanonicalJson(rest) ?? 'null', 'hex'));
      }),
      { numRuns: 2000 },
    );
  });
});
