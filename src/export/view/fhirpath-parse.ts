/**
 * The FHIRPath subset SQL-on-FHIR v2 views over Observation need, parsed by hand (docs/export-views.md): member
 * paths, indexers, literals, `%constant`, `$this`, `= != < > <= >= + - * /`, `and or xor implies`, and the
 * functions in `FUNCTIONS`. Anything else is a `FhirPathSyntaxError` with its character offset, so a view is
 * refused before anything is fetched.
 */

export type FhirPathNode =
  | { kind: 'literal'; value: string | number | boolean; at: number }
  | { kind: 'empty'; at: number }
  | { kind: 'this'; at: number }
  | { kind: 'constant'; name: string; at: number }
  | { kind: 'member'; base?: FhirPathNode; name: string; at: number }
  | { kind: 'call'; base?: FhirPathNode; name: string; args: FhirPathNode[]; at: number }
  | { kind: 'index'; base: FhirPathNode; index: FhirPathNode; at: number }
  | { kind: 'binary'; op: BinaryOp; left: FhirPathNode; right: FhirPathNode; at: number };

type BinaryOp = '=' | '!=' | '<' | '>' | '<=' | '>=' | '+' | '-' | '*' | '/' | 'and' | 'or' | 'xor' | 'implies';

/** Supported functions: name → [min, max] arguments. `ofType`/`getReferenceKey` take a type name. */
const FUNCTIONS: Readonly<Record<string, readonly [number, number]>> = {
  first: [0, 0],
  last: [0, 0],
  count: [0, 0],
  exists: [0, 1],
  empty: [0, 0],
  not: [0, 0],
  where: [1, 1],
  ofType: [1, 1],
  join: [0, 1],
  extension: [1, 1],
  getResourceKey: [0, 0],
  getReferenceKey: [0, 1],
};

export class FhirPathSyntaxError extends Error {
  constructor(
    message: string,
    /** 0-based character offset in the expression. */
    readonly at: number,
  ) {
    super(message);
    this.name = 'FhirPathSyntaxError';
  }
}

type Token =
  | { t: 'ident'; v: string; at: number }
  | { t: 'string'; v: string; at: number }
  | { t: 'number'; v: number; at: number }
  | { t: 'const'; v: string; at: number }
  | { t: 'op'; v: string; at: number }
  | { t: 'end'; at: number };

const OPS = ['<=', '>=', '!=', '=', '<', '>', '+', '-', '*', '/', '.', '(', ')', '[', ']', ',', '|', '&', '~', '!~'];
const ESCAPES: Record<string, string> = { "'": "'", '"': '"', '`': '`', '\\': '\\', '/': '/', f: '\f', n: '\n', r: '\r', t: '\t' };

function readQuoted(src: string, start: number, quote: string): { v: string; end: number } {
  let v = '';
  let i = start + 1;
  while (i < src.length && src[i] !== quote) {
    if (src[i] === '\\') {
      const e = src[i + 1] ?? '';
      if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(src.slice(i + 2, i + 6))) {
        v += String.fromCharCode(parseInt(src.slice(i + 2, i + 6), 16));
        i += 6;
        continue;
      }
      if (!(e in ESCAPES)) throw new FhirPathSyntaxError(`unknown escape \`\\${e}\``, i);
      v += ESCAPES[e];
      i += 2;
      continue;
    }
    v += src[i++];
  }
  if (i >= src.length) throw new FhirPathSyntaxError(`unterminated ${quote === "'" ? 'string' : 'name'}`, start);
  return { v, end: i + 1 };
}

function tokenize(src: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i]!;
    if (/\s/.test(c)) i++;
    else if (c === '/' && src[i + 1] === '/') while (i < src.length && src[i] !== '\n') i++;
    else if (c === "'" || c === '`') {
      const q = readQuoted(src, i, c);
      out.push(c === "'" ? { t: 'string', v: q.v, at: i } : { t: 'ident', v: q.v, at: i });
      i = q.end;
    } else if (/[0-9]/.test(c)) {
      const m = /^[0-9]+(\.[0-9]+)?/.exec(src.slice(i))![0];
      if (/^[A-Za-z'@]/.test(src.slice(i + m.length))) throw new FhirPathSyntaxError('quantity and date literals are not supported', i);
      out.push({ t: 'number', v: Number(m), at: i });
      i += m.length;
    } else if (/[A-Za-z_$]/.test(c)) {
      const m = /^[A-Za-z_$][A-Za-z0-9_]*/.exec(src.slice(i))![0];
      out.push({ t: 'ident', v: m, at: i });
      i += m.length;
    } else if (c === '%') {
      const rest = src.slice(i + 1);
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(rest)?.[0] ?? (rest.startsWith('`') ? readQuoted(src, i + 1, '`').v : undefined);
      if (m === undefined) throw new FhirPathSyntaxError('expected a name after `%`', i);
      out.push({ t: 'const', v: m, at: i });
      i += 1 + (rest.startsWith('`') ? readQuoted(src, i + 1, '`').end - i - 1 : m.length);
    } else {
      const op = OPS.find((o) => src.startsWith(o, i));
      if (!op) throw new FhirPathSyntaxError(`unexpected character \`${c}\``, i);
      out.push({ t: 'op', v: op, at: i });
      i += op.length;
    }
  }
  out.push({ t: 'end', at: src.length });
  return out;
}

