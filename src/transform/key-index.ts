/**
 * A set of source keys (64-bit fingerprints) with a line number each, in typed arrays: 12 bytes a key instead of
 * ~60 (bench/dry-run-memory.mjs); a fingerprint collision rejects a row as a duplicate, never loses one.
 * Design: docs/design/key-index.md.
 */
export class KeyIndex {
  #h1: Uint32Array;
  #h2: Uint32Array;
  /** value + 1; 0 marks an empty slot. */
  #val: Int32Array;
  #mask: number;
  #size = 0;

  constructor(initialCapacity = 1024) {
    let cap = 16;
    while (cap < initialCapacity * 2) cap *= 2;
    this.#h1 = new Uint32Array(cap);
    this.#h2 = new Uint32Array(cap);
    this.#val = new Int32Array(cap);
    this.#mask = cap - 1;
  }

  get size(): number {
    return this.#size;
  }

  has(key: string): boolean {
    return this.get(key) !== undefined;
  }

  get(key: string): number | undefined {
    const [a, b] = fingerprint(key);
    for (let i = a & this.#mask; ; i = (i + 1) & this.#mask) {
      const v = this.#val[i];
      if (v === 0) return undefined;
      if (this.#h1[i] === a && this.#h2[i] === b) return v - 1;
    }
  }

  /** Adds the key with `value` (an integer ≥ 0), or replaces its value. */
  set(key: string, value: number): void {
    if (!Number.isInteger(value) || value < 0 || value >= 0x7fffffff) throw new RangeError(`KeyIndex values are integers from 0 to 2^31-2, got ${value}`);
    if ((this.#size + 1) * 2 > this.#val.length) this.#grow();
    const [a, b] = fingerprint(key);
    this.#put(a, b, value + 1);
  }

  #put(a: number, b: number, stored: number): void {
    for (let i = a & this.#mask; ; i = (i + 1) & this.#mask) {
      const v = this.#val[i];
      if (v === 0) {
        this.#h1[i] = a;
        this.#h2[i] = b;
        this.#val[i] = stored;
        this.#size++;
        return;
      }
      if (this.#h1[i] === a && this.#h2[i] === b) {
        this.#val[i] = stored;
        return;
      }
    }
  }

  #grow(): void {
    const [h1, h2, val] = [this.#h1, this.#h2, this.#val];
    const cap = val.length * 2;
    this.#h1 = new Uint32Array(cap);
    this.#h2 = new Uint32Array(cap);
    this.#val = new Int32Array(cap);
    this.#mask = cap - 1;
    this.#size = 0;
    for (let i = 0; i < val.length; i++) if (val[i] !== 0) this.#put(h1[i], h2[i], val[i]);
  }
}

const pair: [number, number] = [0, 0];

/** FNV-1a and a Murmur3-style multiply-rotate hash over the UTF-16 code units; the pair is reused (hot path). */
function fingerprint(key: string): [number, number] {
  let a = 0x811c9dc5;
  let b = 0x9747b28c ^ key.length;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    let k = Math.imul(c, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    b ^= Math.imul(k, 0x1b873593);
    b = (b << 13) | (b >>> 19);
    b = (Math.imul(b, 5) + 0xe6546b64) | 0;
  }
  b ^= b >>> 16;
  b = Math.imul(b, 0x85ebca6b);
  b ^= b >>> 13;
  pair[0] = a >>> 0;
  pair[1] = b >>> 0;
  return pair;
}
