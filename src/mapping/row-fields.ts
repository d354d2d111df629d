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
  const walker = new RowFieldWalker(src);
  walker.walkAll(ast, 'row');
  return walker.out;
}

/** One walk over one expression's tree, collecting its row field reads into `out`. */
class RowFieldWalker {
  readonly out: RowFields = { reads: [], existsGuarded: new Set() };
  readonly #seen = new WeakSet<object>(); // the parent operator (%) shares slot objects between nodes

  constructor(private readonly src: string) {}

  walkAll(v: unknown, cx: Context): void {
    if (Array.isArray(v)) for (const x of v) this.walkAll(x, cx);
    else if (isNode(v)) this.#walk(v, cx);
  }

  /** Children of a node we do not model: only `$$` paths inside them are record reads. */
  #walkChildren(node: AstNode): void {
    for (const child of Object.values(node)) {
      if (child !== null && typeof child === 'object') this.walkAll(child, 'other');
    }
  }

  #walkPath(node: AstNode, cx: Context): void {
    const steps = Array.isArray(node.steps) ? (node.steps as unknown[]).filter(isNode) : [];
    let atRow = cx === 'row';
    for (const step of steps) {
      const filters = [step.stages, step.predicate];
      if (step.type === 'variable' && (step.value === '' || step.value === '$')) {
        // `$` keeps the context; `$$` is the input record wherever it stands
        const keeps = step.value === '$' || atRow;
        for (const f of filters) this.#walkFilters(f, keeps ? 'row' : 'other');
        atRow = keeps && !step.focus && !step.index;
        continue;
      }
      if (atRow && step.type === 'name' && typeof step.value === 'string') {
        this.out.reads.push({ name: step.value, offset: nodeStart(this.src, step) });
        for (const f of filters) this.#walkFilters(f, 'other');
      } else {
        this.#walk(step, atRow ? 'row' : 'other');
      }
      atRow = false;
    }
    if (node.group !== undefined) this.walkAll((node.group as { lhs?: unknown }).lhs, atRow ? 'row' : 'other');
  }

  #walkFilters(stages: unknown, cx: Context): void {
    if (!Array.isArray(stages)) return;
    for (const s of stages) if (isNode(s)) this.walkAll(s.expr, s.type === 'filter' ? cx : 'other');
  }

  #walk(node: AstNode, cx: Context): void {
    if (this.#seen.has(node)) return;
    this.#seen.add(node);
    switch (node.type) {
      case 'path':
        this.#walkPath(node, cx);
        return;
      case 'name':
        // a name outside a path (the parser normally wraps them): a read when in the record's context
        if (cx === 'row' && typeof node.value === 'string') this.out.reads.push({ name: node.value, offset: nodeStart(this.src, node) });
        return;
      case 'function':
      case 'partial':
        this.#walkCall(node, cx);
        return;
      case 'condition':
        this.walkAll([node.condition, node.then, node.else], cx);
        return;
      case 'binary':
      case 'apply':
        this.walkAll([node.lhs, node.rhs], cx);
        return;
      case 'bind':
        this.walkAll(node.rhs, cx);
        return;
      case 'block':
        this.walkAll(node.expressions, cx);
        return;
      case 'unary':
        if (node.value === '{' && Array.isArray(node.lhs)) {
          // object constructor: keys are not read (brief), values are evaluated against the input
          for (const pair of node.lhs) if (Array.isArray(pair)) this.walkAll(pair[1], cx);
        } else this.walkAll([node.expression, node.expressions], cx);
        return;
      case 'variable':
        for (const f of [node.stages, node.predicate]) this.#walkFilters(f, 'other');
        return;
      case 'string':
      case 'number':
      case 'value':
      case 'regex':
        return;
      default:
        // lambda, transform, sort, wildcard, descendant, parent, …: not the record's context
        this.#walkChildren(node);
    }
  }

  #walkCall(node: AstNode, cx: Context): void {
    const proc = node.procedure;
    if (isNode(proc) && proc.type !== 'variable') this.#walk(proc, cx);
    const args = Array.isArray(node.arguments) ? node.arguments : [];
    if (isNode(proc) && proc.type === 'variable' && proc.value === 'exists') this.#guard(args[0], cx);
    this.walkAll(args, cx);
  }

  /** `$exists(FIELD)` / `$exists($.FIELD)`: FIELD may be missing from a record. */
  #guard(arg: unknown, cx: Context): void {
    if (cx !== 'row' || !isNode(arg) || arg.type !== 'path' || !Array.isArray(arg.steps)) return;
    const first = (arg.steps as unknown[]).find((s) => !(isNode(s) && s.type === 'variable' && s.value === ''));
    if (isNode(first) && first.type === 'name' && typeof first.value === 'string') this.out.existsGuarded.add(first.value);
  }
}
