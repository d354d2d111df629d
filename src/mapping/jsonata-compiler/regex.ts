/**
 * Regular expression literals and the string functions that take one (`$match`, `$replace`, `$contains`,
 * `$split`): jsonata 2.2's `evaluateRegex`, `evaluateMatcher` and those four functions, synchronous, on the same
 * linear-time engine the interpreter is given (src/core/linear-regex.ts, RE2: no backtracking, same limits).
 * A matcher that is not a regex literal (a user function) → BAIL.
 */
import { LinearRegExp } from '../../core/linear-regex.js';
import { bail, seq, type Seq } from './runtime.js';
import type { FunctionValue } from './types.js';

interface RegexMatch {
  match: string;
  start: number;
  end: number;
  groups: string[];
  next: () => RegexMatch | undefined;
}

type Matcher = (str: string, fromIndex?: number) => RegexMatch | undefined;

const MATCHER: unique symbol = Symbol('regex matcher');

/**
 * The value of a regex literal, made once per literal: the interpreter makes a new engine at each evaluation, but
 * every use sets `lastIndex` first and runs to its end before another starts (no user code runs in between: a
 * replacement function BAILs), so one engine and its RE2 matcher serve them all.
 */
export function regexLiteral(source: RegExp): () => FunctionValue {
  let value: FunctionValue | undefined;
  return () => (value ??= regexValue(source));
}

function regexValue(source: RegExp): FunctionValue {
  const re = new LinearRegExp(source);
  const closure: Matcher = (str, fromIndex) => {
    re.lastIndex = fromIndex || 0;
    const m = re.exec(str);
    if (m === null) return undefined;
    const result: RegexMatch = { match: m[0], start: m.index, end: m.index + m[0].length, groups: [], next: () => undefined };
    for (let i = 1; i < m.length; i++) result.groups.push(m[i]!);
    result.next = () => {
      if (re.lastIndex >= str.length) return undefined;
      const next = closure(str, re.lastIndex);
      if (next && next.match === '') bail(); // D1004: a zero-length match never progresses
      return next;
    };
    return result;
  };
  const value = ((): unknown => bail()) as unknown as FunctionValue; // called as a plain function (`$map(x, /re/)`)
  value.arity = 2;
  (value as unknown as Record<symbol, Matcher>)[MATCHER] = closure;
  return value;
}

function matcherOf(v: unknown): Matcher {
  const m = typeof v === 'function' ? (v as unknown as Record<symbol, Matcher | undefined>)[MATCHER] : undefined;
  return m ?? bail();
}

export function contains(str: unknown, token: unknown): boolean | undefined {
  if (str === undefined || token === undefined) return undefined;
  if (typeof token === 'string') return (str as string).indexOf(token) !== -1;
  return matcherOf(token)(str as string) !== undefined;
}

export function match(str: unknown, regex: unknown, limit?: unknown): Seq | undefined {
  if (str === undefined) return undefined;
  if ((limit as number) < 0) bail(); // D3040
  const result = seq();
  if (limit === undefined || (limit as number) > 0) {
    let count = 0;
    let m = matcherOf(regex)(str as string);
    while (m !== undefined && (limit === undefined || count < (limit as number))) {
      result.push({ match: m.match, index: m.start, groups: m.groups });
      m = m.next();
      count++;
    }
  }
  return result;
}

export function split(str: unknown, separator: unknown, limit?: unknown): unknown {
  if (str === undefined) return undefined;
  if ((limit as number) < 0) bail(); // D3020
  const result: string[] = [];
  if (limit !== undefined && !((limit as number) > 0)) return result;
  const s = str as string;
  if (typeof separator === 'string') return s.split(separator, limit as number | undefined);
  let count = 0;
  let m = matcherOf(separator)(s);
  if (m === undefined) return [s];
  let start = 0;
  while (m !== undefined && (limit === undefined || count < (limit as number))) {
    result.push(s.substring(start, m.start));
    start = m.end;
    m = m.next();
    count++;
  }
  if (limit === undefined || count < (limit as number)) result.push(s.substring(start));
  return result;
}

/** `$n` in a replacement string: JSONata's own reading (`$$`, `$0`, as many digits as there are groups). */
function substitute(replacement: string, m: RegexMatch): string {
  let out = '';
  let position = 0;
  let index = replacement.indexOf('$', position);
  while (index !== -1 && position < replacement.length) {
    out += replacement.substring(position, index);
    position = index + 1;
    const dollarVal = replacement.charAt(position);
    if (dollarVal === '$') {
      out += '$';
      position++;
    } else if (dollarVal === '0') {
      out += m.match;
      position++;
    } else {
      const maxDigits = m.groups.length === 0 ? 1 : Math.floor(Math.log(m.groups.length) * Math.LOG10E) + 1;
      index = parseInt(replacement.substring(position, position + maxDigits), 10);
      if (maxDigits > 1 && index > m.groups.length) index = parseInt(replacement.substring(position, position + maxDigits - 1), 10);
      if (!isNaN(index)) {
        if (m.groups.length > 0) {
          const sub = m.groups[index - 1];
          if (sub !== undefined) out += sub;
        }
        position += index.toString().length;
      } else {
        out += '$';
      }
    }
    index = replacement.indexOf('$', position);
  }
  return out + replacement.substring(position);
}

export function replace(str: unknown, pattern: unknown, replacement: unknown, limit?: unknown): unknown {
  if (str === undefined) return undefined;
  if (pattern === '') bail(); // D3010
  if ((limit as number) < 0) bail(); // D3011
  if (typeof replacement !== 'string') bail(); // a function computing the replacement: the interpreter
  const s = str as string;
  if (limit !== undefined && !((limit as number) > 0)) return s;
  let result = '';
  let position = 0;
  let count = 0;
  if (typeof pattern === 'string') {
    let index = s.indexOf(pattern, position);
    while (index !== -1 && (limit === undefined || count < (limit as number))) {
      result += s.substring(position, index) + replacement;
      position = index + pattern.length;
      count++;
      index = s.indexOf(pattern, position);
    }
    return result + s.substring(position);
  }
  let m = matcherOf(pattern)(s);
  if (m === undefined) return s;
  while (m !== undefined && (limit === undefined || count < (limit as number))) {
    result += s.substring(position, m.start) + substitute(replacement, m);
    position = m.start + m.match.length;
    count++;
    m = m.next();
  }
  return result + s.substring(position);
}
