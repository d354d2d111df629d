import { RECORD_MAX_DEPTH, RECORD_MAX_ITEMS, RECORD_MAX_TEXT_CHARS } from './types.js';

/**
 * Bounds on one JSON / NDJSON record, checked at the source so that a pathological record is a row-level reject
 * with its position — not a stack overflow later (JSONata, ajv, JSON.stringify of the rejects file all recurse):
 * nesting depth, items of one array or members of one object, length of one text value or key.
 * Iterative (never recurses), stops at the first violation; O(size of the record).
 */
export interface RecordBounds {
  maxDepth: number;
  maxItems: number;
  maxTextChars: number;
}

export const DEFAULT_RECORD_BOUNDS: RecordBounds = {
  maxDepth: RECORD_MAX_DEPTH,
  maxItems: RECORD_MAX_ITEMS,
  maxTextChars: RECORD_MAX_TEXT_CHARS,
};

/*
 * What the JSON reader puts in place of a text, number or key too long to hold (json-token-bounds.ts): a value JSON
 * cannot hold (two frozen objects), and a NUL-led name for a key (an export holding that very key would only get
 * its record rejected). An element holding one is out of bounds.
 */
export const TOO_LONG_STRING: object = Object.freeze(Object.create(null) as object);
export const TOO_LONG_NUMBER: object = Object.freeze(Object.create(null) as object);
export const TOO_LONG_KEY = '\u0000care-etl: key too long';

/** Why `value` is out of bounds (a message naming no value), or undefined when it is within them. */
export function recordBoundsViolation(value: unknown, bounds: RecordBounds = DEFAULT_RECORD_BOUNDS): string | undefined {
  const stack: unknown[] = [value];
  const depths: number[] = [1];
  while (stack.length > 0) {
    const v = stack.pop();
    const depth = depths.pop()!;
    if (typeof v === 'string') {
      if (v.length > bounds.maxTextChars) return `a text value is longer than ${bounds.maxTextChars} characters`;
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (v === TOO_LONG_STRING) return `a text value is longer than ${bounds.maxTextChars} characters`;
    if (v === TOO_LONG_NUMBER) return `a number is longer than ${bounds.maxTextChars} characters`;
    if (depth > bounds.maxDepth) return `nested deeper than ${bounds.maxDepth} levels`;
    if (Array.isArray(v)) {
      if (v.length > bounds.maxItems) return `an array has more than ${bounds.maxItems} items`;
      for (let i = 0; i < v.length; i++) {
        const x: unknown = v[i];
        if (x !== null && typeof x === 'object') {
          stack.push(x);
          depths.push(depth + 1);
        } else if (typeof x === 'string' && x.length > bounds.maxTextChars) {
          return `a text value is longer than ${bounds.maxTextChars} characters`;
        }
      }
      continue;
    }
    let members = 0;
    for (const k in v) {
      if (!Object.prototype.hasOwnProperty.call(v, k)) continue;
      if (++members > bounds.maxItems) return `an object has more than ${bounds.maxItems} members`;
      if (k.length > bounds.maxTextChars || k === TOO_LONG_KEY) return `a key is longer than ${bounds.maxTextChars} characters`;
      const x: unknown = (v as Record<string, unknown>)[k];
      if (x !== null && typeof x === 'object') {
        stack.push(x);
        depths.push(depth + 1);
      } else if (typeof x === 'string' && x.length > bounds.maxTextChars) {
        return `a text value is longer than ${bounds.maxTextChars} characters`;
      }
    }
  }
  return undefined;
}
