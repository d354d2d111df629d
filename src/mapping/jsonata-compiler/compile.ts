/**
 * JSONata AST (jsonata 2.2's `expr.ast()`) → a synchronous JS closure, for the subset of the language mappings use:
 * literals, paths and field names, predicates, `.{}` / `[]` constructors, `? :`, `and` / `or`, comparison,
 * arithmetic, `&`, `in`, blocks with `:=`, `~>` into a call, calls to the functions in `options.functions` (built-ins
 * also as values), lambdas (closures, recursion: lambda.ts) and regex literals (regex.ts). Everything else — lambdas
 * with a signature, partial application, ranges, wildcards, order-by, transforms, parent / focus / index operators,
 * a `:=` that is not a statement of a block — makes `compileExpression` return `{ ok: false, reason }`: the
 * expression stays on the interpreter. Lambda calls are bounded per evaluation (lambda.ts): past the bounds the row
 * goes to the interpreter, whose time and depth guards then decide.
 */
import type { AstNode } from '../jsonata-ast.js';
import { groupFn, indexFilter, literalGroupFn, pathFn, predicateFilter, type Filter, type Step } from './path.js';
import {
  bail as bailOut,
  boolean,
  boolize,
  comparison,
  concat,
  equality,
  includes,
  isFunction,
  isSequence,
  lookup as lookupSlow,
  negate,
  normalize,
  numeric,
  seq1,
  type Seq,
} from './runtime.js';
import { boundOr, builtinValue, definesLambda, holdsFunction, isNativeValue, lambdaValue, slotReader } from './lambda.js';
import { regexLiteral } from './regex.js';
import { arrayBuilder, conditional, directCall, fieldReader } from './generated.js';
import type { CompileOptions, CompiledExpression, Env, Fn, Frame, FunctionValue } from './types.js';

export type CompileResult = { ok: true; fn: CompiledExpression } | { ok: false; reason: string };

/** Deepest AST compiled: keeps the interpreter's evaluation depth well under its 500-level guard. */
const MAX_DEPTH = 100;

class Unsupported extends Error {}

function unsupported(what: string): never {
  throw new Unsupported(what);
}

interface Scope {
  parent?: Scope;
  /** Variable name → slot in `frame`. */
  names: Map<string, number>;
  /** The frame this scope's slots live in (slot 0 is the enclosing frame). */
  frame: { size: number };
  /** Names whose `:=` has run by this point of the block (a lambda's parameters: all of them). */
  bound: Set<string>;
  /** A lambda's scope: what is read inside runs later, when the block's later bindings may have run. */
  lambda?: boolean;
}

export function compileExpression(ast: unknown, options: CompileOptions): CompileResult {
  try {
    const c = new Compiler(options);
    const frame = { size: 1 };
    const top = c.compile(ast as AstNode, { names: new Map(), frame, bound: new Set() });
    c.limits.depth = lambdaDepthLimit(c.deepest);
    const functions = c.functionValues;
    const fn: CompiledExpression = (input, bindings) => {
      const env: Env = { frame: frame.size > 1 ? new Array(frame.size) : EMPTY, root: input, bindings, calls: 0, depth: 0 };
      let wrapped = input;
      if (Array.isArray(input) && !isSequence(input)) {
        wrapped = seq1(input);
        (wrapped as Seq).outerWrapper = true;
      }
      const result = top(wrapped, env);
      // the interpreter's result would hold its own lambda objects: let it produce that
      return functions && holdsFunction(result) ? bailOut() : result;
    };
    return { ok: true, fn };
  } catch (err) {
    if (err instanceof Unsupported) return { ok: false, reason: err.message };
    throw err;
  }
}

/**
 * Nested lambda calls allowed when the AST is `astDepth` deep: each call adds at most that many levels to the
 * interpreter's evaluation depth, which must stay under its 500-level guard for both to agree.
 */
function lambdaDepthLimit(astDepth: number): number {
  return Math.max(1, Math.floor(400 / (astDepth + 1)) - 1);
}

/** One compilation: `:=` and parameter slots are numbered per frame, resolved to (frames up, slot) here. */
class Compiler {
  private depth = 0;
  /** Deepest AST level compiled. */
  deepest = 0;
  /** Whether a function can be a value here (a lambda, a built-in named as a value, a regex). */
  functionValues = false;
  readonly limits = { depth: 1 };

  constructor(private readonly options: CompileOptions) {}

