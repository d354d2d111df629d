/**
 * The JSONata compiler (src/mapping/jsonata-compiler) with the interpreter as oracle, beyond JSONata's own suite
 * (jsonata-conformance.test.ts): the edges of its value model, what it refuses, and — through compileMapping —
 * that every row it is not sure of goes to the interpreter, so results AND errors are the interpreter's.
 * Fixture: test/fixtures/jsonata-compiler/mapping.yaml.
 */
import { fileURLToPath } from 'node:url';
import jsonata from 'jsonata';
import { afterEach, describe, expect, it } from 'vitest';
import { compileMapping, JSONATA_COMPILE_ENV, type CompiledMapping, type EvalContext } from '../../src/mapping/compile-mapping.js';
import { MappingEvalError } from '../../src/mapping/errors.js';
import { JSONATA_BUILTINS } from '../../src/mapping/functions.js';
import { builtinCallables, compileExpression, type CompileOptions } from '../../src/mapping/jsonata-compiler/index.js';
import { loadMapping } from '../../src/mapping/load-mapping.js';
import { showValue } from './jsonata-compiler-helpers.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/jsonata-compiler/mapping.yaml', import.meta.url));
const OPTIONS: CompileOptions = { functions: builtinCallables(), functionNames: new Set(JSONATA_BUILTINS), assigned: {}, bindingNames: new Set() };

type Outcome = { value: string } | { error: string | undefined };

async function interpreted(src: string, input: unknown): Promise<Outcome> {
  try {
    return { value: showValue(await jsonata(src).evaluate(input)) };
  } catch (err) {
    return { error: (err as { code?: string }).code };
  }
}

function compiled(src: string, input: unknown): Outcome {
  const c = compileExpression(jsonata(src).ast(), OPTIONS);
  if (!c.ok) throw new Error(`not compiled: ${src} (${c.reason})`);
  try {
    return { value: showValue(c.fn(input)) };
  } catch {
    return { error: 'bail' };
  }
}

