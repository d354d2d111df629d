/**
 * JSONata AST (jsonata 2.2's `expr.ast()`) → a synchronous JS closure, for the subset of the language mappings use:
 * literals, paths and field names, predicates, `.{}` / `[]` constructors, `? :`, `and` / `or`, comparison,
 * arithmetic, `&`, `in`, blocks with `:=`, `~>` into a call, and calls to the functions in `options.functions`.
 * Everything else — lambdas, regular expressions, ranges, wildcards, order-by, transforms, parent / focus / index
 * operators, a `:=` that is not a statement of a block — makes `compileExpression` return `{ ok: false }`: the
 * expression stays on the interpreter. Without lambdas there is no loop or recursion beyond the data's own size,
 * so the interpreter's time and depth guards are not needed here.
 */
import type { AstNode } from '../jsonata-ast.js';
import { groupFn, indexFilter, literalGroupFn, namePathFn, pathFn, predicateFilter, type Filter, type Step } from './path.js';
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
import type { CompileOptions, CompiledExpression, Env, Fn } from './types.js';

export type CompileResult = { ok: true; fn: CompiledExpression } | { ok: false; reason: string };

/** Deepest AST compiled: keeps the interpreter's evaluation depth well under its 500-level guard. */
const MAX_DEPTH = 100;

class Unsupported extends Error {}

function unsupported(what: string): never {
  throw new Unsupported(what);
}

interface Scope {
  parent?: Scope;
  names: Map<string, number>;
}

export function compileExpression(ast: unknown, options: CompileOptions): CompileResult {
  try {
    const c = new Compiler(options);
    const top = c.compile(ast as AstNode, { names: new Map() });
    const n = c.slots;
    const fn: CompiledExpression = (input, bindings) => {
      const env: Env = { slots: n ? new Array(n) : EMPTY, root: input, bindings };
      let wrapped = input;
      if (Array.isArray(input) && !isSequence(input)) {
        wrapped = seq1(input);
        (wrapped as Seq).outerWrapper = true;
      }
      return top(wrapped, env);
    };
    return { ok: true, fn };
  } catch (err) {
    if (err instanceof Unsupported) return { ok: false, reason: err.message };
    throw err;
  }
}

/** One compilation: `:=` slots are numbered across the whole expression. */
class Compiler {
  slots = 0;
  private depth = 0;

  constructor(private readonly options: CompileOptions) {}

  private lookupLocal(scope: Scope | undefined, name: string): number | undefined {
    for (let s = scope; s; s = s.parent) {
      const i = s.names.get(name);
      if (i !== undefined) return i;
    }
    return undefined;
  }

  private userBound(scope: Scope, name: string): boolean {
    const o = this.options;
    return this.lookupLocal(scope, name) !== undefined || o.bindingNames.has(name) || Object.prototype.hasOwnProperty.call(o.assigned, name);
  }

  /** `evaluate(node)`: the node's own value, then its predicates, its group, and the sequence tail. */
  compile(node: AstNode, scope: Scope): Fn {
    if (++this.depth > MAX_DEPTH) unsupported('expression nested too deep');
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
        return (input, env) => (boolean(c(input, env)) ? t(input, env) : e ? e(input, env) : undefined);
      }
      case 'block':
        return this.compileBlock(node, scope);
      case 'function':
        return this.compileCall(node, scope);
      case 'apply': {
        const rhs = node.rhs as AstNode;
        if (rhs.type !== 'function') unsupported('~> into a non-call');
        return this.compileCall(rhs, scope, this.compile(node.lhs as AstNode, scope));
      }
      case 'bind':
        return unsupported(':= outside a block statement');
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
    return normalized(namePathFn(String(only.value), (input, env) => normalize(generic(input, env), false)));
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
    const slot = this.lookupLocal(scope, name);
    if (slot !== undefined) return (_input, env) => env.slots[slot];
    if (this.options.bindingNames.has(name)) return (_input, env) => env.bindings?.[name];
    if (Object.prototype.hasOwnProperty.call(this.options.assigned, name)) {
      const v = this.options.assigned[name];
      return () => v;
    }
    if (this.options.functionNames.has(name) || this.options.functions.has(name)) unsupported(`$${name} used as a value`);
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
    const cons = node.consarray === true;
    return (input, env) => {
      const result: unknown[] = [];
      for (const item of items) {
        const v = item.fn(input, env);
        if (v === undefined) continue;
        if (item.nested || !Array.isArray(v)) result.push(v);
        else for (let i = 0; i < v.length; i++) result.push(v[i]); // fn.append: concat onto a fresh plain array
      }
      if (cons) Object.defineProperty(result, 'cons', { enumerable: false, configurable: false, value: true });
      return result;
    };
  }

  private compileBlock(node: AstNode, scope: Scope): Fn {
    const inner: Scope = { parent: scope, names: new Map() };
    const stmts = (node.expressions as AstNode[]).map((stmt) => {
      if (stmt.type !== 'bind') return this.compile(stmt, inner);
      const lhs = stmt.lhs as AstNode;
      const name = String(lhs.value);
      if (lhs.type !== 'variable' || name === '' || name === '$' || this.options.bindingNames.has(name)) unsupported(`binding $${name}`);
      const rhs = this.compile(stmt.rhs as AstNode, inner);
      const slot = this.slots++;
      inner.names.set(name, slot);
      return this.wrapBind(stmt, (input, env) => (env.slots[slot] = rhs(input, env)), inner);
    });
    if (stmts.length === 1) return stmts[0]!;
    return (input, env) => {
      let result: unknown;
      for (const s of stmts) result = s(input, env);
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

  private compileCall(node: AstNode, scope: Scope, applyTo?: Fn): Fn {
    const proc = node.procedure as AstNode;
    if (proc.type !== 'variable' || proc.predicate || proc.group || proc.keepArray) unsupported('call of a computed function');
    const name = String(proc.value);
    if (this.userBound(scope, name)) unsupported(`call of the variable $${name}`);
    const impl = this.options.functions.get(name) ?? unsupported(`$${name}()`);
    const args = (node.arguments as AstNode[]).map((a) => this.compile(a, scope));
    if (impl.maxArgs !== undefined && args.length + (applyTo ? 1 : 0) > impl.maxArgs) unsupported(`$${name}() with ${args.length} arguments`);
    return (input, env) => {
      const values: unknown[] = [];
      if (applyTo) values.push(applyTo(input, env));
      for (const a of args) {
        const v = a(input, env);
        if (isFunction(v)) return bailOut(); // the interpreter wraps function arguments in closures
        values.push(v);
      }
      return impl.call(impl.signature ? impl.signature.validate(values, input) : values, input, env);
    };
  }
}

const EMPTY: unknown[] = [];

/**
 * Nodes whose value is never a sequence (a literal, an operator's result, a constructor, a condition or a block,
 * whose branches and statements are compiled nodes already through the sequence tail): no tail needed.
 */
const NEVER_A_SEQUENCE = new Set(['string', 'number', 'value', 'binary', 'unary', 'condition', 'block']);
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