  /**
   * A variable of an enclosing block or lambda, as JSONata's frame lookup finds it: a block's name before its
   * `:=` has run is looked up further out — read from a lambda (which runs later), that is decided at run time.
   */
  private localVariable(scope: Scope | undefined, name: string, hops = 0, deferred = false): Fn | undefined {
    for (let s = scope; s; s = s.parent) {
      const slot = s.names.get(name);
      const up = s.parent && s.parent.frame !== s.frame ? 1 : 0;
      if (slot !== undefined) {
        if (s.bound.has(name)) return slotReader(hops, slot);
        if (deferred) return boundOr(hops, slot, this.localVariable(s.parent, name, hops + up, true) ?? this.globalVariable(name, true));
      }
      if (s.lambda) deferred = true;
      hops += up;
    }
    return undefined;
  }

  private userBound(name: string): boolean {
    const o = this.options;
    return o.bindingNames.has(name) || Object.prototype.hasOwnProperty.call(o.assigned, name);
  }

  /** `evaluate(node)`: the node's own value, then its predicates, its group, and the sequence tail. */
  compile(node: AstNode, scope: Scope): Fn {
    if (++this.depth > MAX_DEPTH) unsupported('expression nested too deep');
    this.deepest = Math.max(this.deepest, this.depth);
    try {
      if (node.tuple || node.focus !== undefined || node.index !== undefined || node.ancestor !== undefined || node.seekingParent !== undefined) {
        unsupported('tuple stream (@, #, %)');
      }
      const core = this.compileCore(node, scope);
      const preds = ((node.predicate as { expr: AstNode }[] | undefined) ?? []).map((p) => this.filterOf(p.expr, scope));
      const group = node.type !== 'path' && node.group ? this.groupOf(node.group as { lhs: [AstNode, AstNode][] }, scope) : undefined;
      const keepArray = node.keepArray === true;
      if (!preds.length && !group && !keepArray) {
        if (NEVER_A_SEQUENCE.has(node.type) || NORMALIZED.has(core)) return core;
        return (input, env) => normalize(core(input, env), false);
      }
      return (input, env) => {
        let result = core(input, env);
        for (const p of preds) result = p(result, env);
        if (group) result = group(result, env);
        return normalize(result, keepArray);
      };
    } finally {
      this.depth--;
    }
  }

  private compileCore(node: AstNode, scope: Scope): Fn {
    switch (node.type) {
      case 'string':
      case 'number':
      case 'value': {
        const v = node.value;
        return () => v;
      }
      case 'name': {
        const key = String(node.value);
        return (input) => lookupName(input, key);
      }
      case 'path':
        return this.compilePath(node, scope);
      case 'variable':
        return this.compileVariable(String(node.value), scope);
      case 'binary':
        return this.compileBinary(node, scope);
      case 'unary':
        return this.compileUnary(node, scope);
      case 'condition': {
        const c = this.compile(node.condition as AstNode, scope);
        const t = this.compile(node.then as AstNode, scope);
        const e = node.else !== undefined ? this.compile(node.else as AstNode, scope) : undefined;
        return conditional(c, t, e, boolean);
      }
      case 'block':
        return this.compileBlock(node, scope);
      case 'function':
        return this.compileCall(node, scope, undefined, false, undecorated(node));
      case 'apply': {
        const rhs = node.rhs as AstNode;
        if (rhs.type !== 'function') unsupported('~> into a non-call');
        return this.compileCall(rhs, scope, this.compile(node.lhs as AstNode, scope), false, undecorated(node));
      }
      case 'bind':
        return unsupported(':= outside a block statement');
      case 'lambda':
        return node.thunk === true ? this.compileTailCall(node, scope) : this.compileLambda(node, scope);
      case 'regex': {
        this.functionValues = true;
        return regexLiteral(node.value as RegExp);
      }
      default:
        return unsupported(`\`${node.type}\` expressions`);
    }
  }

  private compilePath(node: AstNode, scope: Scope): Fn {
    const steps: Step[] = (node.steps as AstNode[]).map((s) => {
      if (s.type === 'sort') unsupported('order-by');
      const stages: Filter[] = ((s.stages as { type: string; expr: AstNode }[] | undefined) ?? []).map((st) =>
        st.type === 'filter' ? this.filterOf(st.expr, scope) : unsupported(`\`${st.type}\` stage`),
      );
      return { fn: this.compile(s, scope), stages, consarray: s.consarray === true };
    });
    const generic = pathFn({
      steps,
      firstIsVariable: (node.steps as AstNode[])[0]!.type === 'variable',
      keepSingletonArray: node.keepSingletonArray === true,
      group: node.group ? this.groupOf(node.group as { lhs: [AstNode, AstNode][] }, scope) : undefined,
    });
    const only = (node.steps as AstNode[])[0]!;
    const plainName = steps.length === 1 && only.type === 'name' && !only.stages && !only.predicate && !only.group && !only.keepArray;
    if (!plainName || node.keepSingletonArray || node.group || node.keepArray) return generic;
    return normalized(fieldReader(String(only.value), (input, env) => normalize(generic(input, env), false)));
  }

