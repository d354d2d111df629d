/**
 * Value semantics of JSONata 2.2 (node_modules/jsonata/jsonata.js), ported line for line but synchronous, for the
 * compiled closures. Sequences are arrays flagged exactly as the interpreter flags them (`sequence`,
 * `keepSingleton`, `outerWrapper` enumerable, `cons` not), because later steps read those flags (singleton
 * unwrapping, flattening). Wherever the interpreter would throw, these throw BAIL: the row is then evaluated again
 * by the interpreter, which produces the real error (code, position, message).
 */

/** Thrown by compiled code for anything it does not handle; caught by its caller, which then runs the interpreter. */
export const BAIL: unique symbol = Symbol('jsonata-compiler bail');

export function bail(): never {
  throw BAIL;
}

export type Seq = unknown[] & { sequence?: boolean; keepSingleton?: boolean; outerWrapper?: boolean; cons?: boolean; tupleStream?: boolean };

/** `createSequence()` (the project never sets JSONata's `sequence` option, so `push` is the plain one). */
export function seq(): Seq {
  const s: Seq = [];
  s.sequence = true;
  return s;
}

/** `createSequence(x)`: a sequence of exactly one item, even `undefined`. */
export function seq1(x: unknown): Seq {
  const s: Seq = [x];
  s.sequence = true;
  return s;
}

export function isSequence(v: unknown): v is Seq {
  return Array.isArray(v) && (v as Seq).sequence === true;
}

export function isFunction(v: unknown): boolean {
  return (
    (v !== null &&
      v !== undefined &&
      ((v as { _jsonata_function?: unknown })._jsonata_function === true || (v as { _jsonata_lambda?: unknown })._jsonata_lambda === true)) ||
    typeof v === 'function'
  );
}

/** `isNumeric`: NaN is not numeric; ±Infinity is an error (D1001). */
export function isNumeric(n: unknown): n is number {
  if (typeof n !== 'number') return false;
  if (Number.isNaN(n)) return false;
  if (!Number.isFinite(n)) bail();
  return true;
}

/** Every item is checked (as JSONata's `filter` does): an Infinity anywhere is D1001 even after a string. */
export function isArrayOfNumbers(v: unknown): boolean {
  if (!Array.isArray(v)) return false;
  return v.filter((x) => !isNumeric(x)).length === 0;
}

/** The tail of `evaluate()`: flags `keepSingleton`, unwraps empty and singleton sequences. */
export function normalize(result: unknown, keepArray: boolean): unknown {
  if (result && isSequence(result) && !result.tupleStream) {
    if (keepArray) result.keepSingleton = true;
    if (result.length === 0) return undefined;
    if (result.length === 1) return result.keepSingleton ? result : result[0];
  }
  return result;
}

/** `fn.lookup` (a field name step). */
export function lookup(input: unknown, key: string): unknown {
  if (Array.isArray(input)) {
    const result = seq();
    for (let i = 0; i < input.length; i++) {
      const res = lookup(input[i], key);
      if (res !== undefined) {
        if (Array.isArray(res)) res.forEach((v) => result.push(v));
        else result.push(res);
      }
    }
    return result;
  }
  if (input !== null && typeof input === 'object' && Object.prototype.hasOwnProperty.call(input, key) && !isFunction(input)) {
    return (input as Record<string, unknown>)[key];
  }
  return undefined;
}

/** `fn.append`. */
export function append(arg1: unknown, arg2: unknown): unknown {
  if (arg1 === undefined) return arg2;
  if (arg2 === undefined) return arg1;
  const a1 = Array.isArray(arg1) ? arg1 : seq1(arg1);
  const a2 = Array.isArray(arg2) ? arg2 : [arg2];
  return a1.concat(a2);
}

/** `append(…append(items[0], items[1])…, items[n-1])` in one pass: what that chain of concatenations returns. */
export function appendAll(items: unknown[]): unknown {
  let data = items[0];
  let owned = false; // data is a fresh plain array of ours, safe to push onto
  for (let i = 1; i < items.length; i++) {
    const item = items[i];
    if (item === undefined) continue;
    if (data === undefined) {
      data = item;
      owned = false;
      continue;
    }
    if (!owned) {
      data = Array.isArray(data) ? Array.prototype.slice.call(data) : [data];
      owned = true;
    }
    if (Array.isArray(item)) for (let j = 0; j < item.length; j++) (data as unknown[]).push(item[j]);
    else (data as unknown[]).push(item);
  }
  return data;
}

