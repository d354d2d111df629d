/**
 * Location paths, predicates and object constructors: `evaluatePath`, `evaluateStep`, `evaluateFilter` and
 * `evaluateGroupExpression` of jsonata 2.2, synchronous, over compiled steps. Tuple streams (`@$x`, `#$i`, `%`)
 * and order-by are not compiled (the caller refuses them before reaching here).
 */
import { append, appendAll, bail, boolean, isArrayOfNumbers, isNumeric, isSequence, seq, seq1, type Seq } from './runtime.js';
import type { Env, Fn } from './types.js';
import { objectBuilder } from './generated.js';

/** A compiled predicate `[…]`: the filtered sequence (or, for a numeric literal index that hits an array, that array). */
export type Filter = (input: unknown, env: Env) => unknown;

export function indexFilter(value: number): Filter {
  return (input) => {
    const results = seq();
    const arr = (Array.isArray(input) ? input : seq1(input)) as unknown[];
    let index = Math.floor(value);
    if (index < 0) index = arr.length + index;
    const item = arr[index];
    if (item !== undefined) {
      if (Array.isArray(item)) return item;
      results.push(item);
    }
    return results;
  };
}

export function predicateFilter(predicate: Fn): Filter {
  return (input, env) => {
    const results = seq();
    const arr = (Array.isArray(input) ? input : seq1(input)) as unknown[];
    for (let index = 0; index < arr.length; index++) {
      const item = arr[index];
      let res = predicate(item, env);
      if (isNumeric(res)) res = [res];
      if (isArrayOfNumbers(res)) {
        (res as number[]).forEach((ires) => {
          let ii = Math.floor(ires);
          if (ii < 0) ii = arr.length + ii;
          if (ii === index) results.push(item);
        });
      } else if (boolean(res)) {
        results.push(item);
      }
    }
    return results;
  };
}

export interface Step {
  /** The step's own evaluation (its predicates, group and sequence tail included). */
  fn: Fn;
  /** Predicates that follow the step inside the path (`a.b[x]`): applied to each item's result. */
  stages: Filter[];
  consarray: boolean;
}

/** `evaluateStep` (not order-by). */
function evaluateStep(step: Step, input: Seq, env: Env, lastStep: boolean): unknown {
  const result = seq();
  for (let ii = 0; ii < input.length; ii++) {
    let res = step.fn(input[ii], env);
    for (const stage of step.stages) res = stage(res, env);
    if (res !== undefined) result.push(res);
  }
  if (lastStep && result.length === 1 && Array.isArray(result[0]) && !isSequence(result[0])) return result[0];
  const out = seq();
  result.forEach((res) => {
    if (!Array.isArray(res) || (res as Seq).cons) out.push(res);
    else res.forEach((v) => out.push(v));
  });
  return out;
}

export interface PathOptions {
  steps: Step[];
  firstIsVariable: boolean;
  keepSingletonArray: boolean;
  group?: GroupFn;
}

/** `evaluatePath` without tuple streams. */
export function pathFn({ steps, firstIsVariable, keepSingletonArray, group }: PathOptions): Fn {
  const last = steps.length - 1;
  return (input, env) => {
    let inputSequence: unknown = Array.isArray(input) && !firstIsVariable ? input : seq1(input);
    let resultSequence: unknown;
    for (let ii = 0; ii <= last; ii++) {
      const step = steps[ii]!;
      if (ii === 0 && step.consarray) resultSequence = step.fn(inputSequence, env);
      else resultSequence = evaluateStep(step, inputSequence as Seq, env, ii === last);
      if (resultSequence === undefined || (resultSequence as unknown[]).length === 0) break;
      inputSequence = resultSequence;
    }
    if (keepSingletonArray) {
      let rs = resultSequence as Seq;
      if (Array.isArray(rs) && rs.cons && !rs.sequence) rs = seq1(rs);
      if (rs === undefined || rs === null) return bail(); // JSONata: a TypeError
      rs.keepSingleton = true;
      resultSequence = rs;
    }
    return group ? group(resultSequence, env) : resultSequence;
  };
}

export type GroupFn = (input: unknown, env: Env) => Record<string, unknown>;

/**
 * `{ "a": …, "b": … }` with distinct literal keys, the usual object constructor: for one input item (not an array)
 * every key gets that item, so the grouping bookkeeping reduces to evaluating each value. The result is a plain
 * object (JSONata's has no prototype; no key here is `__proto__`, the one name where that shows).
 */
export function literalGroupFn(keys: string[], values: Fn[], generic: GroupFn): GroupFn {
  const build = objectBuilder(keys, values);
  return (input, env) => {
    if (Array.isArray(input)) return input.length === 0 ? generic(input, env) : allItemsGroup(keys, values, input, env);
    return build(input, env);
  };
}

/**
 * The same constructor over an array: every literal key collects every item, so `evaluateGroupExpression`'s
 * item-by-item `append` (quadratic in the items) comes to the items appended once — per key, as it builds them.
 */
function allItemsGroup(keys: string[], values: Fn[], items: unknown[], env: Env): Record<string, unknown> {
  const result: Record<string, unknown> = {};
  for (let i = 0; i < keys.length; i++) {
    const value = values[i]!(appendAll(items), env);
    if (value !== undefined) result[keys[i]!] = value;
  }
  return result;
}

/** `evaluateGroupExpression` (an object constructor `{k: v}`, or a grouping `path{k: v}`) without tuple streams. */
export function groupFn(pairs: [Fn, Fn][]): GroupFn {
  return (input, env) => {
    const result: Record<string, unknown> = Object.create(null);
    const groups: Record<string, { data: unknown; exprIndex: number }> = Object.create(null);
    const items = (Array.isArray(input) ? input : seq1(input)) as unknown[];
    if (items.length === 0) {
      // JSONata pushes that `undefined` into the input array itself: a record's own `[]` becomes `[undefined]`, and
      // which sibling values see it depends on the interpreter's interleaved evaluation (`{"n": $count(e), "g": e{…}}`).
      if (!isSequence(items)) bail();
      items.push(undefined);
    }
    for (let itemIndex = 0; itemIndex < items.length; itemIndex++) {
      const item = items[itemIndex];
      for (let pairIndex = 0; pairIndex < pairs.length; pairIndex++) {
        const key = pairs[pairIndex]![0](item, env);
        if (key === undefined) continue;
        if (typeof key !== 'string') bail(); // T1003
        if (key === '_jsonata_lambda' || key === '_jsonata_function') bail(); // D1013
        if (Object.prototype.hasOwnProperty.call(groups, key)) {
          if (groups[key]!.exprIndex !== pairIndex) bail(); // D1009
          groups[key]!.data = append(groups[key]!.data, item);
        } else {
          groups[key] = { data: item, exprIndex: pairIndex };
        }
      }
    }
    for (const key of Object.keys(groups)) {
      const entry = groups[key]!;
      const value = pairs[entry.exprIndex]![1](entry.data, env);
      if (value !== undefined) result[key] = value;
    }
    return result;
  };
}