describe('compiled closures agree with the interpreter', () => {
  const data = {
    a: { b: [1, 2], c: { d: 'x' } },
    one: [{ v: 'only' }],
    items: [
      { type: 'x', price: 2, tags: ['p', 'q'] },
      { type: 'y', price: 3, tags: [] },
      { type: 'x', price: 4 },
    ],
    fake: { _jsonata_function: true, b: 1 },
    empty: [],
    n: 1.1,
  };
  const cases: [string, unknown][] = [
    // sequences: singleton unwrapping, keepSingleton, flattening, cons arrays
    ['items.tags', data],
    ['items.tags[]', data],
    ['one.v', data],
    ['one.v[]', data],
    ['[one.v]', data],
    ['one[0].v', data],
    ['items[price > 2].type', data],
    ['items[-1].price', data],
    ['a.b[0]', data],
    ['a.b[[0, 1]]', data],
    ['[a.b, [a.b]]', data],
    ['[1, 2][0].x', data],
    ['{"k": items.type}.k', data],
    ['{"k": items.type[0]}.k[]', data],
    ['$.a.c.d', [data, data]],
    ['$[0].a.c.d', [data, data]],
    ['$.{ "t": items.type }', [data, data]],
    ['{ "t": a.c.d }', [data, data]],
    // object constructors: grouping over an array input, dynamic keys, key errors
    ['items{ type: $sum(price) }', data],
    ['items.{ type: price }', data],
    ['nothing{ "k": 1 }', data], // an empty sequence: the constructor still makes its literal object
    ['{ "_jsonata_function": 1 }', data],
    ['{ "k": 1, "k": 2 }', data],
    ['{ a.c.d: 1, "y": 2 }', data],
    ['{ n: 1 }', data],
    // objects that look like JSONata functions are not read
    ['fake.b', data],
    ['$string(fake)', data],
    // variables and blocks
    ['($x := 1; ($x := 2); $x)', data],
    ['($x := a.c; $x.d & $$.a.c.d)', data],
    ['items.($p := price; $p * 2)', data],
    ['($x := $x; $x)', data],
    ['($string := 1; $string)', data], // a variable shadows the built-in of its name
    ['($uppercase := "u"; $lowercase($uppercase) & $$.a.c.d)', data],
    ['($uppercase("a"); $uppercase := 1)', data], // called before the binding: still the built-in
    ['items.($t := type; $$.items[type = $t].price)', data],
    // operators and casting
    ['n & "|" & (n * 3) & "|" & a.b', data],
    ['a.b = [1, 2]', data],
    ['items.price > 2', data],
    ['a.c.d > 1', data],
    ['"x" in items.type', data],
    ['-a.c.d', data],
    ['items.price.($ / 0)', data],
    ['$boolean(items.tags) and $not(empty)', data],
    ['a.c.d ~> $uppercase() ~> $substring(0, 1)', data],
    ['$substring(123, 1)', data],
    ['$count(items.tags) & $exists(nothing) & $join(items.type, ",")', data],
    ['$split(a.c.d & ",y,,z", ",", 3)', data],
    ['$replace("a.b.c", ".", "$0", 1)', data],
    // lambdas (issue 28): closures see a block's last binding, forward references, recursion, their own input
    ['($x := 1; $f := function() { $x }; $x := 2; $f())', data],
    ['($f := function() { $later }; $later := 5; $f())', data],
    ['($y := "outer"; ($f := function() { $y }; $r := $f(); $y := "inner"; [$r, $f()]))', data],
    ['($fact := function($n) { $n <= 1 ? 1 : $n * $fact($n - 1) }; $fact(10))', data],
    ['($even := function($n) { $n = 0 ? true : $odd($n - 1) }; $odd := function($n) { $n = 0 ? false : $even($n - 1) }; $even(7))', data],
    ['a.c.($f := function($v) { d & $v }; $f("!"))', data],
    ['items.($f := function() { type }; $f())', data],
    ['($adder := function($n) { function($m) { $n + $m } }; $add2 := $adder(2); $add2(40))', data],
    ['($f := function($a, $b) { [$a, $b] }; $f(1))', data],
    ['($uppercase := 1; $uppercase("a"))', data], // not a function: T1006 on the interpreter
    ['($uppercase := $lowercase; $uppercase("A"))', data],
    ['($f := function($v) { $uppercase($v) }; $f(a.c.d))', data], // a tail call that passes its argument
    ['($f := function($xs) { $sort($xs, function($l, $r) { $l > $r }) }; $f([3, 1, 2]))', data], // JSONata fails here
    // the higher-order built-ins, with lambdas and with built-ins as values
    ['$map(items, function($v, $i) { $v.price * $i })', data],
    ['$map(items, function($v, $i, $a) { $count($a) })', data],
    ['$filter(items, function($v) { $v.price > 2 }).type', data],
    ['$reduce(items.price, function($a, $b) { $a + $b })', data],
    ['$reduce(items.price, function($a, $b, $i) { $a + $b * $i }, 100)', data],
    ['$sort(items, function($l, $r) { $l.price < $r.price }).price', data],
    ['$sort(items.type)', data],
    ['$each(a.c, function($v, $k) { $k & "=" & $v })', data],
    ['$sift(a.c, function($v) { $v = "x" })', data],
    ['$single(items, function($v) { $v.type = "y" }).price', data],
    ['$single(items, function($v) { $v.type = "x" })', data], // D3138
    ['$map(items.type, $uppercase)', data],
    ['items.type ~> $map($uppercase)', data],
    ['$map(items.price, $string)', data],
    ['$filter(items, $string)', data],
    ['$map(items, function($v) { $v.tags })', data],
    // regex literals (on the linear-time engine) and the functions taking one
    ['$replace("Maynard46 Mosciski958", /[0-9]+/, "")', data],
    ['$replace("abc", /(b)/, "[$1$$$0$2]")', data],
    ['$replace("aaa", /a/, "b", 2)', data],
    ['$match("a1b22", /([a-z])([0-9]+)/)', data],
    ['$match("a1b22", /([a-z])([0-9]+)/, 1).groups[1]', data],
    ['$contains("abc", /B/i)', data],
    ['$split("a, b,c", /,\\s*/)', data],
    ['$split("abc", /x*/)', data], // D1004: a zero-length match
    // JSONata's own pure built-ins
    ['$fromMillis(1700000000000, "[Y0001]-[M01]-[D01]T[H01]:[m01]:[s01]Z")', data],
    ['$toMillis("2020-01-01T00:00:00Z")', data],
    ['$formatNumber(3.14159, "0.00")', data],
    ['$distinct([1, 2, 1, [1], [1]])', data],
  ];
  it.each(cases)('%s', async (src, input) => {
    expect(compiled(src, structuredClone(input))).toEqual(normalizeError(await interpreted(src, structuredClone(input))));
  });

  /** Where the interpreter fails, the compiled closure must throw (and the row goes to the interpreter). */
  function normalizeError(o: Outcome): Outcome {
    return 'error' in o ? { error: 'bail' } : o;
  }
});

