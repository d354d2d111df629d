/**
 * Issue 22, item 7 — property: the linear-time engine finds the matches JavaScript's RegExp finds.
 *
 * Generated patterns (literals, `\s \S \d \w .`, classes with `\s`, `\b ^ $`, greedy and lazy quantifiers, groups
 * and alternations whose bodies cannot match nothing) with the flags JSONata gives (`g`, `gi`), on generated texts
 * (ASCII, no-break space, `\r`, `\n`, U+2028, accented letters). Every match — its index, its text and its
 * groups — is the same, walked as JSONata walks them (`lastIndex`, `exec`, stop after an empty match).
 * Out of the grammar, and documented in docs/mapping-functions.md: the `m` flag (RE2 ends lines at `\n` only) and
 * repeated groups whose body can match nothing.
 *
 * Runs: CARE_PROPERTY_RUNS (default 2000); seed CARE_PROPERTY_SEED (default fixed).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LinearRegExp } from '../../src/core/linear-regex.js';

const RUNS = Math.max(10, Number(process.env.CARE_PROPERTY_RUNS ?? 2000));
const SEED = Number(process.env.CARE_PROPERTY_SEED ?? 20_261_125);

const ATOMS = ['a', 'b', 'é', '\\s', '\\S', '\\d', '\\w', '\\W', '.', '[ab]', '[^a]', '[\\s,]', '[^\\s]', '\\.', '-', ' ', ','];
const ANCHORS = ['\\b', '\\B', '^', '$'];
const QUANT = ['', '', '*', '+', '?', '{1,2}', '*?', '+?', '??'];

/** A pattern whose groups have bodies that always consume a character (no `(a?)*`). */
const pattern: fc.Arbitrary<string> = fc.letrec<{ seq: string; solid: string; piece: string }>((tie) => ({
  // a body that matches at least one character: its first piece is unquantified or `+`
  solid: fc.tuple(fc.constantFrom(...ATOMS), fc.constantFrom('', '+', '+?', '{1,2}'), tie('seq')).map(([a, q, rest]) => `${a}${q}${rest}`),
  piece: fc.oneof(
    { weight: 5, arbitrary: fc.tuple(fc.constantFrom(...ATOMS), fc.constantFrom(...QUANT)).map(([a, q]) => a + q) },
    { weight: 1, arbitrary: fc.constantFrom(...ANCHORS) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.constantFrom('(', '(?:'), tie('solid'), fc.option(tie('solid'), { nil: undefined }), fc.constantFrom(...QUANT))
        .map(([open, x, y, q]) => `${open}${x}${y !== undefined ? `|${y}` : ''})${q}`),
    },
  ),
  seq: fc.array(tie('piece'), { maxLength: 3, depthIdentifier: 'regex' }).map((ps) => ps.join('')),
})).solid;

const text = fc
  .array(fc.constantFrom('a', 'b', 'é', ' ', '\u00a0', '\r', '\n', '\u2028', '1', '2', ',', '.', '-', 'A', 'B'), { maxLength: 12 })
  .map((cs) => cs.join(''));

type Engine = { lastIndex: number; exec(s: string): RegExpExecArray | null };

/** The matches as JSONata's evaluateRegex walks them. */
function matches(re: Engine, s: string): unknown[] {
  const out: unknown[] = [];
  re.lastIndex = 0;
  for (let k = 0; k < 50; k++) {
    const m = re.exec(s);
    if (m === null) break;
    out.push([m.index, ...m]);
    if (m[0] === '' || re.lastIndex >= s.length) break;
  }
  return out;
}

describe('LinearRegExp finds what RegExp finds (property)', () => {
  it(`${RUNS} generated patterns × texts, flags g and gi`, () => {
    fc.assert(
      fc.property(pattern, fc.constantFrom('g', 'gi'), fc.array(text, { minLength: 1, maxLength: 4 }), (p, flags, texts) => {
        const native = new RegExp(p, flags);
        const linear = new LinearRegExp(native);
        for (const s of texts) expect(matches(linear, s), `/${p}/${flags} on ${JSON.stringify(s)}`).toEqual(matches(new RegExp(p, flags), s));
      }),
      { numRuns: RUNS, seed: SEED },
    );
  });
});
