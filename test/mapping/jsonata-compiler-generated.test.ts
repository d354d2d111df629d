/**
 * Field reads and object / array constructors are compiled to code generated per node (jsonata-compiler/
 * generated.ts): names and keys go into that code as string literals. With the interpreter as oracle, names that
 * need escaping (quotes, backslash, line and paragraph separators, `${`), names an object inherits (`toString`,
 * `constructor`, `__proto__`), integer-like keys, nested and flattened array items all read and build as JSONata
 * reads and builds them; a library function is called straight from its call site with the same answers and the
 * same bails (a function as argument, a promise as result: the interpreter decides).
 */
import jsonata from 'jsonata';
import { describe, expect, it } from 'vitest';
import { mappingExpressionCompiler } from '../../src/mapping/expression-evaluator.js';
import { JSONATA_BUILTINS, registerFunctions } from '../../src/mapping/functions.js';
import { builtinCallables, compileExpression, type CompileOptions } from '../../src/mapping/jsonata-compiler/index.js';
import { showValue } from './jsonata-compiler-helpers.js';

const OPTIONS: CompileOptions = { functions: builtinCallables(), functionNames: new Set(JSONATA_BUILTINS), assigned: {}, bindingNames: new Set() };

/** Names that would break generated code written without escaping, and names every object inherits. */
const ODD = ['a"b', "a'b", 'a\\b', 'a\nb', 'a\u2028b', 'a\u2029b', '${x}', '`', '*/', 'toString', 'constructor', 'hasOwnProperty', '__proto__', '0', '10', ''];

/** A JSONata backtick name: backticks cannot be escaped in one, so those names are read through `$lookup`. */
const field = (name: string) => (name.includes('`') ? `$lookup($, ${JSON.stringify(name)})` : `\`${name}\``);

async function agree(src: string, input: unknown): Promise<void> {
  const c = compileExpression(jsonata(src).ast(), OPTIONS);
  if (!c.ok) throw new Error(`not compiled: ${src} (${c.reason})`);
  const interpreted = showValue(await jsonata(src).evaluate(structuredClone(input)));
  expect(showValue(c.fn(structuredClone(input))), src).toBe(interpreted);
}

describe('generated field reads and constructors agree with the interpreter', () => {
  const own = Object.fromEntries(ODD.map((k, i) => [k, `v${i}`]));
  // JSON.parse makes `__proto__` an own field, as parsed JSON sources have it
  const parsed = JSON.parse(JSON.stringify(own).replace('"__proto__":"v12"', '"__proto__":{"p":1}')) as Record<string, unknown>;
  const nullProto = Object.assign(Object.create(null) as Record<string, unknown>, { a: 1, toString: 'own' });

  it('reads every odd name as an own field, and inherited names as nothing', async () => {
    for (const name of ODD) {
      for (const input of [own, parsed, {}, nullProto, [own, {}, parsed], { [name]: [1, 2] }, { [name]: [] }, { [name]: null }])
        await agree(field(name), input);
    }
  });

  it('builds objects with odd keys, in key order, leaving out undefined values', async () => {
    const keys = ODD.filter((k) => k !== '__proto__'); // a literal `__proto__` key stays on the generic constructor
    const src = `{${keys.map((k, i) => `${JSON.stringify(k)}: ${i % 3 === 0 ? 'missing' : i % 3 === 1 ? `"${i}"` : 'a'}`).join(', ')}}`;
    for (const input of [{ a: 1 }, { a: [1, 2] }, {}, [{ a: 1 }, { a: 2 }], []]) await agree(src, input);
    await agree('{"b": a, "a": b, "10": c, "2": d}', { a: 1, b: 2, c: 3, d: 4 });
  });

  it('builds arrays: items spread or nested, undefined left out, cons kept', async () => {
    for (const src of ['[a, b, [c], missing, [[d]], a.x]', '[a][0]', '[[a, b], c]', 'a.[b, c]', '[a, b]', '[]']) {
      for (const input of [{ a: [1, 2], b: 'x', c: [3], d: 4 }, { a: { x: [5] } }, {}, [{ a: 1, b: 2, c: 3 }, { a: 4 }]]) await agree(src, input);
    }
  });
});

describe('library functions called from generated call sites', () => {
  const gender = Object.assign(Object.create(null) as Record<string, string>, { M: 'male', F: 'female' });
  const tableNames = new WeakMap<object, string>([[gender, 'gender']]);
  const compileMapped = mappingExpressionCompiler({ tableNames, lookups: { gender } });

  async function interpretedValue(src: string, input: unknown): Promise<string> {
    const expr = jsonata(src);
    registerFunctions(expr, { tableNames });
    expr.assign('gender', gender);
    try {
      return showValue(await expr.evaluate(input));
    } catch (err) {
      return `error ${(err as { code?: string }).code}`;
    }
  }

  it('answer as the interpreter does, and bail where it wraps a function argument', async () => {
    const input = { a: ' ANN  LEE ', b: ['MCDONALD', ' x '], p: '(555) 123-4567', d: '02/29/2024', s: 'F', n: 5551234567 };
    const cases: [string, 'value' | 'bail'][] = [
      ['$name(a)', 'value'],
      ['$name(b)', 'value'],
      ['b ~> $clean()', 'value'],
      ['$phone(p)', 'value'],
      ['$phone(n, "US")', 'value'],
      ['$date(d, "MM/DD/YYYY")', 'value'],
      ['$lookup($gender, s)', 'value'],
      ['$lookup($gender, "X", "other")', 'value'],
      ['[$name(missing), $clean(a)]', 'value'],
      // the interpreter hands the function over as its own object (a lambda's `body`, a built-in's `implementation`)
      ['$lookup(function($x) { $x }, "body")', 'bail'],
      ['$lookup($string, "implementation")', 'bail'],
      ['$clean(function($x) { $x })', 'bail'],
    ];
    for (const [src, expected] of cases) {
      const c = compileMapped(jsonata(src));
      if (!c.ok) throw new Error(`not compiled: ${src} (${c.reason})`);
      let mine: string;
      try {
        mine = showValue(c.fn(structuredClone(input)));
      } catch {
        mine = 'bail';
      }
      if (expected === 'bail') expect(mine, src).toBe('bail');
      else expect(mine, src).toBe(await interpretedValue(src, structuredClone(input)));
    }
  });
});
