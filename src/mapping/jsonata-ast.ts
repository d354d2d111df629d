/**
 * Static checks on a compiled JSONata AST: `$ref` targets, unknown variables / functions, literal
 * arguments of the date functions. The walk is generic (every object / array property of every node), so
 * it reaches lambdas, predicates, sort terms, group-by objects, transforms and so on.
 */
import type { KnownIssueCode } from '../core/issues.js';
import type jsonata from 'jsonata';

/** A JSONata AST node, loosely typed: the published ExprNode type misses `path`, `bind`, `focus`, … */
export type AstNode = Node;
type Node = { type: string; value?: unknown; position?: number; arguments?: unknown[]; procedure?: unknown; [k: string]: unknown };

export interface RefCall {
  /** Target resource name (the string literal). */
  name: string;
  /** Offset (0-based) of the literal's opening quote in the expression. */
  offset: number;
}

export interface AstProblem {
  code: KnownIssueCode;
  message: string;
  /** 0-based offset in the expression source. */
  offset: number;
}

export interface VariableUse {
  name: string;
  offset: number;
  /** True when the variable is the first argument of `$lookup(…)`. */
  lookupTable: boolean;
  /** True when the variable is called as a function. */
  called: boolean;
}

export interface FunctionCall {
  name: string;
  offset: number;
  /** The arguments the function receives: after `~>`, the piped value first (`X ~> $date("MM/DD/YYYY")`). */
  args: Node[];
}

export interface AstFacts {
  refs: RefCall[];
  problems: AstProblem[];
  variables: VariableUse[];
  /** Variables bound anywhere inside the expression (`:=`, lambda parameters, `@$x`, `#$i`). */
  bound: Set<string>;
  calls: FunctionCall[];
}

function isNode(v: unknown): v is Node {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && typeof (v as { type?: unknown }).type === 'string';
}

/**
 * Start offset (0-based) of a node's token in `src`. JSONata positions are the offset just AFTER the
 * token; this steps back over the token (verified against the source text) and falls back to position-1.
 */
export function nodeStart(src: string, node: Node): number {
  const pos = typeof node.position === 'number' ? node.position : 0;
  if (node.type === 'variable' && typeof node.value === 'string') {
    const s = pos - node.value.length - 1;
    if (src[s] === '$') return s;
  }
  if (node.type === 'string' && typeof node.value === 'string') {
    const q = src[pos - 1];
    if (q === '"' || q === "'") {
      // walk back to the opening quote (handles escapes inside the literal)
      for (let i = pos - 2; i >= 0; i--) if (src[i] === q && src[i - 1] !== '\\') return i;
    }
  }
  if ((node.type === 'function' || node.type === 'partial') && isNode(node.procedure)) {
    return nodeStart(src, node.procedure as Node);
  }
  if (node.type === 'name' && typeof node.value === 'string') {
    const s = pos - node.value.length;
    if (src.slice(s, pos) === node.value) return s;
    if (src[pos - 1] === '`') return Math.max(0, s - 2);
  }
  if (node.type === 'path' && Array.isArray(node.steps) && isNode(node.steps[0])) return nodeStart(src, node.steps[0] as Node);
  return Math.max(0, Math.min(pos - 1, src.length - 1));
}

/**
 * Offset of the offending token of a JSONata error (`position` + `token`): the start of the token when it
 * can be verified in the source, the `$` of a failing function call, else position-1.
 */
export function errorOffset(src: string, err: { position?: unknown; token?: unknown }): number {
  const pos = typeof err.position === 'number' ? err.position : undefined;
  if (pos === undefined) return 0;
  const token = typeof err.token === 'string' ? err.token : undefined;
  if (token) {
    // a function call: position is just after `(`, token is the function name
    if (src[pos - 1] === '(' && src.slice(pos - 1 - token.length, pos - 1) === token) {
      const s = pos - 1 - token.length;
      return src[s - 1] === '$' ? s - 1 : s;
    }
    // a string literal: position is just after the closing quote, token is the unquoted value
    const q = src[pos - 1];
    if ((q === '"' || q === "'") && src.slice(pos - 1 - token.length, pos - 1) === token && src[pos - 2 - token.length] === q) {
      return pos - 2 - token.length;
    }
    if (src.slice(pos - token.length, pos) === token) {
      const s = pos - token.length;
      return src[s - 1] === '$' && /^\w+$/.test(token) ? s - 1 : s;
    }
  }
  return Math.max(0, Math.min(pos - 1, src.length - 1));
}

