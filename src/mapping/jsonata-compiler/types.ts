import type { Signature } from './signature.js';

/** Per-evaluation state: `:=` slots (one per binding site, resolved at compile time), `$$`, evaluate()'s bindings. */
export interface Env {
  slots: unknown[];
  root: unknown;
  bindings: Readonly<Record<string, unknown>> | undefined;
}

/** A compiled node: what the interpreter's `evaluate(node, input, environment)` returns. */
export type Fn = (input: unknown, env: Env) => unknown;

/** A function the compiled code may call directly. `call` gets the arguments already evaluated. */
export interface CallableFunction {
  /** JSONata signature; the arguments are checked (and fixed up) with it before the call, BAIL on mismatch. */
  signature?: Signature;
  /** Number of arguments a call may pass for it to be compiled (others stay on the interpreter). */
  maxArgs?: number;
  call(args: unknown[], input: unknown, env: Env): unknown;
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