describe('leaves to the interpreter what it does not port: the closure bails, the interpreter gives a value', () => {
  const data = { a: { c: { d: 'x' } }, big: Array.from({ length: 10_001 }, (_, i) => i) };
  const cases = [
    '($f := function() { $uppercase() }; a.c.d.$f())', // a tail call JSONata makes on its caller's context
    '$string', // a function in the result: the interpreter's own object
    '$match',
    '$reduce(["2024-01-02", "[Y0001]-[M01]-[D01]"], $toMillis)', // $toMillis with a picture reads the evaluation's clock
    '$replace(a.c.d, /x/, function($m) { "y" })', // a function computing the replacement
    '($f := function($n) { $n = 0 ? 0 : 1 + $f($n - 1) }; $f(200))', // nested deeper than the stack guard allows for
    '$count($map(big, function($v) { $v }))', // more lambda calls than one evaluation may make
  ];
  it.each(cases)('%s', async (src) => {
    expect('value' in (await interpreted(src, structuredClone(data)))).toBe(true);
    expect(compiled(src, structuredClone(data))).toEqual({ error: 'bail' });
  });
});

describe("bails where the interpreter's result depends on its interleaved evaluation", () => {
  // JSONata evaluates the values of `[…]` and `{…}` concurrently (Promise.all) and, for an object constructor over an
  // empty array, pushes `undefined` into that array: a record's own `[]` then reads `[undefined]` in the siblings
  // evaluated after that point — which ones depends on the interleaving, not on the source order.
  const data = { e: [] as unknown[], x: [1, 2] };
  const cases = ['{"b": $count(e), "a": e{"k": 1}}', '[$count(e), e{"k": 1}]', '{"k": {"a": e{"j": 1}}, "1": $string(e)}', 'e{"k": 1}', 'e.{"k": 1}'];
  it.each(cases)('%s', async (src) => {
    const interp = await interpreted(src, structuredClone(data));
    expect('value' in interp).toBe(true);
    const mine = compiled(src, structuredClone(data));
    // e.{…} maps over no item: nothing to build, nothing to bail on
    expect(mine).toEqual(src === 'e.{"k": 1}' ? interp : { error: 'bail' });
  });
});

describe('what the compiler refuses (the expression stays on the interpreter)', () => {
  const refused = [
    'function($x)<n:n> { $x }',
    '($f := function($x) { $x }; $f(?))',
    '$toMillis("2020", "[Y0001]")',
    '($f := function() { $uppercase("a") }; $uppercase := $lowercase; $f())',
    '[1..3]',
    'a.*',
    '**.b',
    'a^(b)',
    '$x := 1',
    '$unknown(1)',
    'a@$x.b',
    'a#$i.b',
    'a.b.%.c',
    '| a | { "b": 1 } |',
    '$string(?)',
    `${'('.repeat(120)}1${')'.repeat(120)}`,
  ];
  it.each(refused)('%s', (src) => {
    expect(compileExpression(jsonata(src).ast(), OPTIONS).ok).toBe(false);
  });
});

