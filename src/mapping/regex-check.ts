/**
 * Every regular-expression literal of an expression must run on the linear-time engine (src/core/linear-regex.ts):
 * a pattern it cannot run (lookaround, backreference) is reported when the mapping is checked — by `validate` and
 * before `run` / `plan` write anything — at the literal's file:line:col, not as a rejection of every row.
 */
import { compileLinear, LinearRegexError } from '../core/linear-regex.js';
import type { AstProblem } from './jsonata-ast.js';

type RegexNode = { type: 'regex'; value: RegExp; position?: number };

function isRegexNode(v: unknown): v is RegexNode {
  return v !== null && typeof v === 'object' && (v as { type?: unknown }).type === 'regex' && (v as { value?: unknown }).value instanceof RegExp;
}

/** Offset of the opening `/` of a literal. JSONata's `position` is just after its flags. */
export function regexStart(src: string, node: RegexNode): number {
  const end = typeof node.position === 'number' ? node.position : 0;
  let close = end - 1;
  while (close > 0 && (src[close] === 'i' || src[close] === 'm')) close--;
  const open = close - node.value.source.length - 1;
  if (src[close] === '/' && src[open] === '/' && src.slice(open + 1, close) === node.value.source) return open;
  const guess = src.lastIndexOf('/', close - 1);
  return Math.max(0, guess);
}

/** The regular-expression literals of an AST that the linear-time engine cannot run. */
export function regexProblems(src: string, ast: unknown): AstProblem[] {
  const problems: AstProblem[] = [];
  const seen = new WeakSet<object>();
  const walk = (v: unknown): void => {
    if (v === null || typeof v !== 'object' || v instanceof RegExp || seen.has(v)) return;
    seen.add(v);
    if (isRegexNode(v)) {
      try {
        compileLinear(v.value);
      } catch (err) {
        if (!(err instanceof LinearRegexError)) throw err;
        problems.push({
          code: 'regex-unsupported',
          message: `${err.message}; ${err.fix} (docs/mapping-functions.md, "Regular expressions")`,
          offset: regexStart(src, v),
        });
      }
      return;
    }
    for (const child of Array.isArray(v) ? v : Object.values(v)) walk(child);
  };
  walk(ast);
  return problems;
}