  private filterOf(pred: AstNode, scope: Scope): Filter {
    return pred.type === 'number' ? indexFilter(pred.value as number) : predicateFilter(this.compile(pred, scope));
  }

  private groupOf(group: { lhs: [AstNode, AstNode][] }, scope: Scope) {
    const pairs = group.lhs.map(([k, v]) => [this.compile(k, scope), this.compile(v, scope)] as [Fn, Fn]);
    const generic = groupFn(pairs);
    const keys = group.lhs.map(([k]) => (k.type === 'string' && !k.predicate && !k.group && !k.keepArray ? String(k.value) : undefined));
    const literal =
      keys.every((k) => k !== undefined && k !== '__proto__' && k !== '_jsonata_lambda' && k !== '_jsonata_function') && new Set(keys).size === keys.length;
    return literal
      ? literalGroupFn(
          keys as string[],
          pairs.map(([, v]) => v),
          generic,
        )
      : generic;
  }

  private compileVariable(name: string, scope: Scope): Fn {
    if (name === '') return (input) => (input && (input as Seq).outerWrapper ? (input as Seq)[0] : input);
    if (name === '$') return (_input, env) => env.root;
    return this.localVariable(scope, name) ?? this.globalVariable(name, false);
  }

  /** `$name` outside every block and lambda: a binding, a lookup table, a built-in as a value, or nothing. */
  private globalVariable(name: string, shadowable: boolean): Fn {
    // a built-in a block may rebind later: the call site would have to choose at run time (not compiled)
    if (shadowable && (this.options.functionNames.has(name) || this.options.functions.has(name))) unsupported(`$${name} rebound after its use`);
    if (this.options.bindingNames.has(name)) return (_input, env) => env.bindings?.[name];
    if (Object.prototype.hasOwnProperty.call(this.options.assigned, name)) {
      const v = this.options.assigned[name];
      return () => v;
    }
    const impl = this.options.functions.get(name);
    if (impl?.arity !== undefined) {
      this.functionValues = true;
      const arity = impl.arity;
      return (_input, env) => builtinValue(impl, arity, env);
    }
    if (this.options.functionNames.has(name) || impl) unsupported(`$${name} used as a value`);
    return () => undefined;
  }

  private compileBinary(node: AstNode, scope: Scope): Fn {
    const op = String(node.value);
    const l = this.compile(node.lhs as AstNode, scope);
    const r = this.compile(node.rhs as AstNode, scope);
    switch (op) {
      case 'and':
        return (input, env) => boolize(l(input, env)) && boolize(r(input, env));
      case 'or':
        return (input, env) => boolize(l(input, env)) || boolize(r(input, env));
      case '+':
      case '-':
      case '*':
      case '/':
      case '%':
        return (input, env) => numeric(l(input, env), r(input, env), op);
      case '=':
      case '!=':
        return (input, env) => equality(l(input, env), r(input, env), op);
      case '<':
      case '<=':
      case '>':
      case '>=':
        return (input, env) => comparison(l(input, env), r(input, env), op);
      case '&':
        return (input, env) => concat(l(input, env), r(input, env));
      case 'in':
        return (input, env) => includes(l(input, env), r(input, env));
      default:
        return unsupported(`operator ${op}`);
    }
  }

  private compileUnary(node: AstNode, scope: Scope): Fn {
    if (node.value === '-') {
      const e = this.compile(node.expression as AstNode, scope);
      return (input, env) => negate(e(input, env));
    }
    if (node.value === '{') return this.groupOf({ lhs: node.lhs as [AstNode, AstNode][] }, scope);
    if (node.value !== '[') return unsupported(`unary ${String(node.value)}`);
    const items = (node.expressions as AstNode[]).map((e) => ({ fn: this.compile(e, scope), nested: e.value === '[' }));
    return arrayBuilder(items, node.consarray === true);
  }

