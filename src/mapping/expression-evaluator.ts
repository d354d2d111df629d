/**
 * One mapping expression at run time: its compiled JS closure when the expression is in the compiled subset
 * (src/mapping/jsonata-compiler), else — and for every row on which the closure bails — JSONata's interpreter.
 * The interpreter keeps the guards (time limit, depth) and produces every error, so rejects read the same with
 * the compiler on or off. `CARE_JSONATA_COMPILE=0` turns the compiler off (the bench's "previous version").
 */
import type jsonata from 'jsonata';
import { LINEAR_REGEX_ENGINE } from '../core/linear-regex.js';
import { redactValues } from '../core/secret.js';
import { issue, type KnownIssueCode, type Location } from '../core/issues.js';
import { MappingEvalError, MappingFunctionError, RefError, type ExpressionRole } from './errors.js';
import { CTX_BINDING, JSONATA_BUILTINS, LIBRARY_FUNCTIONS, registerFunctions } from './functions.js';
import { errorOffset } from './jsonata-ast.js';
import { RunawayBreaker } from './runaway-breaker.js';
import { columnsOfCall } from './error-columns.js';
import {
  bail,
  builtinCallables,
  compileExpression,
  parseSignature,
  type CallableFunction,
  type CompiledExpression,
  type CompileResult,
} from './jsonata-compiler/index.js';
import { toPointer } from './yaml-positions.js';
import type { YamlPath } from './types.js';

/** Environment variable: `0` keeps every expression on JSONata's interpreter. */
export const JSONATA_COMPILE_ENV = 'CARE_JSONATA_COMPILE';

export function compilerEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return env[JSONATA_COMPILE_ENV]?.trim() !== '0';
}

/**
 * JSONata guardrails given to every expression (stack depth, time limit, linear-time regex): each failure
 * rejects the row, never the run.
 * Design: docs/design/expression-safety.md.
 */
export const JSONATA_OPTIONS = { stack: 500, RegexEngine: LINEAR_REGEX_ENGINE } as const;

export interface ExprMeta {
  src: string;
  path: YamlPath;
  role: ExpressionRole;
  owner: string;
}

export interface EvaluatorSettings {
  /** Position in the mapping file of an offset inside the expression at `path`. */
  at(path: YamlPath, offset?: number): Location;
  timeoutMs: number;
}

/** Returned by `tryCompiled` when the row must go to the interpreter. */
export const FALLBACK: unique symbol = Symbol('interpreter');

export class ExpressionEvaluator {
  constructor(
    private readonly expr: jsonata.Expression,
    /** Undefined when the expression is outside the compiled subset or the compiler is off. */
    readonly compiled: CompiledExpression | undefined,
    readonly meta: ExprMeta,
    private readonly settings: EvaluatorSettings,
  ) {}

  /** The compiled closure's result, synchronously; FALLBACK when there is none or it bailed on this input. */
  tryCompiled(input: unknown, bindings?: Record<string, unknown>): unknown {
    if (this.compiled === undefined) return FALLBACK;
    try {
      return this.compiled(input, bindings);
    } catch {
      return FALLBACK; // anything unexpected, a custom function's error included: the interpreter decides
    }
  }

  /** An expression that keeps running over its time limit is not run for every row (runaway-breaker.ts). */
  private readonly runaway = new RunawayBreaker();

  /** JSONata's interpreter; every failure becomes a MappingEvalError positioned in the YAML. */
  async interpret(input: unknown, bindings: Record<string, unknown> | undefined, resource: string): Promise<unknown> {
    if (!this.runaway.admit()) throw toEvalError({ code: 'D1012', refused: this.runaway.timedOutRows }, this.meta, resource, this.settings);
    try {
      const v = await this.expr.evaluate(input, bindings);
      this.runaway.ended();
      return v;
    } catch (err) {
      const e = toEvalError(err, this.meta, resource, this.settings);
      if (e.jsonataCode === 'D1012') this.runaway.timedOut();
      else this.runaway.ended();
      throw e;
    }
  }

  async evaluate(input: unknown, bindings: Record<string, unknown> | undefined, resource: string): Promise<unknown> {
    const v = this.tryCompiled(input, bindings);
    return v !== FALLBACK ? v : this.interpret(input, bindings, resource);
  }
}

export function toEvalError(err: unknown, meta: ExprMeta, resource: string, settings: EvaluatorSettings): MappingEvalError {
  if (err instanceof MappingEvalError) return err;
  const e = (err ?? {}) as { code?: unknown; message?: unknown; position?: unknown; token?: unknown };
  const location = settings.at(meta.path, errorOffset(meta.src, e));
  let code: KnownIssueCode;
  let message = typeof e.message === 'string' ? e.message : String(err);
  let jsonataCode: string | undefined;
  if (err instanceof MappingFunctionError || err instanceof RefError) {
    code = err.code;
  } else if (typeof e.code === 'string' && /^[A-Z]\d{4}$/.test(e.code)) {
    code = 'jsonata';
    jsonataCode = e.code;
    // JSONata's messages quote the offending value (`Unable to cast value to a number: "Sofia"`): a cell's content.
    const { value, value2, refused } = e as { value?: unknown; value2?: unknown; refused?: number };
    message = `${guardrailMessage(e.code, settings.timeoutMs, refused) ?? redactValues(message, [value, value2])} [${e.code}]`;
  } else {
    code = 'eval-failed';
  }
  const problem = issue.error(code, `${meta.owner} ${meta.role}: ${message}`, { path: toPointer(meta.path), location });
  const columns = columnsOfCall(meta.src, e.position, e.token);
  if (columns.length) problem.columns = columns;
  if (err instanceof RefError && code === 'ref-rejected') problem.refersTo = { mapping: err.target, key: err.key };
  return new MappingEvalError(problem, { resource, role: meta.role, jsonataCode, cause: err });
}