describe('compileMapping: compiled expressions with the interpreter as fallback', () => {
  const ctx: EvalContext = { resolveRef: (name, key) => `${name === 'patient' ? 'Patient' : 'Practitioner'}/${key}`, now: new Date('2024-03-01T00:00:00Z') };
  const row = {
    MRN: ' 001 ',
    FIRST: 'Ann Marie',
    LAST: 'SMITH',
    SEX: 'F',
    DOB: '01/02/1990',
    PHONE: '555-123-4567',
    EMAIL: 'ANN@EXAMPLE.ORG',
    STATUS: 'A',
    TAG: 'a',
  };
  const load = async (compileExpressions: boolean) => compileMapping(await loadMapping(FIXTURE, { env: {} }), { compileExpressions });
  const savedEnv = process.env[JSONATA_COMPILE_ENV];
  afterEach(() => {
    if (savedEnv === undefined) delete process.env[JSONATA_COMPILE_ENV];
    else process.env[JSONATA_COMPILE_ENV] = savedEnv;
  });

  /** Key and resource of a row, or the rejection as the user sees it. */
  async function outcome(c: CompiledMapping, name: string, input: unknown): Promise<unknown> {
    const res = c.resources.get(name)!;
    try {
      const key = await res.evalKey(Array.isArray(input) ? input[0] : input);
      return { key, resource: await res.evalMap(input, ctx) };
    } catch (err) {
      expect(err).toBeInstanceOf(MappingEvalError);
      const e = err as MappingEvalError;
      return { code: e.code, jsonataCode: e.jsonataCode, message: e.issue.message, location: e.issue.location, role: e.role };
    }
  }

  it('compiles what is in the subset, per expression; the off switch compiles nothing', async () => {
    const on = await load(true);
    const notCompiled = on.expressions.filter((e) => !e.compiled).map((e) => `${e.owner} ${e.role}`);
    expect(notCompiled).toEqual(['mapping `practitioner` map']); // the lambda with a signature
    expect(on.expressions.filter((e) => e.compiled)).toHaveLength(11);
    expect((await load(false)).expressions.filter((e) => e.compiled)).toEqual([]);

    process.env[JSONATA_COMPILE_ENV] = '0';
    expect(compileMapping(await loadMapping(FIXTURE, { env: {} })).expressions.some((e) => e.compiled)).toBe(false);
    process.env[JSONATA_COMPILE_ENV] = '1';
    expect(compileMapping(await loadMapping(FIXTURE, { env: {} })).expressions.every((e) => e.compiled || e.role === 'map')).toBe(true);
  });

  it('maps rows identically, and rejects the same rows with the same message and position', async () => {
    const [on, off] = [await load(true), await load(false)];
    const rows: [string, unknown][] = [
      ['patient', row],
      ['patient', { ...row, SEX: 'Q' }], // lookup-miss: thrown by $lookup inside the compiled closure
      ['patient', { ...row, DOB: '02/30/1990' }], // date-invalid
      ['patient', { ...row, PHONE: 'call me' }], // phone-invalid
      ['patient', { ...row, FIRST: ['Ann', 'Marie'], TAG: 'b' }], // an array where text is expected
      ['patient', { ...row, LAST: 42, EMAIL: { x: 1 } }], // T0410 from $lowercase on the interpreter
      ['patient', { ...row, MRN: '   ' }], // key-missing
      ['patient', { MRN: '002' }], // almost everything missing
      ['practitioner', row], // the lambda: interpreter only
      [
        'careteam',
        [
          { MRN: '001', NPI: '42', START: '2024-01-05' },
          { MRN: '001', NPI: '7', START: '' },
        ],
      ],
      ['careteam', [{ MRN: '001', NPI: '', START: '2024-01-05' }]], // ref-key-missing
      ['careteam', [{ MRN: '001', NPI: '42', START: '2024-13-05' }]], // date-invalid in a participant
    ];
    for (const [name, input] of rows) {
      const expected = await outcome(off, name, structuredClone(input));
      expect(await outcome(on, name, structuredClone(input)), `${name} ${JSON.stringify(input)}`).toEqual(expected);
    }
    // not vacuous: valid rows map, invalid ones are rejected at the call that failed
    expect(await outcome(on, 'patient', row)).toMatchObject({ key: '001', resource: { gender: 'female', birthDate: '1990-01-02' } });
    expect(await outcome(on, 'patient', { ...row, SEX: 'Q' })).toMatchObject({ code: 'lookup-miss', location: { line: 22 } });
  });

  it('evaluates match, group keys and export columns compiled, as the interpreter does', async () => {
    const [on, off] = [await load(true), await load(false)];
    const team = { resourceType: 'CareTeam', subject: { reference: 'Patient/001' } };
    expect(await on.resources.get('careteam')!.evalMatch!(team)).toBe('Patient/001');
    expect(await on.resources.get('careteam')!.evalGroupKey!({ MRN: 7 })).toBe(await off.resources.get('careteam')!.evalGroupKey!({ MRN: 7 }));
    const exportCtx = { now: ctx.now, sourceKey: (r: string) => `key-of-${r}` };
    const obs = { subject: { reference: 'Patient/001' } };
    expect(await on.exports.get('visits')!.evalRow(obs, exportCtx)).toEqual(await off.exports.get('visits')!.evalRow(obs, exportCtx));
    expect(await on.exports.get('visits')!.evalRow(obs, exportCtx)).toEqual({
      subject: 'Patient/001',
      mrn: 'key-of-Patient/001',
      at: '2024-03-01T00:00:00.000Z',
    });
  });
});
