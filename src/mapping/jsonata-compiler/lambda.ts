/**
 * Functions as values in compiled code: lambdas (`function($x) { … }`, closures over the frame they are defined
 * in, evaluated against the input they were defined on — as JSONata's `applyProcedure`), and JSONata's built-ins
 * named as values (`$map(xs, $trim)`). Lambda calls are bounded per evaluation: past `MAX_CALLS` calls, or nested
 * deeper than the interpreter's stack guard could allow, the row BAILs and the interpreter (with its time and
 * depth guards) decides.
 */
import { bail } from './runtime.js';
import type { CallableFunction, Env, Fn, Frame, FunctionValue } from './types.js';

/** Lambda calls one evaluation may make before it is left to the interpreter (which has the time limit). */
const MAX_CALLS = 10_000;

/** Marks the built-ins given as values: the interpreter hands them unwrapped to a tail call, which then fails. */
export const NATIVE: unique symbol = Symbol('built-in as a value');

export interface LambdaShape {
  body: Fn;
  params: number;
  /** Slots of the lambda's frame (index 0 is the enclosing frame), known once the body is compiled. */
  frame: { size: number };
  /** Deepest nesting of lambda calls that stays well within the interpreter's stack guard. */
  limits: { depth: number };
}

export function lambdaValue(shape: LambdaShape, input: unknown, env: Env): FunctionValue {
  const captured = env.frame;
  const { body, params, frame, limits } = shape;
  const fn = ((args: unknown[]) => {
    if (++env.calls > MAX_CALLS || ++env.depth > limits.depth) bail();
    const f: Frame = new Array(frame.size);
    f[0] = captured;
    for (let i = 0; i < params; i++) f[i + 1] = args[i];
    const saved = env.frame;
    env.frame = f;
    const result = body(input, env);
    env.frame = saved;
    env.depth--;
    return result;
  }) as FunctionValue;
  fn.arity = params;
  return fn;
}

/** A built-in named as a value: JSONata's closure around it validates the arguments with no context (`null`). */
export function builtinValue(impl: CallableFunction, arity: number, env: Env): FunctionValue {
  const fn = ((args: unknown[]) => {
    if (impl.maxArgs !== undefined && args.length > impl.maxArgs) bail(); // as for a call (`$toMillis` with a picture)
    return impl.call(impl.signature ? impl.signature.validate(args, null) : args, null, env);
  }) as FunctionValue;
  fn.arity = arity;
  (fn as unknown as Record<symbol, boolean>)[NATIVE] = true;
  return fn;
}

export function isNativeValue(v: unknown): boolean {
  return typeof v === 'function' && (v as unknown as Record<symbol, unknown>)[NATIVE] === true;
}

/** A slot `hops` frames up from the current one. */
export function slotReader(hops: number, slot: number): Fn {
  if (hops === 0) return (_input, env) => env.frame[slot];
  if (hops === 1) return (_input, env) => (env.frame[0] as Frame)[slot];
  return (_input, env) => {
    let f = env.frame;
    for (let h = 0; h < hops; h++) f = f[0] as Frame;
    return f[slot];
  };
}

/** A block's slot read from a lambda: its value once the `:=` has run (a hole before), else `outer`. */
export function boundOr(hops: number, slot: number, outer: Fn): Fn {
  return (input, env) => {
    let f = env.frame;
    for (let h = 0; h < hops; h++) f = f[0] as Frame;
    return slot in f ? f[slot] : outer(input, env);
  };
}

/** Whether a value holds a function anywhere (the interpreter's result would hold its lambda objects). */
export function holdsFunction(v: unknown): boolean {
  if (typeof v === 'function') return true;
  if (v === null || typeof v !== 'object') return false;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) if (holdsFunction(v[i])) return true;
    return false;
  }
  for (const k in v) if (Object.prototype.hasOwnProperty.call(v, k) && holdsFunction((v as Record<string, unknown>)[k])) return true;
  return false;
}

/** Whether an AST holds a lambda definition (tail-call thunks are not closures). */
export function definesLambda(node: unknown): boolean {
  if (node === null || typeof node !== 'object') return false;
  if (Array.isArray(node)) return node.some(definesLambda);
  const n = node as Record<string, unknown>;
  if (n.type === 'lambda' && n.thunk !== true) return true;
  for (const k in n) if (k !== 'position' && k !== 'value' && definesLambda(n[k])) return true;
  return false;
}
