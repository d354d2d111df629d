/**
 * The fields an expression reads from its input record (a source row, a group of rows, a lookup record), found
 * on JSONata's syntax tree — so the column contract is the same whether the expression later runs compiled or
 * on the interpreter. Only reads that are certainly row fields count: the first step of a path evaluated in the
 * row's context (`LAST`, `$.LAST`, `$$.LAST`, `$[0].MRN`, `$.{ "x": ROLE }`, arguments, conditions, blocks,
 * object values). Later steps, predicates of a field, lambda bodies, transforms, sort and group terms, object
 * keys and variables are left alone: a missed check is better than a false error on a valid mapping.
 */
import type jsonata from 'jsonata';
import { nodeStart, type AstNode } from './jsonata-ast.js';

export interface RowFieldRead {
  /** The field name as written (backquotes removed). */
  name: string;
  /** 0-based offset of the name (or its opening backquote) in the expression. */
  offset: number;
}

export interface RowFields {
  /** Every read, in order of appearance (a name read twice is listed twice). */
  reads: RowFieldRead[];
  /** Fields the expression tests with `$exists(FIELD)`: it expects them to be absent from some records. */
  existsGuarded: Set<string>;
}

/** `row`: the node is evaluated against the input record; `other`: against something else (only `$$` is the record there). */
type Context = 'row' | 'other';

function isNode(v: unknown): v is AstNode {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && typeof (v as { type?: unknown }).type === 'string';
}

export function rowFieldReads(src: string, ast: jsonata.ExprNode | object): RowFields {
  const out: RowFields = { reads: [], existsGuarded: new Set() };
  const seen = new WeakSet<object>(); // the parent operator (%) shares slot objects between nodes

  const walkAll = (v: unknown, cx: Context): void => {
    if (Array.isArray(v)) for (const x of v) walkAll(x, cx);
    else if (isNode(v)) walk(v, cx);
  };

  /** Children of a node we do not model: only `$$` paths inside them are record reads. */
  const walkChildren = (node: AstNode): void => {
    for (const child of Object.values(node)) {
      if (child !== null && typeof child === 'object') walkAll(child, 'other');
    }
  };

  const walkPath = (node: AstNode, cx: Context): void => {
    const steps = Array.isArray(node.steps) ? (node.steps as unknown[]).filter(isNode) : [];
    let atRow = cx === 'row';
    for (const step of steps) {
      const filters = [step.stages, step.predicate];
      if (step.type === 'variable' && (step.value === '' || step.value === '$')) {
        // `$` keeps the context; `$$` is the input record wherever it stands
        const keeps = step.value === '$' || atRow;
        for (const f of filters) walkFilters(f, keeps ? 'row' : 'other');
        atRow = keeps && !step.focus && !step.index;
        continue;
      }
      if (atRow && step.type === 'name' && typeof step.value === 'string') {
        out.reads.push({ name: step.value, offset: nodeStart(src, step) });
        for (const f of filters) walkFilters(f, 'other');
      } else {
        walk(step, atRow ? 'row' : 'other');
      }
      atRow = false;
    }
    if (node.group !== undefined) walkAll((node.group as { lhs?: unknown }).lhs, atRow ? 'row' : 'other');
  };

  const walkFilters = (stages: unknown, cx: Context): void => {
    if (!Array.isArray(stages)) return;
    for (const s of stages) if (isNode(s)) walkAll(s.expr, s.type === 'filter' ? cx : 'other');
  };

  const walk = (node: AstNode, cx: Context): void => {
    if (seen.has(node)) return;
    seen.add(node);
    switch (node.type) {
      case 'path':
        walkPath(node, cx);
        return;
      case 'name':
        // a name outside a path (the parser normally wraps them): a read when in the record's context
        if (cx === 'row' && typeof node.value === 'string') out.reads.push({ name: node.value, offset: nodeStart(src, node) });
        return;
      case 'function':
      case 'partial': {
        const proc = node.procedure;
        if (isNode(proc) && proc.type !== 'variable') walk(proc, cx);
        const args = Array.isArray(node.arguments) ? node.arguments : [];
        if (isNode(proc) && proc.type === 'variable' && proc.value === 'exists') guard(args[0], cx);
        walkAll(args, cx);
        return;
      }
      case 'condition':
        walkAll([node.condition, node.then, node.else], cx);
        return;
      case 'binary':
      case 'apply':
        walkAll([node.lhs, node.rhs], cx);
        return;
      case 'bind':
        walkAll(node.rhs, cx);
        return;
      case 'block':
        walkAll(node.expressions, cx);
        return;
      case 'unary':
        if (node.value === '{' && Array.isArray(node.lhs)) {
          // object constructor: keys are not read (brief), values are evaluated against the input
          for (const pair of node.lhs) if (Array.isArray(pair)) walkAll(pair[1], cx);
        } else walkAll([node.expression, node.expressions], cx);
        return;
      case 'variable':
        for (const f of [node.stages, node.predicate]) walkFilters(f, 'other');
        return;
      case 'string':
      case 'number':
      case 'value':
      case 'regex':
        return;
      default:
        // lambda, transform, sort, wildcard, descendant, parent, …: not the record's context
        walkChildren(node);
    }
  };

  /** `$exists(FIELD)` / `$exists($.FIELD)`: FIELD may be missing from a record. */
  const guard = (arg: unknown, cx: Context): void => {
    if (cx !== 'row' || !isNode(arg) || arg.type !== 'path' || !Array.isArray(arg.steps)) return;
    const first = (arg.steps as unknown[]).find((s) => !(isNode(s) && s.type === 'variable' && s.value === ''));
    if (isNode(first) && first.type === 'name' && typeof first.value === 'string') out.existsGuarded.add(first.value);
  };

  walkAll(ast, 'row');
  return out;
}
