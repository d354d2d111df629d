/**
 * JSONata's function signatures (`<s-nn?:s>`), ported from jsonata 2.2's `parseSignature`: the same argument
 * checks and fix-ups (the context value for a missing `-` argument, a single value wrapped for an `a` parameter),
 * synchronous, and BAIL where JSONata throws T0410 / T0411 / T0412.
 */
import { bail, isFunction } from './runtime.js';

interface Param {
  regex: string;
  type: string;
  array?: boolean;
  context?: boolean;
  contextRegex?: RegExp;
  subtype?: string;
}

export interface Signature {
  definition: string;
  /** Whether these arguments leave a context parameter (`-`) to the context (the input of the call). */
  readsContext(args: unknown[]): boolean;
  validate(args: unknown[], context: unknown): unknown[];
}

function symbolOf(value: unknown): string {
  if (isFunction(value)) return 'f';
  switch (typeof value) {
    case 'string':
      return 's';
    case 'number':
      return 'n';
    case 'boolean':
      return 'b';
    case 'object':
      return value === null ? 'l' : Array.isArray(value) ? 'a' : 'o';
    default:
      return 'm';
  }
}

function closing(str: string, start: number, open: string, close: string): number {
  let depth = 1;
  let pos = start;
  while (pos < str.length) {
    pos++;
    const c = str.charAt(pos);
    if (c === close) {
      depth--;
      if (depth === 0) break;
    } else if (c === open) {
      depth++;
    }
  }
  return pos;
}

/** JSONata's one-letter parameter types and the value kinds (`typeLetter`) each accepts. */
const SIMPLE_PARAM_REGEX: Record<string, string> = {
  s: '[sm]',
  n: '[nm]',
  b: '[bm]',
  l: '[lm]',
  o: '[om]',
  a: '[asnblfom]',
  f: 'f',
  j: '[asnblom]',
  x: '[asnblfom]',
};

function parseParams(signature: string): Param[] {
  const params: Param[] = [];
  let param = {} as Param;
  let prev = param;
  const next = () => {
    params.push(param);
    prev = param;
    param = {} as Param;
  };
  for (let pos = 1; pos < signature.length; pos++) {
    const symbol = signature.charAt(pos);
    if (symbol === ':') break;
    const simple = SIMPLE_PARAM_REGEX[symbol];
    if (simple !== undefined) {
      param.regex = simple;
      param.type = symbol;
      if (symbol === 'a') param.array = true;
      next();
      continue;
    }
    switch (symbol) {
      case '-':
        prev.context = true;
        prev.contextRegex = new RegExp(prev.regex);
        prev.regex += '?';
        break;
      case '?':
      case '+':
        prev.regex += symbol;
        break;
      case '(': {
        const end = closing(signature, pos, '(', ')');
        const choice = signature.substring(pos + 1, end);
        if (choice.includes('<')) throw new Error(`unsupported signature ${signature}`);
        param.regex = `[${choice}m]`;
        param.type = `(${choice})`;
        pos = end;
        next();
        break;
      }
      case '<': {
        if (prev.type !== 'a' && prev.type !== 'f') throw new Error(`unsupported signature ${signature}`);
        const end = closing(signature, pos, '<', '>');
        prev.subtype = signature.substring(pos + 1, end);
        pos = end;
        break;
      }
    }
  }
  return params;
}

export function parseSignature(signature: string): Signature {
  const params = parseParams(signature);
  const regex = new RegExp(`^${params.map((p) => `(${p.regex})`).join('')}$`);
  const hasContext = params.some((p) => p.context);
  return {
    definition: signature,
    readsContext(args) {
      if (!hasContext) return false;
      let supplied = '';
      for (const a of args) supplied += symbolOf(a);
      const valid = regex.exec(supplied);
      return valid !== null && params.some((p, i) => p.context === true && valid[i + 1] === '');
    },
    validate(args, context) {
      let supplied = '';
      for (const a of args) supplied += symbolOf(a);
      const valid = regex.exec(supplied);
      if (!valid) return bail(); // T0410
      const out: unknown[] = [];
      let argIndex = 0;
      params.forEach((param, index) => {
        let arg = args[argIndex];
        const match = valid[index + 1];
        if (match === '') {
          if (param.context && param.contextRegex) {
            if (!param.contextRegex.test(symbolOf(context))) bail(); // T0411
            out.push(context);
          } else {
            out.push(arg);
            argIndex++;
          }
          return;
        }
        for (const single of match.split('')) {
          arg = args[argIndex];
          if (param.type === 'a') {
            if (single === 'm') {
              arg = undefined;
            } else {
              let ok = true;
              if (param.subtype !== undefined) {
                if (single !== 'a' && match !== param.subtype) {
                  ok = false;
                } else if (single === 'a' && (arg as unknown[]).length > 0) {
                  const itemType = symbolOf((arg as unknown[])[0]);
                  ok = itemType === param.subtype.charAt(0) && (arg as unknown[]).every((v) => symbolOf(v) === itemType);
                }
              }
              if (!ok) bail(); // T0412
              if (single !== 'a') arg = [arg];
            }
          }
          out.push(arg);
          argIndex++;
        }
      });
      return out;
    },
  };
}