  private compileBlock(node: AstNode, scope: Scope): Fn {
    // a lambda defined here captures this evaluation's bindings: the block then gets a frame per evaluation
    const ownFrame = definesLambda(node.expressions);
    const inner: Scope = { parent: scope, names: new Map(), frame: ownFrame ? { size: 1 } : scope.frame, bound: new Set() };
    // every name the block binds has one slot (a second `:=` of a name rebinds it: a closure sees the last value)
    for (const stmt of node.expressions as AstNode[]) {
      const lhs = stmt.lhs as AstNode | undefined;
      if (stmt.type === 'bind' && lhs?.type === 'variable' && !inner.names.has(String(lhs.value))) inner.names.set(String(lhs.value), inner.frame.size++);
    }
    const stmts = (node.expressions as AstNode[]).map((stmt) => {
      if (stmt.type !== 'bind') return this.compile(stmt, inner);
      const lhs = stmt.lhs as AstNode;
      const name = String(lhs.value);
      if (lhs.type !== 'variable' || name === '' || name === '$' || this.options.bindingNames.has(name)) unsupported(`binding $${name}`);
      const rhs = this.compile(stmt.rhs as AstNode, inner);
      const slot = inner.names.get(name)!;
      inner.bound.add(name);
      return this.wrapBind(stmt, (input, env) => (env.frame[slot] = rhs(input, env)), inner);
    });
    const run: Fn =
      stmts.length === 1
        ? stmts[0]!
        : (input, env) => {
            let result: unknown;
            for (const s of stmts) result = s(input, env);
            return result;
          };
    if (!ownFrame) return run;
    const frame = inner.frame;
    return (input, env) => {
      const saved = env.frame;
      const f: Frame = new Array(frame.size);
      f[0] = saved;
      env.frame = f;
      const result = run(input, env);
      env.frame = saved;
      return result;
    };
  }

  /** The `evaluate()` tail of a bind statement (its own predicates are rare but legal). */
  private wrapBind(node: AstNode, core: Fn, scope: Scope): Fn {
    if (!node.predicate && !node.group && !node.keepArray) return core;
    const preds = ((node.predicate as { expr: AstNode }[] | undefined) ?? []).map((p) => this.filterOf(p.expr, scope));
    const group = node.group ? this.groupOf(node.group as { lhs: [AstNode, AstNode][] }, scope) : undefined;
    const keepArray = node.keepArray === true;
    return (input, env) => {
      let result = core(input, env);
      for (const p of preds) result = p(result, env);
      if (group) result = group(result, env);
      return normalize(result, keepArray);
    };
  }

  /**
   * A call. `tail`: a call in tail position of a lambda body, which JSONata runs as a trampolined thunk: arguments
   * not wrapped (a built-in given as one fails there → BAIL), the context of the lambda's caller (so a built-in
   * that could read its context stays on the interpreter), and no sequence tail of its own. `withTail`: the call is
   * the whole node (no predicate, group or `[]`), so its sequence tail is done in the same closure.
   */
  private compileCall(node: AstNode, scope: Scope, applyTo?: Fn, tail = false, withTail = false): Fn {
    const proc = node.procedure as AstNode;
    if (proc.type !== 'variable' || proc.predicate || proc.group || proc.keepArray) unsupported('call of a computed function');
    const name = String(proc.value);
    const args = (node.arguments as AstNode[]).map((a) => this.compile(a, scope));
    const local = this.localVariable(scope, name);
    if (local !== undefined) return this.dynamicCall(local, args, applyTo, tail);
    if (this.userBound(name)) unsupported(`call of the variable $${name}`);
    const impl = this.options.functions.get(name) ?? unsupported(`$${name}()`);
    const count = args.length + (applyTo ? 1 : 0);
    if (impl.maxArgs !== undefined && count > impl.maxArgs) unsupported(`$${name}() with ${args.length} arguments`);
    const takesFunctions = impl.takesFunctions === true;
    // JSONata's `$sort` calls its comparator as a plain JS function: a lambda handed over unwrapped (tail call) fails
    const noFunctions = tail && name === 'sort';
    const contextSignature = tail ? (impl.signature ?? impl.contextSignature) : undefined;
    if (impl.direct && !impl.signature && !takesFunctions && !tail && args.length <= MAX_DIRECT_ARGS) {
      const call = directCall(applyTo ? [applyTo, ...args] : args, impl.direct, withTail);
      return withTail ? normalized(call) : call;
    }
    const call: Fn = (input, env) => {
      const values: unknown[] = [];
      if (applyTo) values.push(applyTo(input, env));
      for (const a of args) {
        const v = a(input, env);
        // the interpreter wraps function arguments in closures; only the functions taking one are ported for that
        // (and data that looks like a JSONata function object is wrapped too: not ported)
        if (isFunction(v) && (!takesFunctions || noFunctions || typeof v !== 'function' || (tail && isNativeValue(v)))) return bailOut();
        values.push(v);
      }
      if (contextSignature?.readsContext(values)) return bailOut(); // the interpreter gives it its caller's context
      const result = impl.call(impl.signature ? impl.signature.validate(values, input) : values, input, env);
      // `withTail`: the call is the whole node, whose sequence tail is done here (one closure less per call)
      return withTail ? normalize(result, false) : result;
    };
    return withTail ? normalized(call) : call;
  }

