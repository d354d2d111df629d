// The per-evaluation time limit of JSONata expressions (`limits.expressionTimeoutMs`, CARE_EXPRESSION_TIMEOUT_MS)
// and the wording of the guardrail rejections (D1012 time, D1011 depth). Fixtures: test/fixtures/expression-limit/.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { ExitCode } from '../../src/core/issues.js';
import { LINEAR_REGEX_ENGINE } from '../../src/core/linear-regex.js';
import { compileMapping, JSONATA_OPTIONS, type CompiledMapping, type EvalContext } from '../../src/mapping/compile-mapping.js';
import { MappingEvalError } from '../../src/mapping/errors.js';
import { defaultLimits, EXPRESSION_TIMEOUT_ENV, loadMapping, MAPPING_SCHEMA_URL } from '../../src/mapping/load-mapping.js';
import { evalError, issuesOf, issueWith } from './helpers.js';

const DIR = fileURLToPath(new URL('../fixtures/expression-limit/', import.meta.url));
const fx = (name: string) => `${DIR}${name}`;
const ctx: EvalContext = { resolveRef: (name, key) => `Patient/${name}-${key}`, sourceKey: () => undefined, now: new Date('2024-01-01T00:00:00Z') };
/** The looping row of patients.csv; its cell values must never appear in an issue message. */
const LOOPING_ROW = { MRN: '002', LAST: 'Secretname', LOOP: 'yes' };

/** 1-based line and column of `needle` in a fixture. */
function positionOf(name: string, needle: string): { line: number; column: number } {
  const text = readFileSync(fx(name), 'utf8');
  const at = text.indexOf(needle);
  if (at < 0) throw new Error(`${needle} not in ${name}`);
  const before = text.slice(0, at);
  return { line: before.split('\n').length, column: at - before.lastIndexOf('\n') };
}

function expectTimeout(e: MappingEvalError, role: string, owner: string, ms: number) {
  expect(e.code).toBe('jsonata');
  expect(e.jsonataCode).toBe('D1012');
  expect(e.role).toBe(role);
  expect(e.issue.message).toContain(`${owner} ${role}: the expression ran longer than ${ms} ms and was stopped (likely infinite recursion`);
  expect(e.issue.message).toMatch(/\[D1012\]$/);
  expect(e.issue.location?.file).toBe(fx('all-roles.yaml'));
  for (const v of Object.values(LOOPING_ROW)) expect(e.issue.message).not.toContain(v);
}

describe('limits.expressionTimeoutMs: loading', () => {
  it('defaults to the schema default (5000 ms) when the file has no limits:', async () => {
    const schema = JSON.parse(readFileSync(MAPPING_SCHEMA_URL, 'utf8')) as {
      definitions: { limits: { properties: { expressionTimeoutMs: { default: number } } } };
    };
    expect(schema.definitions.limits.properties.expressionTimeoutMs.default).toBe(5000);
    expect(defaultLimits()).toEqual({ expressionTimeoutMs: 5000 });
    const m = await loadMapping(fileURLToPath(new URL('../fixtures/run/clean/mapping.yaml', import.meta.url)), { env: {} });
    expect(m.limits).toEqual({ expressionTimeoutMs: 5000 });
  });

  it('reads the file, and CARE_EXPRESSION_TIMEOUT_MS wins over it (0 = off)', async () => {
    expect((await loadMapping(fx('mapping.yaml'), { env: {} })).limits).toEqual({ expressionTimeoutMs: 200 });
    expect((await loadMapping(fx('mapping.yaml'), { env: { [EXPRESSION_TIMEOUT_ENV]: ' 750 ' } })).limits).toEqual({ expressionTimeoutMs: 750 });
    expect((await loadMapping(fx('mapping.yaml'), { env: { [EXPRESSION_TIMEOUT_ENV]: '0' } })).limits).toEqual({ expressionTimeoutMs: 0 });
    expect((await loadMapping(fx('mapping.yaml'), { env: { [EXPRESSION_TIMEOUT_ENV]: '' } })).limits).toEqual({ expressionTimeoutMs: 200 });
  });

  it('refuses a bad CARE_EXPRESSION_TIMEOUT_MS (exit 2)', async () => {
    for (const bad of ['abc', '-1', '1.5', '5s']) {
      const { error, issues } = await issuesOf(() => loadMapping(fx('mapping.yaml'), { env: { [EXPRESSION_TIMEOUT_ENV]: bad } }));
      expect(error.exitCode).toBe(ExitCode.config);
      expect(issueWith(issues, 'env-invalid').message).toContain('CARE_EXPRESSION_TIMEOUT_MS must be a whole number of milliseconds');
    }
  });

  it('the schema takes an integer ≥ 1 and nothing else under limits:', async () => {
    const { issues } = await issuesOf(() => loadMapping(fx('bad-limits.yaml'), { env: {} }));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ path: '/limits/expressionTimeoutMs', location: { line: 5, column: 24 } });
    const validate = new Ajv({ strict: true }).compile(JSON.parse(readFileSync(MAPPING_SCHEMA_URL, 'utf8')) as object);
    const base = { version: 1, sources: { p: { path: 'p.csv' } }, resources: [{ name: 'p', type: 'Patient', from: 'p', key: 'MRN', map: '{}' }] };
    expect(validate({ ...base, limits: { expressionTimeoutMs: 1 } })).toBe(true);
    expect(validate({ ...base, limits: {} })).toBe(true);
    expect(validate({ ...base, limits: { expressionTimeoutMs: 1.5 } })).toBe(false);
    expect(validate({ ...base, limits: { expressionTimeoutMs: '200' } })).toBe(false);
    expect(validate({ ...base, limits: { timeout: 200 } })).toBe(false);
  });
});

