/**
 * Which columns of the export a row-level failure is about (issue 26: "column DOB: not a date …"): the row fields
 * (row-fields.ts) read by the arguments of the function call that failed, by a whole expression (a key), or by the
 * value the map builds at a resource path (a schema error at `/birthDate`). Found on JSONata's syntax tree, once
 * per expression: failures are per row, parsing is per expression.
 */
import { jsonataExpression } from '../core/jsonata-package.js';
import type { AstNode } from './jsonata-ast.js';
import { rowFieldReads } from './row-fields.js';

/** Expressions already parsed (a mapping has a handful; the bound only guards against pathological use). */
const parsed = new Map<string, AstNode | null>();
const MAX_PARSED = 1000;

function astOf(src: string): AstNode | undefined {
  let ast = parsed.get(src);
  if (ast === undefined) {
    try {
      ast = jsonataExpression(src).ast() as unknown as AstNode;
    } catch {
      ast = null;
    }
    if (parsed.size >= MAX_PARSED) parsed.clear();
    parsed.set(src, ast);
  }
  return ast ?? undefined;
}

function isNode(v: unknown): v is AstNode {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && typeof (v as { type?: unknown }).type === 'string';
}

/** Distinct names, in order of first appearance. */
function namesRead(src: string, node: unknown): string[] {
  return [...new Set(rowFieldReads(src, node as object).reads.map((r) => r.name))];
}

/** Every node of the tree, depth first (no recursion limit issues: expressions are small, but the walk is iterative). */
function* nodes(root: unknown): Generator<AstNode> {
  const stack: unknown[] = [root];
  const seen = new WeakSet<object>();
  while (stack.length) {
    const v = stack.pop();
    if (Array.isArray(v)) for (const x of v) stack.push(x);
    else if (isNode(v) && !seen.has(v)) {
      seen.add(v);
      yield v;
      for (const child of Object.values(v)) if (child !== null && typeof child === 'object') stack.push(child);
    }
  }
}

/** The columns read by the expression `src` (a key: `MRN`, `$pad(ID, 6)`). */
export function columnsOfExpression(src: string): string[] {
  const ast = astOf(src);
  return ast ? namesRead(src, ast) : [];
}

/**
 * The columns read by the arguments of the call JSONata blames for an error (`position` just after its `(`,
 * `token` the function's name); none when no call matches (an operator's error, a parse we cannot follow).
 */
export function columnsOfCall(src: string, position: unknown, token: unknown): string[] {
  if (typeof position !== 'number') return [];
  const ast = astOf(src);
  if (!ast) return [];
  for (const n of nodes(ast)) {
    if (n.type !== 'function' || n.position !== position) continue;
    const proc = n.procedure as AstNode | undefined;
    if (typeof token === 'string' && proc?.value !== token) continue;
    return namesRead(src, n.arguments ?? []);
  }
  return [];
}

/**
 * The columns read by the value the map expression `src` builds at the resource path `pointer` (`/name/0/family`:
 * array positions are ignored; the deepest object key of the map on that path decides). Only object constructors
 * and array constructors written in the map are followed: a value built another way gives the columns read up to there.
 */
export function columnsOfField(src: string, pointer: string | undefined): string[] {
  const ast = astOf(src);
  if (!ast || pointer === undefined) return [];
  const steps = pointer
    .split('/')
    .slice(1)
    .filter((s) => !/^\d+$/.test(s))
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  let node: unknown = ast;
  let best: unknown;
  for (const step of steps) {
    const value = objectValue(node, step);
    if (value === undefined) break;
    best = node = value;
  }
  return best === undefined ? [] : namesRead(src, best);
}

/** The value expression of key `name` in the object constructor `node` (through array constructors), if written there. */
function objectValue(node: unknown, name: string): unknown {
  if (!isNode(node) || node.type !== 'unary') return undefined;
  if (node.value === '[' && Array.isArray(node.expressions)) {
    for (const e of node.expressions) {
      const v = objectValue(e, name);
      if (v !== undefined) return v;
    }
    return undefined;
  }
  if (node.value !== '{' || !Array.isArray(node.lhs)) return undefined;
  for (const pair of node.lhs) {
    if (Array.isArray(pair) && isNode(pair[0]) && pair[0].type === 'string' && pair[0].value === name) return pair[1];
  }
  return undefined;
}
