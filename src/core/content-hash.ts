import { hash } from 'node:crypto';

/**
 * Stable hash of a resource's content: canonical JSON (object keys sorted recursively, `undefined`
 * members dropped, JSON semantics otherwise — `toJSON` honoured, non-finite numbers → null) → sha256 hex.
 * The top-level `id` and `meta` are ignored (server-assigned), so a resource read back from the server
 * hashes like the one that was sent.
 */
export function contentHash(resource: unknown): string {
  if (!writing && isPlainObject(resource) && typeof resource.toJSON !== 'function') return hashWritten(resource);
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
  if (keys.length > 16) keys.sort();
  else sortFirst(keys, keys.length);
}

/** The insertion sort of `sortKeys`, of the first `n` keys. */
function sortFirst(keys: string[], n: number): void {
  for (let i = 1; i < n; i++) {
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

/**
 * The same text as `canonicalJson`, written as UTF-8 into one reused buffer and hashed from there: no string per
 * member, no flattening, no copy of the top level without `id` / `meta` (the loader hashes every row: its largest
 * allocation per create, issue 28 item 3). Plain objects and arrays only; anything else (a Date, a class instance,
 * a `toJSON`) is written as `canonicalJson` gives it.
 */
function hashWritten(root: Record<string, unknown>): string {
  writing = true;
  try {
    at = 0;
    writeObject(root, 0, true);
    return hash('sha256', out.subarray(0, at), 'hex');
  } finally {
    writing = false;
  }
}

let out = Buffer.allocUnsafe(16 * 1024);
let at = 0;
/** A `toJSON` may hash too: it gets the string path, not the buffer in use. */
let writing = false;
/** Key lists by depth, reused (sorted in place). */
const keyLists: string[][] = [];

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

function room(bytes: number): void {
  if (at + bytes <= out.length) return;
  const bigger = Buffer.allocUnsafe(Math.max(out.length * 2, at + bytes));
  out.copy(bigger, 0, 0, at);
  out = bigger;
}

/** ASCII text as it is (JSON text, a quoted key, a string needing no escape); anything else through UTF-8. */
function writeText(text: string): void {
  room(text.length * 3);
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x80) {
      at += out.write(text.slice(i), at, 'utf8');
      return;
    }
    out[at++] = c;
  }
}

/** A string value: quoted as is when plain ASCII needing no escape, else as JSON.stringify quotes it. */
function writeString(s: string): void {
  room(s.length + 2);
  const start = at;
  out[at++] = 0x22;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c >= 0x80 || c === 0x22 || c === 0x5c) {
      at = start;
      writeText(JSON.stringify(s));
      return;
    }
    out[at++] = c;
  }
  out[at++] = 0x22;
}

/** Writes `value`; false (nothing written) for what JSON omits — as `canonicalJson` returning undefined. */
function writeValue(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case 'string':
      writeString(value);
      return true;
    case 'boolean':
      writeText(value ? 'true' : 'false');
      return true;
    case 'object':
      if (value === null) {
        writeText('null');
        return true;
      }
      if (Array.isArray(value) && Object.getPrototypeOf(value) === Array.prototype && typeof (value as { toJSON?: unknown }).toJSON !== 'function') {
        writeArray(value, depth);
        return true;
      }
      if (isPlainObject(value) && typeof value.toJSON !== 'function') {
        writeObject(value, depth, false);
        return true;
      }
      break;
  }
  const text = canonicalJson(value);
  if (text === undefined) return false;
  writeText(text);
  return true;
}

function writeArray(value: unknown[], depth: number): void {
  room(1);
  out[at++] = 0x5b;
  for (let i = 0; i < value.length; i++) {
    if (i) {
      room(1);
      out[at++] = 0x2c;
    }
    if (i in value && !writeValue(value[i], depth + 1)) writeText('null');
  }
  room(1);
  out[at++] = 0x5d;
}

/** `root`: the top level of `contentHash`, whose `id` and `meta` are left out. */
function writeObject(obj: Record<string, unknown>, depth: number, root: boolean): void {
  const keys = (keyLists[depth] ??= []);
  let n = 0;
  // Filled by index, never emptied: a list keeps its backing store from one object to the next.
  for (const k in obj) if (Object.hasOwn(obj, k) && !(root && (k === 'id' || k === 'meta'))) keys[n++] = k;
  if (n > 16) {
    const sorted = keys.slice(0, n).sort();
    for (let i = 0; i < n; i++) keys[i] = sorted[i]!;
  } else sortFirst(keys, n);
  room(1);
  out[at++] = 0x7b;
  let first = true;
  for (let i = 0; i < n; i++) {
    const mark = at;
    if (!first) {
      room(1);
      out[at++] = 0x2c;
    }
    writeText(quotedKey(keys[i]!));
    room(1);
    out[at++] = 0x3a;
    if (writeValue(obj[keys[i]!], depth + 1)) first = false;
    else at = mark;
  }
  room(1);
  out[at++] = 0x7d;
}