/** Binding powers, lowest first (FHIRPath §"Operator precedence"); the unsupported ones are refused by name. */
const INFIX: Record<string, number> = { implies: 1, or: 2, xor: 2, and: 3, '=': 5, '!=': 5, '<': 6, '>': 6, '<=': 6, '>=': 6, '+': 8, '-': 8, '*': 9, '/': 9 };
const UNSUPPORTED_INFIX = new Set(['in', 'contains', '|', '&', '~', '!~', 'is', 'as', 'div', 'mod']);

class Parser {
  #i = 0;
  constructor(readonly tokens: Token[]) {}

  peek(): Token {
    return this.tokens[this.#i]!;
  }
  next(): Token {
    return this.tokens[this.#i++]!;
  }
  expectOp(v: string): Token {
    const t = this.next();
    if (t.t !== 'op' || t.v !== v) throw new FhirPathSyntaxError(`expected \`${v}\`${t.t === 'end' ? ' before the end' : ''}`, t.at);
    return t;
  }

  expression(minPower = 0): FhirPathNode {
    let left = this.unary();
    for (;;) {
      const t = this.peek();
      const op = t.t === 'op' || t.t === 'ident' ? String(t.v) : '';
      if (UNSUPPORTED_INFIX.has(op)) throw new FhirPathSyntaxError(`the operator \`${op}\` is not supported`, t.at);
      const power = t.t === 'op' || t.t === 'ident' ? INFIX[op] : undefined;
      if (power === undefined || power <= minPower) return left;
      this.next();
      const right = this.expression(power);
      left = { kind: 'binary', op: op as BinaryOp, left, right, at: t.at };
    }
  }

  unary(): FhirPathNode {
    const t = this.peek();
    if (t.t === 'op' && (t.v === '-' || t.v === '+')) {
      this.next();
      const operand = this.unary();
      if (operand.kind !== 'literal' || typeof operand.value !== 'number') throw new FhirPathSyntaxError('a sign only before a number', t.at);
      return { ...operand, value: t.v === '-' ? -operand.value : operand.value, at: t.at };
    }
    return this.postfix(this.term());
  }

  term(): FhirPathNode {
    const t = this.next();
    switch (t.t) {
      case 'string':
        return { kind: 'literal', value: t.v, at: t.at };
      case 'number':
        return { kind: 'literal', value: t.v, at: t.at };
      case 'const':
        return { kind: 'constant', name: t.v, at: t.at };
      case 'ident':
        return this.identifier(t, undefined);
      case 'op':
        if (t.v === '(') {
          const inner = this.expression();
          this.expectOp(')');
          return inner;
        }
        throw new FhirPathSyntaxError(`unexpected \`${t.v}\``, t.at);
      case 'end':
        throw new FhirPathSyntaxError('expected an expression', t.at);
    }
  }

  /** A name, a function call or a keyword literal (`true`, `false`, `$this`), on `base` when after a dot. */
  identifier(t: Extract<Token, { t: 'ident' }>, base: FhirPathNode | undefined): FhirPathNode {
    if (!base && (t.v === 'true' || t.v === 'false')) return { kind: 'literal', value: t.v === 'true', at: t.at };
    if (t.v === '$this') return { kind: 'this', at: t.at };
    if (t.v.startsWith('$')) throw new FhirPathSyntaxError(`\`${t.v}\` is not supported`, t.at);
    const open = this.peek();
    if (open.t !== 'op' || open.v !== '(') return { kind: 'member', base, name: t.v, at: t.at };
    this.next();
    const args: FhirPathNode[] = [];
    const close = this.peek();
    if (!(close.t === 'op' && close.v === ')')) {
      args.push(this.expression());
      while (this.peek().t === 'op' && (this.peek() as { v: string }).v === ',') {
        this.next();
        args.push(this.expression());
      }
    }
    this.expectOp(')');
    const arity = FUNCTIONS[t.v];
    if (!arity) throw new FhirPathSyntaxError(`the function \`${t.v}()\` is not supported`, t.at);
    if (args.length < arity[0] || args.length > arity[1])
      throw new FhirPathSyntaxError(
        `\`${t.v}()\` takes ${arity[0] === arity[1] ? arity[0] : `${arity[0]} to ${arity[1]}`} arguments, got ${args.length}`,
        t.at,
      );
    return { kind: 'call', base, name: t.v, args, at: t.at };
  }

  postfix(node: FhirPathNode): FhirPathNode {
    for (;;) {
      const t = this.peek();
      if (t.t !== 'op') return node;
      if (t.v === '.') {
        this.next();
        const name = this.next();
        if (name.t !== 'ident') throw new FhirPathSyntaxError('expected a name after `.`', name.at);
        node = this.identifier(name, node);
      } else if (t.v === '[') {
        this.next();
        const index = this.expression();
        this.expectOp(']');
        node = { kind: 'index', base: node, index, at: t.at };
      } else return node;
    }
  }
}

/** Parses one expression; a `FhirPathSyntaxError` names what is not supported (or wrong) and where. */
export function parseFhirPath(src: string): FhirPathNode {
  const p = new Parser(tokenize(src));
  const node = p.expression();
  const rest = p.peek();
  if (rest.t !== 'end') throw new FhirPathSyntaxError(`unexpected \`${'v' in rest ? rest.v : ''}\` after the expression`, rest.at);
  return node;
}
