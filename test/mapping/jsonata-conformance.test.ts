/**
 * The JSONata compiler against JSONata's own test suite (test/fixtures/jsonata-suite, MIT, the version of the
 * installed jsonata 2.2.2). For every case whose expression the compiler accepts:
 * - the interpreter succeeds → the compiled closure returns the very same value (key order, sequence flags and all)
 *   or bails (the row would then go to the interpreter: correct, only slower; counted);
 * - the interpreter fails → the compiled closure throws too (it must never turn an error into a value);
 * - and, as the suite says, the result / error is the case's expected one.
 * Cases outside the compiled subset only count as "not compiled".
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import jsonata from 'jsonata';
import { afterAll, describe, expect, it } from 'vitest';
import { JSONATA_BUILTINS } from '../../src/mapping/functions.js';
import { builtinCallables, compileExpression } from '../../src/mapping/jsonata-compiler/index.js';
import { ROOT } from '../helpers/cli.js';
import { showValue } from './jsonata-compiler-helpers.js';

const SUITE = join(ROOT, 'test/fixtures/jsonata-suite');
const GROUPS = join(SUITE, 'groups');

interface Case {
  expr?: string;
  'expr-file'?: string;
  data?: unknown;
  dataset?: string | null;
  bindings?: Record<string, unknown>;
  timelimit?: number;
  depth?: number;
  result?: unknown;
  undefinedResult?: boolean;
  code?: string;
}

const datasets = new Map<string, unknown>();
function inputOf(c: Case): unknown {
  if (c.data !== undefined || c.dataset === undefined) return structuredClone(c.data);
  if (c.dataset === null) return undefined;
  if (!datasets.has(c.dataset)) datasets.set(c.dataset, JSON.parse(readFileSync(join(SUITE, 'datasets', `${c.dataset}.json`), 'utf8')));
  return structuredClone(datasets.get(c.dataset));
}

function casesOf(group: string): { name: string; c: Case; expr: string }[] {
  const dir = join(GROUPS, group);
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .flatMap((f) => {
      const parsed = JSON.parse(readFileSync(join(dir, f), 'utf8')) as Case | Case[];
      const list = Array.isArray(parsed) ? parsed : [parsed];
      return list.map((c, i) => ({
        name: list.length > 1 ? `${f}[${i}]` : f,
        c,
        expr: c['expr-file'] !== undefined ? readFileSync(join(dir, c['expr-file']), 'utf8') : (c.expr ?? ''),
      }));
    });
}

const functionNames = new Set<string>(JSONATA_BUILTINS);
const functions = builtinCallables();

/** The suite's U1001 (the JS stack overflowing in a runaway recursion) is what the depth and time guards report instead. */
const GUARD_CODES = new Set(['D1011', 'D1012']);

type Outcome = { ok: true; value: unknown } | { ok: false; code?: string };

interface Tally {
  cases: number;
  compiled: number;
  agreed: number;
  bailedOnSuccess: number;
}
const tallies = new Map<string, Tally>();

const groups = existsSync(GROUPS) ? readdirSync(GROUPS).sort() : [];

describe('JSONata compiler on the JSONata test suite', () => {
  it('has the suite', () => {
    expect(groups.length).toBeGreaterThan(90);
  });

  for (const group of groups) {
    it(`group ${group}`, async () => {
      const tally: Tally = { cases: 0, compiled: 0, agreed: 0, bailedOnSuccess: 0 };
      tallies.set(group, tally);
      const problems: string[] = [];
      for (const { name, c, expr: src } of casesOf(group)) {
        tally.cases++;
        let expr: jsonata.Expression;
        try {
          expr = jsonata(src, { ...(c.timelimit ? { timeout: c.timelimit } : {}), ...(c.depth ? { stack: c.depth } : {}) });
        } catch {
          continue; // a syntax-error case: nothing to compile
        }
        const bindings = c.bindings ?? {};
        const compiled = compileExpression(expr.ast(), { functions, functionNames, assigned: {}, bindingNames: new Set(Object.keys(bindings)) });
        if (!compiled.ok) continue;
        tally.compiled++;

        let interp: Outcome;
        try {
          interp = { ok: true, value: await expr.evaluate(inputOf(c), bindings) };
        } catch (err) {
          interp = { ok: false, code: (err as { code?: string }).code };
        }
        let mine: Outcome;
        try {
          mine = { ok: true, value: compiled.fn(inputOf(c), bindings) };
        } catch {
          mine = { ok: false };
        }

        const where = `${group}/${name} \`${src.replace(/\s+/g, ' ').slice(0, 120)}\``;
        if (!interp.ok) {
          if (mine.ok) problems.push(`${where}: the interpreter fails (${interp.code}), the compiled code returned ${showValue(mine.value)}`);
          else if (c.code !== undefined && interp.code !== c.code && !(c.code === 'U1001' && GUARD_CODES.has(interp.code ?? '')))
            problems.push(`${where}: expected error ${c.code}, the interpreter gave ${interp.code}`);
          else tally.agreed++;
          continue;
        }
        if (!mine.ok) {
          tally.bailedOnSuccess++;
          continue;
        }
        if (showValue(mine.value) !== showValue(interp.value)) {
          problems.push(`${where}: compiled ${showValue(mine.value)} ≠ interpreter ${showValue(interp.value)}`);
          continue;
        }
        if (c.code !== undefined) problems.push(`${where}: the suite expects error ${c.code}, both returned a value`);
        else if (c.undefinedResult && mine.value !== undefined) problems.push(`${where}: the suite expects no result`);
        else if ('result' in c && JSON.stringify(mine.value) !== JSON.stringify(c.result)) {
          // key order is not part of the suite's expectation: compare as sets of entries
          expect(JSON.parse(JSON.stringify(mine.value ?? null)), where).toEqual(c.result);
          tally.agreed++;
        } else tally.agreed++;
      }
      expect(problems).toEqual([]);
    });
  }

  it('compiles a substantial share of the suite', () => {
    const total = [...tallies.values()].reduce((t, x) => ({ compiled: t.compiled + x.compiled, cases: t.cases + x.cases }), { compiled: 0, cases: 0 });
    // the subset is what mappings use; a compiler that silently refused everything would make this file vacuous
    expect(total.compiled).toBeGreaterThan(400);
  });

  afterAll(() => {
    if (process.env.JSONATA_SUITE_REPORT !== '1') return;
    const rows = [...tallies]
      .filter(([, t]) => t.compiled > 0)
      .map(([g, t]) => `${g}: ${t.compiled}/${t.cases} compiled, ${t.agreed} agreed, ${t.bailedOnSuccess} bailed`);
    const total = [...tallies.values()].reduce(
      (a, t) => ({ cases: a.cases + t.cases, compiled: a.compiled + t.compiled, agreed: a.agreed + t.agreed, bailed: a.bailed + t.bailedOnSuccess }),
      { cases: 0, compiled: 0, agreed: 0, bailed: 0 },
    );
    console.log(`${rows.join('\n')}\nTOTAL ${JSON.stringify(total)}`);
  });
});
