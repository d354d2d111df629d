/**
 * The JSONata built-in functions the compiler calls directly: synchronous ports of jsonata 2.2's own (same
 * signatures, same results); the higher-order ones in higher-order.ts, those taking a regex in regex.ts, the rest of
 * the pure synchronous ones run as JSONata's own (natives.ts). `$error` always BAILs: the interpreter raises it.
 */
import { append, bail, boolean, isFunction, lookup, seq, string, type Seq } from './runtime.js';
import * as hof from './higher-order.js';
import { contains, match, replace, split } from './regex.js';
import { parseSignature, type Signature } from './signature.js';

export interface Builtin {
  signature: Signature;
  fn: (...args: unknown[]) => unknown;
  takesFunctions: boolean;
}

const chars = (s: string): string[] => Array.from(s);

function substring(str: unknown, start: number, length?: number): string | undefined {
  if (str === undefined) return undefined;
  const arr = chars(str as string);
  let s = start;
  if (arr.length + s < 0) s = 0;
  if (length !== undefined) {
    if (length <= 0) return '';
    const end = s >= 0 ? s + length : arr.length + s + length;
    return arr.slice(s, end).join('');
  }
  return arr.slice(s).join('');
}

function trim(str: unknown): string | undefined {
  if (str === undefined) return undefined;
  let result = (str as string).replace(/[ \t\n\r]+/gm, ' ');
  if (result.charAt(0) === ' ') result = result.substring(1);
  if (result.charAt(result.length - 1) === ' ') result = result.substring(0, result.length - 1);
  return result;
}

function number(arg: unknown): number | undefined {
  if (arg === undefined) return undefined;
  if (typeof arg === 'number') return arg;
  if (typeof arg === 'string' && /^-?[0-9]+(\.[0-9]+)?([Ee][-+]?[0-9]+)?$/.test(arg) && !Number.isNaN(parseFloat(arg)) && Number.isFinite(Number(arg)))
    return parseFloat(arg);
  if (typeof arg === 'string' && /^(0[xX][0-9A-Fa-f]+)|(0[oO][0-7]+)|(0[bB][0-1]+)$/.test(arg)) return Number(arg);
  if (arg === true) return 1;
  if (arg === false) return 0;
  return bail(); // D3030
}

function keys(arg: unknown): Seq {
  let result = seq();
  if (Array.isArray(arg)) {
    const merge: Record<string, boolean> = Object.create(null);
    for (const item of arg) for (const k of keys(item)) merge[k as string] = true;
    result = keys(merge);
  } else if (arg !== null && typeof arg === 'object' && !isFunction(arg)) {
    for (const k of Object.keys(arg)) result.push(k);
  }
  return result;
}

const undef =
  <T, R>(f: (x: T) => R) =>
  (x: unknown): R | undefined =>
    x === undefined ? undefined : f(x as T);

const table: Record<string, [string, (...args: never[]) => unknown]> = {
  string: ['<x-b?:s>', (arg: unknown, prettify?: boolean) => string(arg, prettify)],
  substring: ['<s-nn?:s>', substring],
  substringBefore: [
    '<s-s:s>',
    (str: string | undefined, c: string) => (str === undefined ? undefined : str.indexOf(c) > -1 ? str.substr(0, str.indexOf(c)) : str),
  ],
  substringAfter: [
    '<s-s:s>',
    (str: string | undefined, c: string) => (str === undefined ? undefined : str.indexOf(c) > -1 ? str.substr(str.indexOf(c) + c.length) : str),
  ],
  lowercase: ['<s-:s>', undef((s: string) => s.toLowerCase())],
  uppercase: ['<s-:s>', undef((s: string) => s.toUpperCase())],
  length: ['<s-:n>', undef((s: string) => chars(s).length)],
  trim: ['<s-:s>', trim],
  contains: ['<s-(sf):b>', contains],
  split: ['<s-(sf)n?:a<s>>', split],
  match: ['<s-f<s:o>n?:a<o>>', match],
  join: ['<a<s>s?:s>', (strs: string[] | undefined, sep?: string) => (strs === undefined ? undefined : strs.join(sep === undefined ? '' : sep))],
  replace: ['<s-(sf)(sf)n?:s>', replace],
  number: ['<(nsb)-:n>', number],
  abs: ['<n-:n>', undef(Math.abs)],
  floor: ['<n-:n>', undef(Math.floor)],
  ceil: ['<n-:n>', undef(Math.ceil)],
  sum: ['<a<n>:n>', (args: number[] | undefined) => (args === undefined ? undefined : args.reduce((t, n) => t + n, 0))],
  max: ['<a<n>:n>', (args: number[] | undefined) => (args === undefined || args.length === 0 ? undefined : Math.max(...args))],
  min: ['<a<n>:n>', (args: number[] | undefined) => (args === undefined || args.length === 0 ? undefined : Math.min(...args))],
  average: ['<a<n>:n>', (args: number[] | undefined) => (args === undefined || args.length === 0 ? undefined : args.reduce((t, n) => t + n, 0) / args.length)],
  count: ['<a:n>', (args: unknown[] | undefined) => (args === undefined ? 0 : args.length)],
  exists: ['<x:b>', (arg: unknown) => arg !== undefined],
  boolean: ['<x-:b>', boolean],
  not: ['<x-:b>', (arg: unknown) => (arg === undefined ? undefined : !boolean(arg))],
  lookup: ['<x-s:x>', lookup],
  append: ['<xx:a>', append],
  keys: ['<x-:a<s>>', keys],
  error: ['<s?:x>', () => bail()],
  map: ['<af>', hof.map],
  filter: ['<af>', hof.filter],
  single: ['<af?>', hof.single],
  reduce: ['<afj?:j>', hof.reduce],
  each: ['<o-f:a>', hof.each],
  sift: ['<o-f?:o>', hof.sift],
  sort: ['<af?:a>', hof.sort],
};

/** The built-ins whose arguments may be functions: the higher-order ones, and those taking a regex. */
const TAKES_FUNCTIONS = new Set(['contains', 'split', 'match', 'replace', 'map', 'filter', 'single', 'reduce', 'each', 'sift', 'sort']);

/** name (without `$`) → built-in; a fresh map so callers may add or remove names. */
export function builtins(): Map<string, Builtin> {
  return new Map(
    Object.entries(table).map(([name, [sig, fn]]) => [
      name,
      { signature: parseSignature(sig), fn: fn as Builtin['fn'], takesFunctions: TAKES_FUNCTIONS.has(name) },
    ]),
  );
}
