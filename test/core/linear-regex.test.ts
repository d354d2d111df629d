/**
 * The linear-time regex engine (src/core/linear-regex.ts) as JSONata's `RegexEngine`: on JSONata's own test
 * suite (test/fixtures/jsonata-suite, MIT, jsonata 2.2.2: groups regex, function-contains / -replace / -split,
 * matchers) every case gives what the suite expects and what JSONata gives with JavaScript's RegExp; then the
 * cases where RE2 and JavaScript differ by default and the translation keeps JavaScript's meaning.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import jsonata from 'jsonata';
import { describe, expect, it } from 'vitest';
import { compileLinear, LINEAR_REGEX_ENGINE, LinearRegexError, LinearRegExp } from '../../src/core/linear-regex.js';
import { ROOT } from '../helpers/cli.js';

const SUITE = join(ROOT, 'test/fixtures/jsonata-suite');
const GROUPS = ['regex', 'function-contains', 'function-replace', 'function-split', 'matchers'];

interface Case {
  expr?: string;
  data?: unknown;
  dataset?: string | null;
  bindings?: Record<string, unknown>;
  result?: unknown;
  undefinedResult?: boolean;
  code?: string;
}

function inputOf(c: Case): unknown {
  if (c.data !== undefined || c.dataset === undefined) return structuredClone(c.data);
  if (c.dataset === null) return undefined;
  return JSON.parse(readFileSync(join(SUITE, 'datasets', `${c.dataset}.json`), 'utf8'));
}

type Outcome = { value: unknown } | { code: string | undefined };

async function outcome(src: string, c: Case, engine?: RegExpConstructor): Promise<Outcome> {
  try {
    const expr = jsonata(src, engine ? { RegexEngine: engine } : undefined);
    return { value: JSON.parse(JSON.stringify(await expr.evaluate(inputOf(c), c.bindings ?? {})) ?? 'null') };
  } catch (err) {
    return { code: (err as { code?: string }).code };
  }
}

const run = (src: string, input: unknown = {}) => jsonata(src, { RegexEngine: LINEAR_REGEX_ENGINE }).evaluate(input);
const native = (src: string, input: unknown = {}) => jsonata(src).evaluate(input);

describe('LinearRegExp on the JSONata test suite', () => {
  for (const group of GROUPS) {
    it(`group ${group}: as the suite expects, and as JavaScript's RegExp`, async () => {
      const dir = join(SUITE, 'groups', group);
      const files = readdirSync(dir)
        .filter((f) => f.endsWith('.json'))
        .sort();
      expect(files.length).toBeGreaterThan(0);
      const problems: string[] = [];
      for (const f of files) {
        const parsed = JSON.parse(readFileSync(join(dir, f), 'utf8')) as Case | Case[];
        for (const c of Array.isArray(parsed) ? parsed : [parsed]) {
          if (c.expr === undefined) continue;
          const mine = await outcome(c.expr, c, LINEAR_REGEX_ENGINE);
          const theirs = await outcome(c.expr, c);
          const where = `${group}/${f} \`${c.expr}\``;
          if (JSON.stringify(mine) !== JSON.stringify(theirs)) problems.push(`${where}: linear ${JSON.stringify(mine)} ≠ RegExp ${JSON.stringify(theirs)}`);
          else if (c.code !== undefined && !('code' in mine && mine.code === c.code))
            problems.push(`${where}: expected error ${c.code}, got ${JSON.stringify(mine)}`);
          else if ('result' in c && !('value' in mine && JSON.stringify(mine.value) === JSON.stringify(c.result))) {
            if ('value' in mine)
              expect(mine.value, where).toEqual(c.result); // key order aside
            else problems.push(`${where}: expected ${JSON.stringify(c.result)}, got ${JSON.stringify(mine)}`);
          }
        }
      }
      expect(problems).toEqual([]);
    });
  }
});

describe('LinearRegExp', () => {
  it('ends at once on a backtracking pattern (40 × a then !), with the answer JavaScript would give', async () => {
    expect(await run('$match(NAME, /(a+)+$/)', { NAME: `${'a'.repeat(40)}!` })).toBeUndefined();
    expect(await run('$contains(NAME, /^(a|aa)+$/)', { NAME: `${'a'.repeat(5000)}!` })).toBe(false);
    expect(await run('$replace(NAME, /(x+x+)+y/, "-")', { NAME: 'x'.repeat(5000) })).toBe('x'.repeat(5000));
    expect(await run('$count($split(NAME, /(\\s*,)+\\s*;/))', { NAME: `${' ,'.repeat(5000)}` })).toBe(1);
  });

  it("keeps JavaScript's meaning of \\s (no-break space), . (not \\r) and indices in UTF-16 units", async () => {
    for (const src of [
      '$split("Anna\u00a0Maria Lee", /\\s+/)',
      '$split("a\u2003b\ufeffc", /[\\s]/)',
      '$match("a\\rb a\\nb axb", /a.b/)',
      '$match("😀 ab 12", /\\d+/)',
      '$replace("Ünal ÉLISE", /é/i, "e")',
      '$match("one\\ntwo", /^t\\w+$/m)',
      '$match("x1y22", /(\\d)(\\d)?/)',
      '$replace("abc", /b/, "[$0]")',
      '$split("a,b,,c", /,/, 2)',
      '$contains("ABC", /[^]/)',
      '$match("x-y", /[\\S]-[\\S]/)',
      '$split("a-b c\u00a0d", /[\\s-]/)',
      '$split("a-bxc d", /[\\s-x]/)',
    ]) {
      expect(await run(src), src).toEqual(await native(src));
    }
  });

  it("zero-length matches end as JavaScript's do (D1004 on the second one)", async () => {
    await expect(run('$match("abc", /x*/)')).rejects.toMatchObject({ code: 'D1004' });
    await expect(native('$match("abc", /x*/)')).rejects.toMatchObject({ code: 'D1004' });
    expect(await run('$contains("abc", /x*/)')).toBe(true);
  });

  it('is a RegExp for JSONata: lastIndex advances past each match, resets to 0 at the end', () => {
    const re = new LinearRegExp(/b(\d)?/g);
    expect(re.exec('ab1cb')).toMatchObject({ 0: 'b1', 1: '1', index: 1 });
    expect(re.lastIndex).toBe(3);
    const second = re.exec('ab1cb');
    expect(second).toMatchObject({ 0: 'b', index: 4 });
    expect(second?.[1]).toBeUndefined();
    expect(re.exec('ab1cb')).toBeNull();
    expect(re.lastIndex).toBe(0);
  });

  it('refuses what RE2 cannot run, saying what and how to rewrite it', () => {
    const cases: [RegExp, RegExp][] = [
      [/a(?=b)/, /lookahead `\(\?=…\)`/],
      [/a(?!b)/, /lookahead `\(\?!…\)`/],
      [/(?<=a)b/, /lookbehind `\(\?<=…\)`/],
      [/(?<!a)b/, /lookbehind `\(\?<!…\)`/],
      [/(a)\1/, /backreference `\\1`/],
      [/(?<x>a)\k<x>/, /named backreference/],
      [/a{1001}/, /repeat count/],
    ];
    for (const [re, what] of cases) {
      let err: unknown;
      try {
        compileLinear(re);
      } catch (e) {
        err = e;
      }
      expect(err, String(re)).toBeInstanceOf(LinearRegexError);
      expect((err as LinearRegexError).message, String(re)).toMatch(what);
      expect((err as LinearRegexError).message).toContain('linear-time regex engine (RE2)');
      expect((err as LinearRegexError).fix.length).toBeGreaterThan(10);
    }
    // inside a class these are plain characters, as in JavaScript
    expect(() => compileLinear(/[(?=]\d/)).not.toThrow();
  });
});