/** Our wording for JSONata's guardrail errors (theirs suggests a rewrite that then loops until the time limit). No row data in it. */
function guardrailMessage(jsonataCode: string, timeoutMs: number, refused?: number): string | undefined {
  if (jsonataCode === 'D1012' && refused !== undefined) {
    return `the expression was not run on this row: it ran longer than ${timeoutMs} ms and was stopped the last ${refused} times it ran (likely infinite recursion: a function that keeps calling itself; it is tried again now and then); fix it, or raise \`limits.expressionTimeoutMs\` if it is only slow, then re-run the rejects`;
  }
  if (jsonataCode === 'D1012') {
    return `the expression ran longer than ${timeoutMs} ms and was stopped (likely infinite recursion: a function that keeps calling itself); if it is only slow, raise \`limits.expressionTimeoutMs\``;
  }
  if (jsonataCode === 'D1011') {
    return `the expression nested more than ${JSONATA_OPTIONS.stack} levels deep (function calls within function calls) and was stopped (likely infinite recursion: a function that keeps calling itself)`;
  }
  return undefined;
}

// ------------------------------------------------------------------------------------------- compiler setup

/**
 * Library functions compiled calls may invoke directly (the very implementations `registerFunctions` gives JSONata),
 * with the most arguments a compiled call may pass: `$now(picture)` needs JSONata's `$fromMillis`, so only `$now()`.
 */
const COMPILABLE_LIBRARY: Record<string, number | undefined> = {
  date: undefined,
  dateTime: undefined,
  clean: undefined,
  name: undefined,
  splitList: undefined,
  phone: undefined,
  lookup: undefined,
  ref: undefined,
  sourceKey: undefined,
  pad: undefined,
  now: 0,
  millis: 0,
};

type Registered = { impl: (this: unknown, ...args: unknown[]) => unknown; signature?: string };

/** Compiles mapping expressions; for an expression outside the subset (it stays on the interpreter), why. */
export type MappingExpressionCompiler = (expr: jsonata.Expression) => CompileResult;

export function mappingExpressionCompiler(opts: { tableNames: WeakMap<object, string>; lookups: Record<string, unknown> }): MappingExpressionCompiler {
  // The implementations registerFunctions hands JSONata, captured by name, so that both paths run the same code.
  const registered = new Map<string, Registered>();
  const capture = { registerFunction: (name: string, impl: Registered['impl'], signature?: string) => registered.set(name, { impl, signature }) };
  registerFunctions(capture as unknown as jsonata.Expression, { tableNames: opts.tableNames });

  const functions = builtinCallables();
  for (const [name, r] of registered) {
    functions.delete(name); // a registered function replaces JSONata's own of that name
    if (Object.prototype.hasOwnProperty.call(COMPILABLE_LIBRARY, name)) functions.set(name, libraryCallable(name, r, COMPILABLE_LIBRARY[name]));
  }
  const options = {
    functions,
    functionNames: new Set<string>([...JSONATA_BUILTINS, ...LIBRARY_FUNCTIONS, ...registered.keys()]),
    assigned: opts.lookups,
    // always: a block binding of this name would change what $ref / $now see, so it is not compiled
    bindingNames: new Set([CTX_BINDING]),
  };
  return (expr) => compileExpression(expr.ast(), options);
}

/** Library functions that read JSONata's `this` (the per-row context, `$fromMillis`): the others are called without one. */
const READS_FOCUS = new Set(['ref', 'sourceKey', 'now', 'millis']);

function libraryCallable(name: string, r: Registered, maxArgs: number | undefined): CallableFunction {
  const signature = r.signature !== undefined ? parseSignature(r.signature) : undefined;
  if (!READS_FOCUS.has(name)) {
    const impl = r.impl;
    return {
      signature,
      maxArgs,
      direct: impl,
      call(args) {
        const result = impl(...args);
        if (result !== null && typeof result === 'object' && typeof (result as { then?: unknown }).then === 'function') bail();
        return result;
      },
    };
  }
  return {
    signature,
    maxArgs,
    call(args, input, env) {
      // JSONata calls a registered function with `this = { environment, input }`; ours only look up CTX_BINDING
      const environment = {
        lookup: (name: string) => (env.bindings && Object.prototype.hasOwnProperty.call(env.bindings, name) ? env.bindings[name] : undefined),
      };
      const result = r.impl.apply({ environment, input }, args);
      if (result !== null && typeof result === 'object' && typeof (result as { then?: unknown }).then === 'function') bail();
      return result;
    },
  };
}
