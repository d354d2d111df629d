/**
 * Compiles the common subset of JSONata to synchronous JS closures (see compile.ts for the subset). The
 * interpreter stays the reference: compiled code throws on anything it is not sure of, and its caller then
 * evaluates that row with the interpreter (src/mapping/expression-evaluator.ts).
 */
import { builtins } from './builtins.js';
import { nativeArity, nativeCallables } from './natives.js';
import type { CallableFunction } from './types.js';

export { compileExpression, type CompileResult } from './compile.js';
export { bail, boolize } from './runtime.js';
export { parseSignature } from './signature.js';
export type { CallableFunction, CompileOptions, CompiledExpression } from './types.js';

/** JSONata's built-ins the compiler implements, as callables (name without `$`). */
export function builtinCallables(): Map<string, CallableFunction> {
  const out = nativeCallables();
  for (const [name, b] of builtins()) {
    out.set(name, { signature: b.signature, arity: nativeArity(name), takesFunctions: b.takesFunctions, call: (args) => b.fn(...args) });
  }
  return out;
}