/** `fn.boolean`: undefined stays undefined. */
export function boolean(arg: unknown): boolean | undefined {
  if (arg === undefined) return undefined;
  let result = false;
  if (Array.isArray(arg)) {
    if (arg.length === 1) result = boolean(arg[0]) as boolean;
    else if (arg.length > 1) result = arg.filter((v) => boolean(v)).length > 0;
  } else if (typeof arg === 'string') {
    result = arg.length > 0;
  } else if (isNumeric(arg)) {
    result = arg !== 0;
  } else if (arg !== null && typeof arg === 'object' && !isFunction(arg)) {
    result = Object.keys(arg).length > 0;
  } else if (arg === true) {
    result = true;
  }
  return result;
}

/** `boolize` (`and` / `or`). */
export function boolize(v: unknown): boolean {
  return boolean(v) ?? false;
}

/** `fn.string` (functions → "", non-finite numbers → D3001, non-integers to 15 significant digits). */
export function string(arg: unknown, prettify = false): string | undefined {
  if (arg === undefined) return undefined;
  if (typeof arg === 'string') return arg;
  if (isFunction(arg)) return '';
  if (typeof arg === 'number' && !Number.isFinite(arg)) bail();
  let v = arg;
  if (Array.isArray(v) && (v as Seq).outerWrapper) v = v[0];
  return JSON.stringify(
    v,
    (_k, val: unknown) => {
      if (val !== undefined && val !== null && isNumeric(val)) return !Number.isInteger(val) ? Number(val.toPrecision(15)) : val;
      return val && isFunction(val) ? '' : val;
    },
    prettify ? 2 : 0,
  ) as string;
}

export function isDeepEqual(lhs: unknown, rhs: unknown): boolean {
  if (typeof lhs === 'function' || typeof rhs === 'function') bail(); // the interpreter compares its own function objects
  if (lhs === rhs) return true;
  if (typeof lhs === 'object' && typeof rhs === 'object' && lhs !== null && rhs !== null) {
    if (Array.isArray(lhs) && Array.isArray(rhs)) {
      if (lhs.length !== rhs.length) return false;
      for (let i = 0; i < lhs.length; i++) if (!isDeepEqual(lhs[i], rhs[i])) return false;
      return true;
    }
    const lkeys = Object.getOwnPropertyNames(lhs).sort();
    const rkeys = Object.getOwnPropertyNames(rhs).sort();
    if (lkeys.length !== rkeys.length) return false;
    for (let i = 0; i < lkeys.length; i++) if (lkeys[i] !== rkeys[i]) return false;
    for (const k of lkeys) if (!isDeepEqual((lhs as Record<string, unknown>)[k], (rhs as Record<string, unknown>)[k])) return false;
    return true;
  }
  return false;
}

// ------------------------------------------------------------------------------------------- operators

export function numeric(lhs: unknown, rhs: unknown, op: string): number | undefined {
  if (lhs !== undefined && !isNumeric(lhs)) bail(); // T2001
  if (rhs !== undefined && !isNumeric(rhs)) bail(); // T2002
  if (lhs === undefined || rhs === undefined) return undefined;
  const l = lhs as number;
  const r = rhs as number;
  switch (op) {
    case '+':
      return l + r;
    case '-':
      return l - r;
    case '*':
      return l * r;
    case '/':
      return l / r;
    default:
      return l % r;
  }
}

export function equality(lhs: unknown, rhs: unknown, op: string): boolean {
  if (lhs === undefined || rhs === undefined) return false;
  return op === '=' ? isDeepEqual(lhs, rhs) : !isDeepEqual(lhs, rhs);
}

export function comparison(lhs: unknown, rhs: unknown, op: string): boolean | undefined {
  const lt = typeof lhs;
  const rt = typeof rhs;
  const lc = lt === 'undefined' || lt === 'string' || lt === 'number';
  const rc = rt === 'undefined' || rt === 'string' || rt === 'number';
  if (!lc || !rc) bail(); // T2010
  if (lt === 'undefined' || rt === 'undefined') return undefined;
  if (lt !== rt) bail(); // T2009
  const l = lhs as string | number;
  const r = rhs as string | number;
  switch (op) {
    case '<':
      return l < r;
    case '<=':
      return l <= r;
    case '>':
      return l > r;
    default:
      return l >= r;
  }
}

export function includes(lhs: unknown, rhs: unknown): boolean {
  if (lhs === undefined || rhs === undefined) return false;
  if (typeof lhs === 'function') bail();
  const r = Array.isArray(rhs) ? rhs : [rhs];
  for (let i = 0; i < r.length; i++) if (r[i] === lhs) return true;
  return false;
}

export function concat(lhs: unknown, rhs: unknown): string {
  const l = lhs !== undefined ? (string(lhs) as string) : '';
  const r = rhs !== undefined ? (string(rhs) as string) : '';
  return l.concat(r);
}

/** Unary minus. */
export function negate(v: unknown): number | undefined {
  if (v === undefined) return undefined;
  if (isNumeric(v)) return -v;
  return bail(); // D1002
}