describe('a runaway expression fails its row within the limit, in every role', { timeout: 20_000 }, () => {
  let compiled: CompiledMapping;
  const load = async () => (compiled ??= compileMapping(await loadMapping(fx('all-roles.yaml'), { env: {} })));

  it('keeps the stack guard and the linear-time regex engine', () => {
    expect(JSONATA_OPTIONS).toEqual({ stack: 500, RegexEngine: LINEAR_REGEX_ENGINE });
  });

  it('key, at the runaway call in the file', async () => {
    const c = await load();
    const e = await evalError(c.resources.get('patient')!.evalKey(LOOPING_ROW));
    expectTimeout(e, 'key', 'mapping `patient`', 100);
    expect(e.issue.path).toBe('/resources/0/key');
    expect(e.issue.location?.line).toBe(positionOf('all-roles.yaml', "key: '( $k").line);
    // the other rows are untouched
    expect(await c.resources.get('patient')!.evalKey({ MRN: '001', LOOP: 'no' })).toBe('001');
  });

  it('groupBy, match and an export column', async () => {
    const c = await load();
    expectTimeout(await evalError(c.resources.get('team')!.evalGroupKey!(LOOPING_ROW)), 'groupBy', 'mapping `team`', 100);
    expectTimeout(await evalError(c.resources.get('patient')!.evalMatch!({ resourceType: 'Patient' })), 'match', 'mapping `patient`', 100);
    const col = await evalError(c.exports.get('obs')!.evalRow({ id: 'o-1' }, { now: new Date(), sourceKey: () => undefined }));
    expectTimeout(col, 'column', 'export `obs` column `spin`', 100);
    expect(col.issue.location?.line).toBe(positionOf('all-roles.yaml', "spin: '(").line);
  });

  it('non-tail recursion stops at the stack limit (D1011) with a clear message', async () => {
    const c = await load();
    const e = await evalError(c.resources.get('deep')!.evalMap(LOOPING_ROW, ctx));
    expect(e.jsonataCode).toBe('D1011');
    expect(e.issue.message).toBe(
      'mapping `deep` map: the expression nested more than 500 levels deep (function calls within function calls) and was stopped (likely infinite recursion: a function that keeps calling itself) [D1011]',
    );
    expect(e.issue.location).toMatchObject({ file: fx('all-roles.yaml'), line: positionOf('all-roles.yaml', "map: '( $d").line });
  });

  it('an expression that keeps running over the limit is not run on every row: refused after 3, probed after 4, 8, … rows', async () => {
    const c = compileMapping(await loadMapping(fx('all-roles.yaml'), { env: { [EXPRESSION_TIMEOUT_ENV]: '50' } }));
    const patient = c.resources.get('patient')!;
    const outcomes: string[] = [];
    for (let row = 1; row <= 16; row++) {
      const e = await evalError(patient.evalKey(LOOPING_ROW));
      expect(e.jsonataCode).toBe('D1012');
      expect(e.issue.location?.line).toBe(positionOf('all-roles.yaml', "key: '( $k").line);
      for (const v of Object.values(LOOPING_ROW)) expect(e.issue.message).not.toContain(v);
      if (e.issue.message.includes('ran longer than 50 ms and was stopped (likely')) outcomes.push('ran');
      else {
        expect(e.issue.message).toMatch(
          /^mapping `patient` key: the expression was not run on this row: it ran longer than 50 ms and was stopped the last [3-5] times it ran \(likely infinite recursion.*re-run the rejects \[D1012\]$/,
        );
        outcomes.push('refused');
      }
    }
    const ran = outcomes.flatMap((o, i) => (o === 'ran' ? [i + 1] : []));
    expect(ran).toEqual([1, 2, 3, 7, 15]);
    // rows on which it ends still map (the breaker only refuses rows that would run into the limit's interpreter)
    expect(await patient.evalKey({ MRN: '001', LOOP: 'no' })).toBe('001');
  });

  it('CARE_EXPRESSION_TIMEOUT_MS replaces the limit of the file in the message', async () => {
    const c = compileMapping(await loadMapping(fx('all-roles.yaml'), { env: { [EXPRESSION_TIMEOUT_ENV]: '50' } }));
    expectTimeout(await evalError(c.resources.get('patient')!.evalKey(LOOPING_ROW)), 'key', 'mapping `patient`', 50);
  });
});
