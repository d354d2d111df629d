/**
 * `$pad` is replaced by a bounded implementation: JSONata's own allocates `width` array slots at once and
 * `$pad("", 200000000)` aborts the whole process (V8 fatal error). It must agree with JSONata on the
 * conformance suite's `$pad` cases (test/fixtures/jsonata-suite, MIT) and turn an oversized width into a reject.
 */
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import jsonata from 'jsonata';
import { describe, expect, it } from 'vitest';
import { MAX_PAD_WIDTH, registerFunctions } from '../../src/mapping/functions.js';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import { ROOT } from '../helpers/cli.js';

const DIR = join(ROOT, 'test/fixtures/jsonata-suite/function-pad');
interface Case {
  expr: string;
  data?: unknown;
  bindings?: Record<string, unknown>;
  result?: unknown;
  undefinedResult?: boolean;
  code?: string;
}
const cases: Case[] = readdirSync(DIR)
  .sort()
  .flatMap((f) => [JSON.parse(readFileSync(join(DIR, f), 'utf8')) as Case | Case[]].flat());

const ours = (src: string) => {
  const expr = jsonata(src);
  registerFunctions(expr, { tableNames: new WeakMap() });
  return expr;
};
const outcome = async (expr: jsonata.Expression, c: Case) => {
  try {
    return { value: await expr.evaluate(c.data ?? {}, c.bindings) };
  } catch (err) {
    return { code: (err as { code?: string }).code };
  }
};

describe('the bounded $pad', () => {
  it(`agrees with JSONata's own on the ${cases.length} conformance cases`, async () => {
    expect(cases.length).toBeGreaterThanOrEqual(13);
    for (const c of cases) {
      const got = await outcome(ours(c.expr), c);
      const builtin = await outcome(jsonata(c.expr), c);
      expect(got, c.expr).toEqual(builtin);
      if (c.code) expect(got.code, c.expr).toBe(c.code);
      else if (c.undefinedResult) expect(got.value, c.expr).toBeUndefined();
      else expect(got.value, c.expr).toEqual(c.result);
    }
  });

  it('rejects a width beyond the bound instead of allocating it', async () => {
    await expect(ours('$length($pad("", 200000000))').evaluate({})).rejects.toMatchObject({ code: 'value-too-large' });
    expect(await ours(`$length($pad("", ${MAX_PAD_WIDTH}))`).evaluate({})).toBe(MAX_PAD_WIDTH);
  });
});

describe('a $pad bomb in a mapping', () => {
  it('rejects the row (value-too-large) and the run goes on', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-pad-'));
    writeFileSync(join(dir, 'p.csv'), 'MRN,W\n1,5\n2,200000000\n3,7\n');
    writeFileSync(
      join(dir, 'mapping.yaml'),
      [
        'version: 1',
        'sources: { p: { path: p.csv } }',
        'resources:',
        '  - name: patient',
        '    type: Patient',
        '    from: p',
        '    key: MRN',
        '    map: |',
        '      { "identifier": [{ "system": "urn:t", "value": MRN }], "name": [{ "family": $pad("x", $number(W)) }] }',
        '',
      ].join('\n'),
    );
    const report = await runPipeline({ mappingFile: join(dir, 'mapping.yaml'), dryRun: true });
    expect(report.mappings.patient).toMatchObject({ read: 3, written: 2, rejected: 1 });
    const rejects = readFileSync(report.rejectsFile!, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { line: number; issues: { code: string }[] });
    expect(rejects.map((r) => [r.line, r.issues[0]!.code])).toEqual([[3, 'value-too-large']]);
  });
});
