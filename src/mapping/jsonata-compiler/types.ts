import type { Signature } from './signature.js';

/**
 * Variables of one scope that needs its own storage per evaluation (the expression, a lambda call, a block that
 * defines a lambda): `:=` and parameter slots resolved at compile time; index 0 is the enclosing frame.
 */
export type Frame = unknown[];

/** Per-evaluation state: the current frame, `$$`, evaluate()'s bindings, and the lambda call guards. */
export interface Env {
  frame: Frame;
  root: unknown;
  bindings: Readonly<Record<string, unknown>> | undefined;
  /** Lambda calls so far in this evaluation, and how many are active (nested). */
  calls: number;
  depth: number;
}

/**
 * A function as a value in compiled code (a lambda, a built-in named as a value, a regex literal): called with its
 * arguments evaluated; `arity` is what JSONata's `$map` & co. read to decide how many arguments to pass.
 */
export type FunctionValue = ((args: unknown[]) => unknown) & { arity: number };

/** A compiled node: what the interpreter's `evaluate(node, input, environment)` returns. */
export type Fn = (input: unknown, env: Env) => unknown;

/** A function the compiled code may call directly. `call` gets the arguments already evaluated. */
export interface CallableFunction {
  /** JSONata signature; the arguments are checked (and fixed up) with it before the call, BAIL on mismatch. */
  signature?: Signature;
  /** Number of arguments a call may pass for it to be compiled (others stay on the interpreter). */
  maxArgs?: number;
  /** JSONata's arity of the built-in (its implementation's `length`): when known, the name may be used as a value. */
  arity?: number;
  /** For a built-in that checks its arguments itself (JSONata's own): its signature, read for `readsContext` only. */
  contextSignature?: Signature;
  /** Arguments may be functions (`$map` & co., a regex for `$match` & co.); else a function argument BAILs. */
  takesFunctions?: boolean;
  call(args: unknown[], input: unknown, env: Env): unknown;
  /**
   * The implementation itself, when it needs neither `this`, the input nor the env and answers synchronously (a
   * promise → BAIL): a plain call may then invoke it straight from generated code (generated.ts).
   */
  direct?: (...args: unknown[]) => unknown;
}

export interface CompileOptions {
  /** Functions compiled calls may use, by name without `$`. */
  functions: ReadonlyMap<string, CallableFunction>;
  /**
   * Every name bound to a function when the expression runs (JSONata's built-ins, registered functions): such a
   * name used as a value, or called without an entry in `functions`, keeps the expression on the interpreter.
   */
  functionNames: ReadonlySet<string>;
  /** Values given to `expr.assign()` (lookup tables): constants. */
  assigned: Readonly<Record<string, unknown>>;
  /** Names passed in evaluate()'s `bindings` at run time (they win over `assigned` and functions). */
  bindingNames: ReadonlySet<string>;
}

/** The compiled expression: evaluate(input, bindings), synchronous; throws on anything it does not handle. */
export type CompiledExpression = (input: unknown, bindings?: Readonly<Record<string, unknown>>) => unknown;
