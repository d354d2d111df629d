/**
 * The JSONata compiler against the interpreter (the oracle) on random expressions of its subset over random data
 * (fast-check, seeded): wherever the compiled closure returns, it returns the interpreter's very value (sequence
 * flags included) and leaves the input as the interpreter leaves it; where the interpreter fails, the closure
 * throws (bails). Operators, casts, paths with predicates and `[]`, object constructors (grouping, `.{}` on arrays
 * of arrays), blocks with `:=`, `$` / `$$`, evaluate()'s bindings, an assigned table and the built-ins; lambdas
 * (closures, recursion, given to the higher-order built-ins), built-ins as values and regex literals.
 * Runs: CARE_PROPERTY_RUNS (default 2000). Seed: CARE_PROPERTY_SEED.
 */
import fc from 'fast-check';
import jsonata from 'jsonata';
import { describe, expect, it } from 'vitest';
import { JSONATA_OPTIONS } from '../../src/mapping/expression-evaluator.js';
import { JSONATA_BUILTINS } from '../../src/mapping/functions.js';
import { builtinCallables, compileExpression, type CompileOptions } from '../../src/mapping/jsonata-compiler/index.js';
import { showValue } from './jsonata-compiler-helpers.js';

const RUNS = Number(process.env.CARE_PROPERTY_RUNS ?? 2000);
const SEED = Number(process.env.CARE_PROPERTY_SEED ?? 20_251_124);

const TABLE = { a: 'A', '1': ['x', 'y'], b: { c: 1 } };
const OPTIONS: CompileOptions = {
  functions: builtinCallables(),
  functionNames: new Set(JSONATA_BUILTINS),
  assigned: { t: TABLE },
  bindingNames: new Set(['w']),
};

const NAMES = ['a', 'b', 'c', '`1`'];
const ATOMS = [
  ...NAMES,
  '$',
  '$$',
  '$x',
  '$y',
  '$t',
  '$w',
  '$v',
  '$i',
  '0',
  '1',
  '-1',
  '0.5',
  '2',
  '""',
  '"a"',
  '"1"',
  'true',
  'false',
  'null',
  '[]',
  '{}',
  '1e21',
  '0.1',
  '-0',
];
const OPS = ['+', '-', '*', '/', '%', '=', '!=', '<', '<=', '>', '>=', '&', 'and', 'or', 'in'];
const FN1 = [
  '$string',
  '$uppercase',
  '$length',
  '$trim',
  '$number',
  '$abs',
  '$floor',
  '$sum',
  '$max',
  '$count',
  '$exists',
  '$boolean',
  '$not',
  '$keys',
  '$join',
  '$average',
];
const FN2 = ['$substring', '$substringBefore', '$substringAfter', '$contains', '$split', '$join', '$append', '$lookup', '$string'];
const FN3 = ['$substring', '$split', '$replace'];

const HOF = ['$map', '$filter', '$each', '$sift', '$reduce', '$single'];
const REGEX = ['/a/', '/[0-9]+/', '/(a)(b)?/i', '/^$/', '/,\\s*/', '/x*/'];
const NATIVE = ['$fromMillis', '$formatNumber', '$distinct', '$round', '$reverse', '$type', '$pad', '$toMillis'];

