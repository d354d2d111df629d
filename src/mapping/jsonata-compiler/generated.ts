/**
 * The hottest nodes of a mapping — field names, object and array constructors, conditions, calls of library
 * functions (`MRN`, `{"a": …}`, `[x, y]`, `A ? B`, `$name(LAST)`) — as code generated per node. A closure made per
 * node shares its code, and so V8's type feedback, with every other node of the kind: one megamorphic site for all
 * fields read, all values called, all keys stored. Generated, each node has its own sites (a field read is then a
 * plain property load on the rows' one shape; objects and arrays build ~4× faster; a library function is inlined
 * where it is called). What goes into the code is the node's shape only — key literals through JSON.stringify, the
 * child closures and helpers as parameters — never data. Design: docs/design/mapping-evaluation.md.
 */
import { bail, normalize } from './runtime.js';
import type { Env, Fn } from './types.js';

/** Values past which the loop is used (a generated function that large gains nothing). */
const MAX_GENERATED = 64;

/**
 * A path of one field name (`MRN`, `name`) on an object: its own value, `undefined` when it has none
 * or the object is a JSONata function; a sequence held in the field goes to `generic` (the full path semantics).
 */
export function fieldReader(key: string, generic: Fn): Fn {
  const k = JSON.stringify(key);
  const body = `if (input === null || typeof input !== 'object') return undefined;
if (Array.isArray(input)) return generic(input, env);
const v = input[${k}];
if (v === undefined || !has.call(input, ${k}) || input._jsonata_function === true || input._jsonata_lambda === true) return undefined;
return Array.isArray(v) && v.sequence === true ? generic(input, env) : v;`;
  const make = new Function('generic', 'has', `return (input, env) => {\n${body}\n};`) as (g: Fn, has: typeof Object.prototype.hasOwnProperty) => Fn;
  return make(generic, Object.prototype.hasOwnProperty);
}

/** `(input, env)` → the object of one item: each value evaluated in key order, stored when defined. */
export function objectBuilder(keys: string[], values: Fn[]): (input: unknown, env: Env) => Record<string, unknown> {
  if (keys.length > MAX_GENERATED) {
    return (input, env) => {
      const result: Record<string, unknown> = {};
      for (let i = 0; i < keys.length; i++) {
        const value = values[i]!(input, env);
        if (value !== undefined) result[keys[i]!] = value;
      }
      return result;
    };
  }
  const stores = keys.map((k, i) => `v = f${i}(input, env); if (v !== undefined) r[${JSON.stringify(k)}] = v;`);
  return generate(values, `const r = {}; let v;\n${stores.join('\n')}\nreturn r;`);
}

export interface ArrayItem {
  fn: Fn;
  /** An array constructor itself (`[[1, 2]]`): pushed as one item, not spread. */
  nested: boolean;
}

/** `[a, b, …]`: each item's value appended (an array spread, as `fn.append` concatenates; `undefined` skipped). */
export function arrayBuilder(items: ArrayItem[], cons: boolean): Fn {
  const mark = (result: unknown[]) => {
    if (cons) Object.defineProperty(result, 'cons', { enumerable: false, configurable: false, value: true });
    return result;
  };
  if (items.length > MAX_GENERATED) {
    return (input, env) => {
      const result: unknown[] = [];
      for (const item of items) {
        const v = item.fn(input, env);
        if (v === undefined) continue;
        if (item.nested || !Array.isArray(v)) result.push(v);
        else for (let i = 0; i < v.length; i++) result.push(v[i]); // fn.append: concat onto a fresh plain array
      }
      return mark(result);
    };
  }
  const pushes = items.map((item, i) =>
    item.nested
      ? `v = f${i}(input, env); if (v !== undefined) r.push(v);`
      : `v = f${i}(input, env); if (v !== undefined) { if (!Array.isArray(v)) r.push(v); else for (let i = 0; i < v.length; i++) r.push(v[i]); }`,
  );
  const build = generate(
    items.map((item) => item.fn),
    `const r = []; let v;\n${pushes.join('\n')}\nreturn r;`,
  );
  return cons ? (input, env) => mark(build(input, env) as unknown[]) : build;
}

/** `(input, env) => { body }` with the closures `fns` bound to `f0`, `f1`, …. */
function generate<R>(fns: Fn[], body: string): (input: unknown, env: Env) => R {
  const params = fns.map((_f, i) => `f${i}`);
  const make = new Function(...params, `return (input, env) => {\n${body}\n};`) as (...f: Fn[]) => (input: unknown, env: Env) => R;
  return make(...fns);
}

/**
 * A call of a function that takes no function argument and checks none itself (`direct`): the arguments in order,
 * any of them a function → BAIL (the interpreter wraps those), the result a promise → BAIL; `withTail`: then the
 * sequence tail. What compileCall's loop does, with a call site of its own for each argument and the function.
 */
export function directCall(args: Fn[], direct: (...args: unknown[]) => unknown, withTail: boolean): Fn {
  const isFn = (i: number) =>
    `(v${i} !== null && v${i} !== undefined && (v${i}._jsonata_function === true || v${i}._jsonata_lambda === true)) || typeof v${i} === 'function'`;
  const reads = args.map((_a, i) => `const v${i} = f${i}(input, env); if (${isFn(i)}) return bail();`);
  const body = `${reads.join('\n')}
const r = direct(${args.map((_a, i) => `v${i}`).join(', ')});
if (r !== null && typeof r === 'object' && typeof r.then === 'function') return bail();
return ${withTail ? 'Array.isArray(r) && r.sequence === true ? normalize(r, false) : r' : 'r'};`;
  const params = args.map((_a, i) => `f${i}`);
  const make = new Function('direct', 'bail', 'normalize', ...params, `return (input, env) => {\n${body}\n};`) as (...f: unknown[]) => Fn;
  return make(direct, bail, normalize, ...args);
}

/**
 * `c ? t : e` (`e` optional): JSONata's truthiness of the condition (`boolean`, with a text tested inline — the
 * usual `COLUMN ? …`), then the branch; nothing when the condition is false and there is no `else`.
 */
export function conditional(c: Fn, t: Fn, e: Fn | undefined, boolean: (v: unknown) => boolean | undefined): Fn {
  const body = `const v = c(input, env);
if (typeof v === 'string' ? v.length > 0 : boolean(v)) return t(input, env);
return ${e ? 'e(input, env)' : 'undefined'};`;
  const make = new Function('c', 't', 'e', 'boolean', `return (input, env) => {\n${body}\n};`) as (...f: unknown[]) => Fn;
  return make(c, t, e, boolean);
}