  /** A call of a variable: a lambda, or a function handed in as an argument (anything else: T1006 → BAIL). */
  private dynamicCall(get: Fn, args: Fn[], applyTo: Fn | undefined, tail: boolean): Fn {
    return (input, env) => {
      const f = get(input, env);
      if (typeof f !== 'function') return bailOut();
      const values: unknown[] = [];
      if (applyTo) values.push(applyTo(input, env));
      for (const a of args) {
        const v = a(input, env);
        if ((tail && isNativeValue(v)) || (typeof v === 'object' && isFunction(v))) return bailOut(); // see compileCall
        values.push(v);
      }
      return (f as FunctionValue)(values);
    };
  }

  /** `function($a, $b) { … }`: a closure over the current frame and input (lambda.ts). */
  private compileLambda(node: AstNode, scope: Scope): Fn {
    if (node.signature !== undefined) unsupported('a function with a signature');
    const frame = { size: 1 };
    const names = new Map<string, number>();
    const params = (node.arguments as AstNode[]).map((p) => String(p.value));
    for (const p of params) {
      if (this.options.bindingNames.has(p)) unsupported(`parameter $${p}`);
      names.set(p, frame.size++);
    }
    if (thunkUnderTail(node.body as AstNode, false)) unsupported('a tail call under a predicate');
    const body = this.compile(node.body as AstNode, { parent: scope, names, frame, bound: new Set(params), lambda: true });
    this.functionValues = true;
    const shape = { body, params: params.length, frame, limits: this.limits };
    return (input, env) => lambdaValue(shape, input, env);
  }

  /** The thunk JSONata's parser puts around a call at the end of a function body: that call, made at once. */
  private compileTailCall(node: AstNode, scope: Scope): Fn {
    const call = node.body as AstNode;
    if (call.group || call.keepArray || call.predicate) unsupported('a tail call with a predicate');
    return this.compileCall(call, scope, undefined, true);
  }
}

/** A node without predicates, group or `[]`: its evaluation ends with the plain sequence tail. */
function undecorated(node: AstNode): boolean {
  return !node.predicate && !node.group && !node.keepArray && !node.stages;
}

/** Whether a tail-call thunk sits under a predicate, group or `[]` of a condition or block (applied to the thunk). */
function thunkUnderTail(node: AstNode | undefined, decorated: boolean): boolean {
  if (!node) return false;
  if (node.type === 'lambda' && node.thunk === true) return decorated;
  const d = decorated || node.predicate !== undefined || node.group !== undefined || node.keepArray === true || node.stages !== undefined;
  if (node.type === 'condition') return thunkUnderTail(node.then as AstNode, d) || thunkUnderTail(node.else as AstNode | undefined, d);
  if (node.type === 'block') return thunkUnderTail((node.expressions as AstNode[]).at(-1), d);
  return false;
}

const EMPTY: unknown[] = [];
/** Arguments past which a call stays on the generic loop (the library's functions take at most three). */
const MAX_DIRECT_ARGS = 8;

/**
 * Nodes whose value is never a sequence (a literal, an operator's result, a constructor, a condition or a block,
 * whose branches and statements are compiled nodes already through the sequence tail): no tail needed.
 */
const NEVER_A_SEQUENCE = new Set(['string', 'number', 'value', 'binary', 'unary', 'condition', 'block', 'lambda', 'regex']);
/** Compiled cores that end with the sequence tail themselves. */
const NORMALIZED = new WeakSet<Fn>();
function normalized(fn: Fn): Fn {
  NORMALIZED.add(fn);
  return fn;
}

function lookupName(input: unknown, key: string): unknown {
  // the common case first: a field of a plain object (own properties only, as JSONata reads them)
  if (input !== null && typeof input === 'object' && !Array.isArray(input)) {
    if (!Object.prototype.hasOwnProperty.call(input, key) || isFunction(input)) return undefined;
    return (input as Record<string, unknown>)[key];
  }
  return lookupSlow(input, key);
}