export function analyse(src: string, ast: jsonata.ExprNode | object): AstFacts {
  const facts: AstFacts = { refs: [], problems: [], variables: [], bound: new Set(), calls: [] };

  const visitRefCall = (node: Node) => {
    const args = (node.arguments ?? []) as Node[];
    const first = args[0];
    if (first && first.type === 'string' && typeof first.value === 'string') {
      facts.refs.push({ name: first.value, offset: nodeStart(src, first) });
    } else {
      facts.problems.push({
        code: 'ref-dynamic',
        offset: first ? nodeStart(src, first) : nodeStart(src, node),
        message: '$ref needs the target mapping name as a string literal, e.g. $ref("patient", MRN), so the load order can be computed',
      });
    }
  };

  const seen = new WeakSet<object>(); // the parent operator (%) shares slot objects between nodes
  /** `lhs ~> $f(a)` calls `$f(lhs, a)`: each such call → its piped value. */
  const piped = new WeakMap<object, Node>();
  /**
   * `shadow`: names the user binds in an enclosing frame (`:=` in a block, lambda parameters). Such a `$ref` (or
   * `$date`, …) is the user's own variable there — JSONata looks it up before the library's function — so it is
   * neither a `$ref` call to check nor a library call.
   */
  const walk = (v: unknown, shadow: ReadonlySet<string>): void => {
    if (Array.isArray(v)) {
      for (const x of v) walk(x, shadow);
      return;
    }
    if (v === null || typeof v !== 'object' || seen.has(v)) return;
    seen.add(v);
    const node = v as Node;
    if (isNode(node)) {
      if ((node.type === 'function' || node.type === 'partial') && isNode(node.procedure) && node.procedure.type === 'variable') {
        const proc = node.procedure as Node;
        const name = String(proc.value);
        const args = (node.arguments ?? []) as Node[];
        facts.variables.push({ name, offset: nodeStart(src, proc), lookupTable: false, called: true });
        if (shadow.has(name)) {
          walk(args, shadow);
          return;
        }
        const pipedValue = piped.get(node);
        facts.calls.push({ name, offset: nodeStart(src, proc), args: pipedValue ? [pipedValue, ...args] : args });
        if (name === 'ref') visitRefCall(node);
        if (name === 'lookup' && args[0]?.type === 'variable') {
          const t = args[0];
          facts.variables.push({ name: String(t.value), offset: nodeStart(src, t), lookupTable: true, called: false });
          walk(args.slice(1), shadow);
        } else {
          walk(args, shadow);
        }
        return;
      }
      if (node.type === 'apply' && isNode(node.lhs) && isNode(node.rhs) && node.rhs.type === 'function') piped.set(node.rhs, node.lhs);
      if (node.type === 'variable') {
        const name = String(node.value);
        if (name === 'ref' && !shadow.has('ref')) {
          facts.problems.push({
            code: 'ref-dynamic',
            offset: nodeStart(src, node),
            message: '$ref must be called directly, e.g. $ref("patient", MRN), not passed around as a value',
          });
        }
        facts.variables.push({ name, offset: nodeStart(src, node), lookupTable: false, called: false });
      }
      if (node.type === 'bind' && isNode(node.lhs) && node.lhs.type === 'variable') {
        facts.bound.add(String(node.lhs.value));
        walk(node.rhs, shadow);
        return;
      }
      if (node.type === 'lambda' && Array.isArray(node.arguments)) {
        const params = node.arguments.filter((a): a is Node => isNode(a) && a.type === 'variable').map((a) => String(a.value));
        for (const p of params) facts.bound.add(p);
        walk(node.body, withFrame(shadow, node.body, params));
        return;
      }
      if (node.type === 'block') {
        walk(node.expressions, withFrame(shadow, node.expressions, []));
        return;
      }
      if (typeof node.focus === 'string') facts.bound.add(node.focus);
      if (typeof node.index === 'string') facts.bound.add(node.index);
    }
    for (const child of Object.values(node)) {
      if (child !== null && typeof child === 'object') walk(child, shadow);
    }
  };
  walk(ast, withFrame(new Set(), ast, []));
  return facts;
}

/**
 * `shadow` plus the parameters and the `:=` names of a new frame: a block (`frame` = its expressions), a lambda
 * (its body) or the whole expression. A nested block or lambda is a frame of its own: its names are not collected.
 */
function withFrame(shadow: ReadonlySet<string>, frame: unknown, params: string[]): ReadonlySet<string> {
  const names = new Set(params);
  const seen = new WeakSet<object>();
  const collect = (v: unknown): void => {
    if (v === null || typeof v !== 'object' || seen.has(v)) return;
    seen.add(v);
    if (Array.isArray(v)) {
      for (const x of v) collect(x);
      return;
    }
    if (isNode(v) && (v.type === 'block' || v.type === 'lambda')) return;
    if (isNode(v) && v.type === 'bind' && isNode(v.lhs) && v.lhs.type === 'variable') names.add(String(v.lhs.value));
    for (const child of Object.values(v)) collect(child);
  };
  collect(frame);
  if (!names.size) return shadow;
  return new Set([...shadow, ...names]);
}
