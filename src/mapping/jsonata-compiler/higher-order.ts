/**
 * JSONata's higher-order built-ins (`$map`, `$filter`, `$single`, `$reduce`, `$each`, `$sift`, `$sort`), jsonata
 * 2.2's code made synchronous, over compiled function values. How many arguments a function gets follows its
 * arity, as `hofFuncArgs` does; a comparator's result is read with JavaScript truthiness, as `$sort` does.
 */
import { bail, boolean, isArrayOfNumbers, seq } from './runtime.js';
import type { FunctionValue } from './types.js';

function funcArgs(func: FunctionValue, value: unknown, position: unknown, whole: unknown): unknown[] {
  const args = [value];
  if (func.arity >= 2) args.push(position);
  if (func.arity >= 3) args.push(whole);
  return args;
}

const keysOf = (v: unknown): string[] => (typeof v === 'object' && v !== null ? Object.keys(v) : []);

export function map(arr: unknown[] | undefined, func: FunctionValue): unknown {
  if (arr === undefined) return undefined;
  const result = seq();
  for (let i = 0; i < arr.length; i++) {
    const res = func(funcArgs(func, arr[i], i, arr));
    if (res !== undefined) result.push(res);
  }
  return result;
}

export function filter(arr: unknown[] | undefined, func: FunctionValue): unknown {
  if (arr === undefined) return undefined;
  const result = seq();
  for (let i = 0; i < arr.length; i++) if (boolean(func(funcArgs(func, arr[i], i, arr)))) result.push(arr[i]);
  return result;
}

export function single(arr: unknown[] | undefined, func?: FunctionValue): unknown {
  if (arr === undefined) return undefined;
  let found = false;
  let result: unknown;
  for (let i = 0; i < arr.length; i++) {
    const positive = func === undefined ? true : boolean(func(funcArgs(func, arr[i], i, arr)));
    if (!positive) continue;
    if (found) bail(); // D3138
    result = arr[i];
    found = true;
  }
  if (!found) bail(); // D3139
  return result;
}

export function reduce(sequence: unknown[] | undefined, func: FunctionValue, init?: unknown): unknown {
  if (sequence === undefined) return undefined;
  if (func.arity < 2) bail(); // D3050
  let result: unknown;
  let index: number;
  if (init === undefined && sequence.length > 0) {
    result = sequence[0];
    index = 1;
  } else {
    result = init;
    index = 0;
  }
  for (; index < sequence.length; index++) {
    const args = [result, sequence[index]];
    if (func.arity >= 3) args.push(index);
    if (func.arity >= 4) args.push(sequence);
    result = func(args);
  }
  return result;
}

export function each(obj: unknown, func: FunctionValue): unknown {
  const result = seq();
  for (const key of keysOf(obj)) {
    const val = func(funcArgs(func, (obj as Record<string, unknown>)[key], key, obj));
    if (val !== undefined) result.push(val);
  }
  return result;
}

export function sift(obj: unknown, func: FunctionValue): unknown {
  const result: Record<string, unknown> = Object.create(null);
  for (const key of keysOf(obj)) {
    const entry = (obj as Record<string, unknown>)[key];
    if (boolean(func(funcArgs(func, entry, key, obj)))) result[key] = entry;
  }
  return keysOf(result).length === 0 ? undefined : result;
}

/** `$sort`: JSONata's merge sort (the comparator says "swap" when truthy), so equal items keep their order. */
export function sort(arr: unknown[] | undefined, comparator?: FunctionValue): unknown {
  if (arr === undefined) return undefined;
  if (arr.length <= 1) return arr;
  let swap: (a: unknown, b: unknown) => unknown;
  if (comparator === undefined) {
    if (!isArrayOfNumbers(arr) && !arr.every((v) => typeof v === 'string')) bail(); // D3070
    swap = (a, b) => (a as number) > (b as number);
  } else {
    swap = (a, b) => comparator([a, b]);
  }
  const merge = (left: unknown[], right: unknown[]): unknown[] => {
    const merged: unknown[] = [];
    let l = 0;
    let r = 0;
    while (l < left.length && r < right.length) merged.push(swap(left[l], right[r]) ? right[r++] : left[l++]);
    while (l < left.length) merged.push(left[l++]);
    while (r < right.length) merged.push(right[r++]);
    return merged;
  };
  const msort = (a: unknown[]): unknown[] => {
    if (a.length <= 1) return a;
    const middle = Math.floor(a.length / 2);
    return merge(msort(a.slice(0, middle)), msort(a.slice(middle)));
  };
  return msort(arr);
}
