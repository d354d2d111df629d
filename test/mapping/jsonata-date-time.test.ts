/**
 * `$fromMillis` / `$toMillis` answered by the compiler itself (src/mapping/jsonata-compiler/date-time.ts), with
 * JSONata's interpreter as oracle: the shipped mappings' picture and its neighbours at edge times are answered
 * without JSONata's implementation and give its exact text; every other form goes to JSONata's, with its answers
 * and errors.
 */
import jsonata from 'jsonata';
import { describe, expect, it } from 'vitest';
import { JSONATA_BUILTINS } from '../../src/mapping/functions.js';
import { fastFromMillis, fastToMillis } from '../../src/mapping/jsonata-compiler/date-time.js';
import { builtinCallables, compileExpression, type CallableFunction, type CompileOptions } from '../../src/mapping/jsonata-compiler/index.js';
import { showValue } from './jsonata-compiler-helpers.js';

const OPTIONS: CompileOptions = { functions: builtinCallables(), functionNames: new Set(JSONATA_BUILTINS), assigned: {}, bindingNames: new Set() };

/** The shipped Synthea mappings' picture (mappings/synthea*), and the other forms answered without JSONata. */
const ANSWERED = [
  '[Y0001]-[M01]-[D01]T[H01]:[m01]:[s01]Z',
  '[Y0001]-[M01]-[D01]',
  '[Y0001]-[M01]-[D01]T[H01]:[m01]:[s01].[f001]Z',
  '[D1]/[M1]/[Y0001] [H1]h[m01]',
  '[Y01]',
  '[Y1]',
  '[Y001]',
  '[f1] [f01] [s1]',
  'no markers',
  '',
];
/** Forms left to JSONata: names, defaults, widths, time zones, doubled brackets, whitespace, broken markers. */
const LEFT = [
  '[Y]',
  '[FNn], [D1o] [MNn]',
  '[Y0001]-[M01]-[D01]T[H01]:[m01]:[s01][Z01:01t]',
  '[Y,2]',
  '[[[Y0001]]]',
  '[H01]:[m01]]]',
  '[Y 0001]',
  '[M01',
  '[Y#001]',
];
const MILLIS = [
  0,
  -1,
  1,
  1.5,
  86_399_999,
  Date.UTC(2000, 1, 29, 23, 59, 59, 999),
  Date.UTC(2023, 0, 27, 16, 17, 47),
  Date.UTC(1, 0, 1),
  Date.UTC(99, 0, 1) - 1,
  -62_198_755_200_001, // year -1
  Date.UTC(9999, 11, 31, 23, 59, 59, 999),
  Date.UTC(10_000, 0, 1),
  Date.UTC(123_456, 5, 6),
  8.64e15,
  8.64e15 + 1, // no such date
  1e21,
];

async function interpreted(src: string): Promise<string> {
  try {
    return showValue(await jsonata(src).evaluate({}));
  } catch (err) {
    return `error ${(err as { code?: string }).code}`;
  }
}

function compiled(src: string): string {
  const c = compileExpression(jsonata(src).ast(), OPTIONS);
  if (!c.ok) throw new Error(`not compiled: ${src} (${c.reason})`);
  try {
    return showValue(c.fn({}));
  } catch (err) {
    return `error ${(err as { code?: string }).code}`;
  }
}

const notCalled: CallableFunction = {
  call() {
    throw new Error("JSONata's implementation called");
  },
};

describe('$fromMillis with a picture', () => {
  it("the shipped picture and its neighbours: answered without JSONata's implementation, its exact text", async () => {
    const fast = fastFromMillis(notCalled);
    for (const picture of ANSWERED) {
      for (const millis of MILLIS.filter((m) => m >= -62_135_596_800_000)) {
        const expected = await interpreted(`$fromMillis(${millis}, ${JSON.stringify(picture)})`);
        expect(showValue(fast.call([millis, picture], {}, undefined as never)), `${picture} at ${millis}`).toBe(expected);
      }
    }
  });

  it("other forms, negative years, time zones and other argument types: JSONata's answers and errors", async () => {
    const calls = [
      ...[...ANSWERED, ...LEFT].flatMap((p) => MILLIS.map((m) => `$fromMillis(${m}, ${JSON.stringify(p)})`)),
      ...MILLIS.map((m) => `$fromMillis(${m}, "[Y0001]-[M01]-[D01]T[H01]:[m01]:[s01]Z", "+0130")`),
      '$fromMillis("0", "[Y0001]")',
      '$fromMillis(0, 1)',
      '$fromMillis(nothing, "[Y0001]")',
    ];
    for (const src of calls) expect(compiled(src), src).toBe(await interpreted(src));
  });
});

describe('$toMillis without a picture', () => {
  const TIMESTAMPS = [
    '2023-01-27T16:17:47Z',
    '2023-01-27',
    '2023',
    '2023-01',
    '2023-01-27T16:17:47.123+02:00',
    '2023-01-27T16:17:47+0200',
    '2023-02-30',
    '0000-01-01',
  ];

  it("an ISO 8601 timestamp: answered without JSONata's implementation, its exact millis", async () => {
    const fast = fastToMillis(notCalled);
    for (const ts of TIMESTAMPS) expect(showValue(fast.call([ts], {}, undefined as never)), ts).toBe(await interpreted(`$toMillis(${JSON.stringify(ts)})`));
  });

  it("anything else: JSONata's answer or error", async () => {
    const calls = [
      ...[...TIMESTAMPS, 'not a date', '', '2023-01-27 16:17:47', '20230127'].map((t) => `$toMillis(${JSON.stringify(t)})`),
      '$toMillis(nothing)',
      '$toMillis(5)',
    ];
    for (const src of calls) expect(compiled(src), src).toBe(await interpreted(src));
  });
});