const expression: fc.Arbitrary<string> = fc.letrec<{ e: string }>((tie) => {
  const e = tie('e');
  return {
    e: fc.oneof(
      { depthSize: 'small' },
      fc.constantFrom(...ATOMS),
      e.map((x) => `(${x})`),
      fc.tuple(e, e).map(([x, y]) => `${x}.${y}`),
      fc.tuple(e, fc.constantFrom(...NAMES)).map(([x, y]) => `${x}.${y}`),
      fc.tuple(e, e).map(([x, y]) => `${x}[${y}]`),
      fc.tuple(e, fc.constantFrom('-2', '-1', '0', '1', '0.5', '-0.5')).map(([x, i]) => `${x}[${i}]`),
      e.map((x) => `${x}[]`),
      fc.tuple(e, e, e).map(([x, k, v]) => `${x}{${k}: ${v}}`),
      fc.tuple(e, e).map(([x, v]) => `${x}.{"k": ${v}, "j": ${x}}`),
      fc.tuple(e, e).map(([k, v]) => `{"k": ${k}, "1": ${v}}`),
      fc.array(e, { maxLength: 3 }).map((xs) => `[${xs.join(', ')}]`),
      fc.tuple(e, fc.constantFrom(...OPS), e).map(([x, o, y]) => `${x} ${o} ${y}`),
      fc.tuple(e, e, e).map(([c, t, f]) => `${c} ? ${t} : ${f}`),
      fc.tuple(e, e).map(([c, t]) => `${c} ? ${t}`),
      e.map((x) => `-${x}`),
      fc.tuple(e, e).map(([x, y]) => `($x := ${x}; ${y})`),
      fc.tuple(e, e, e).map(([x, y, z]) => `($x := ${x}; $y := ${y}; ${z})`),
      fc.tuple(fc.constantFrom(...FN1), e).map(([f, x]) => `${f}(${x})`),
      fc.tuple(fc.constantFrom(...FN2), e, e).map(([f, x, y]) => `${f}(${x}, ${y})`),
      fc.tuple(fc.constantFrom(...FN3), e, e, e).map(([f, x, y, z]) => `${f}(${x}, ${y}, ${z})`),
      fc.tuple(e, fc.constantFrom(...FN1)).map(([x, f]) => `${x} ~> ${f}()`),
      fc.tuple(e, fc.constantFrom(...FN1)).map(([x, f]) => `${x}.${f}()`),
      // functions as values (issue 28): lambdas and closures, recursion, the higher-order built-ins, regexes
      fc.tuple(fc.constantFrom(...HOF), e, e).map(([f, x, y]) => `${f}(${x}, function($v, $i) { ${y} })`),
      fc.tuple(fc.constantFrom('$map', '$filter', '$each', '$sift', '$reduce', '$sort'), e, fc.constantFrom(...FN1)).map(([f, x, g]) => `${f}(${x}, ${g})`),
      fc.tuple(e, e).map(([x, y]) => `($f := function($v) { ${y} }; $f(${x}) & $f($$))`),
      fc.tuple(e, e, e).map(([x, y, z]) => `($x := ${x}; $f := function($v, $i) { $x & ${y} }; $x := ${z}; [$f(1, 2), $map(${z}, $f)])`),
      fc.tuple(e, e).map(([x, y]) => `($f := function($i) { $i > 0 ? [${y}, $f($i - 1)] : ${y} }; $f($count(${x})))`),
      fc.tuple(e, e).map(([x, y]) => `$sort(${x}, function($v, $i) { ${y} })`),
      fc.tuple(e, fc.constantFrom(...REGEX)).map(([x, r]) => `$match(${x}, ${r})`),
      fc.tuple(e, fc.constantFrom(...REGEX), fc.constantFrom('""', '"<$0|$1|$$>"', '"$12"')).map(([x, r, t]) => `$replace(${x}, ${r}, ${t})`),
      fc.tuple(e, fc.constantFrom(...REGEX), fc.constantFrom('$contains', '$split')).map(([x, r, f]) => `${f}(${x}, ${r})`),
      fc.tuple(fc.constantFrom(...NATIVE), e).map(([f, x]) => `${f}(${x})`),
    ),
  };
}).e;

const leaf = fc.oneof(
  fc.constantFrom<unknown>(0, -0, 1, 2, 0.1, 1e21, -1, 1.5, 123456789.12345679, '', 'a', '1', 'é😀 x', ' a,b ', true, false, null),
  fc.string({ maxLength: 3 }),
);
const data: fc.Arbitrary<unknown> = fc.letrec<{ v: unknown }>((tie) => ({
  v: fc.oneof(
    { depthSize: 'small' },
    leaf,
    fc.array(tie('v'), { maxLength: 3 }),
    fc.record({ a: tie('v'), b: tie('v'), c: tie('v'), '1': tie('v') }, { requiredKeys: [] }),
    fc.record({ _jsonata_function: fc.constant(true), a: tie('v') }), // looks like a JSONata function: never read
  ),
})).v;

describe('compiled closures vs the interpreter on random expressions', () => {
  it('return the interpreter’s value, or bail; never a value where the interpreter fails', async () => {
    let compared = 0;
    let comparedWithFunctions = 0;
    await fc.assert(
      fc.asyncProperty(expression, data, async (src, input) => {
        let expr: jsonata.Expression;
        try {
          expr = jsonata(src, { ...JSONATA_OPTIONS, timeout: 10_000 });
        } catch {
          return; // not JSONata (e.g. `1e21.a`)
        }
        const c = compileExpression(expr.ast(), OPTIONS);
        if (!c.ok) return;
        expr.assign('t', TABLE);
        const [inputI, inputC] = [structuredClone(input), structuredClone(input)];
        let interp: string;
        try {
          interp = showValue(await expr.evaluate(inputI, { w: structuredClone(input) }));
        } catch (err) {
          interp = `error ${(err as { code?: string }).code}`;
        }
        let mine: string;
        try {
          mine = showValue(c.fn(inputC, { w: structuredClone(input) }));
        } catch {
          return; // bailed: the row goes to the interpreter
        }
        compared++;
        if (/function|\$(map|filter|each|sift|reduce|sort|match)\(|\/\)/.test(src)) comparedWithFunctions++;
        expect(mine, src).toBe(interp);
        expect(showValue(inputC), `${src}: the input afterwards`).toBe(showValue(inputI));
      }),
      { numRuns: RUNS, seed: SEED },
    );
    expect(compared).toBeGreaterThan(RUNS / 4); // not vacuous: many generated expressions compile and run
    expect(comparedWithFunctions).toBeGreaterThan(RUNS / 20); // lambdas, higher-order built-ins and regexes among them
  });
});
