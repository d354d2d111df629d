/**
 * The shipped mappings (mappings/*, examples/clinic) with their expressions compiled to JS vs on JSONata's
 * interpreter (the oracle, CARE_JSONATA_COMPILE=0):
 * - every row of every shipped sample: the same key, the same resource JSON (byte for byte), the same rejects;
 * - property: sample records with random fields changed, removed or of another type: the same outcome (key and
 *   resource, or the same rejection: code, message, position);
 * - a dry run of each mapping writes byte-identical NDJSON and the same rejects with the compiler on and off.
 * Runs: CARE_PROPERTY_RUNS / 10 per mapping resource (default 200). Seed: CARE_PROPERTY_SEED.
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { compileMapping, JSONATA_COMPILE_ENV, type CompiledMapping, type CompiledResource, type EvalContext } from '../../src/mapping/compile-mapping.js';
import { MappingEvalError } from '../../src/mapping/errors.js';
import { loadMapping, type LoadedMapping } from '../../src/mapping/load-mapping.js';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import { openSource } from '../../src/sources/open-source.js';
import { transformSource } from '../../src/transform/transform-source.js';
import { validateResource } from '../../src/validate/resource-validator.js';
import { ROOT } from '../helpers/cli.js';

const RUNS = Math.max(10, Math.round(Number(process.env.CARE_PROPERTY_RUNS ?? 2000) / 10));
const SEED = Number(process.env.CARE_PROPERTY_SEED ?? 20_251_215);
const ENV = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CARE_') && !k.endsWith('_DIR')));
const MAPPINGS = [
  ...readdirSync(join(ROOT, 'mappings'))
    .map((d) => join(ROOT, 'mappings', d, 'mapping.yaml'))
    .filter((f) => existsSync(f)),
  join(ROOT, 'examples/clinic/mapping.yaml'),
];
const rel = (f: string) => f.slice(ROOT.length + 1);
const ctx: EvalContext = { resolveRef: (name, key) => `Ref/${name}-${key}`, now: new Date('2025-01-01T00:00:00Z') };

async function compiledBoth(file: string): Promise<{ m: LoadedMapping; on: CompiledMapping; off: CompiledMapping }> {
  const m = await loadMapping(file, { env: ENV });
  return { m, on: compileMapping(m, { compileExpressions: true }), off: compileMapping(m, { compileExpressions: false }) };
}

/** What `transformSource` makes of every row of the resource's source (resources as JSON text). */
async function transformAll(m: LoadedMapping, res: CompiledResource): Promise<string[]> {
  const out: string[] = [];
  for await (const item of transformSource(res, openSource(m.sources[res.def.from]!), { ctx, validate: validateResource })) {
    out.push(item.ok ? `${item.key} ${JSON.stringify(item.resource)}` : `reject ${item.stage} ${JSON.stringify(item.issues)}`);
  }
  return out;
}

/** Key and resource of one input (a record, or a group's records), or the rejection as the user sees it. */
async function outcome(res: CompiledResource, input: unknown): Promise<string> {
  try {
    const first = Array.isArray(input) ? input[0] : input;
    const key = res.evalGroupKey ? await res.evalGroupKey(first) : await res.evalKey(first);
    return `${key} ${JSON.stringify(await res.evalMap(input, ctx))}`;
  } catch (err) {
    if (!(err instanceof MappingEvalError)) throw err;
    return `reject ${err.code} ${err.jsonataCode ?? ''} ${err.issue.message} ${JSON.stringify(err.issue.location)}`;
  }
}

/** Records of a source as read by the pipeline (data only). */
async function recordsOf(m: LoadedMapping, source: string): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  for await (const item of openSource(m.sources[source]!)) if (item.ok) out.push(item.data as Record<string, unknown>);
  return out;
}

/** Every path to a value inside a record (objects and arrays, the record's own fields included). */
function pathsOf(v: unknown, at: (string | number)[] = []): (string | number)[][] {
  if (v === null || typeof v !== 'object') return [at];
  const keys: (string | number)[] = Array.isArray(v) ? v.map((_, i) => i) : Object.keys(v);
  return [...(at.length ? [at] : []), ...keys.flatMap((k) => pathsOf((v as Record<string | number, unknown>)[k], [...at, k]))];
}

const odd = fc.oneof(
  fc.constantFrom<unknown>(
    undefined,
    '',
    ' ',
    '  x  ',
    null,
    0,
    -1.5,
    42,
    true,
    false,
    [],
    {},
    ['a', 'b'],
    [''],
    'I',
    'Y',
    'M',
    'F',
    'MD',
    '01/02/1990',
    '1990-01-02',
    '2024-13-40',
    '555-123-4567',
    '+44 20 7946 0958',
    'Patient/123',
    'https://x.test/fhir/Practitioner/p-1/_history/2',
  ),
  fc.string({ maxLength: 12 }),
  fc.jsonValue({ maxDepth: 2 }),
);
const mutations = fc.array(fc.record({ at: fc.nat(), value: odd }), { minLength: 1, maxLength: 4 });

function mutate(record: Record<string, unknown>, changes: { at: number; value: unknown }[]): Record<string, unknown> {
  const r = structuredClone(record);
  for (const { at, value } of changes) {
    const paths = pathsOf(r);
    if (!paths.length) break;
    const path = paths[at % paths.length]!;
    const parent = path.slice(0, -1).reduce<unknown>((o, k) => (o as Record<string | number, unknown>)[k], r) as Record<string | number, unknown>;
    const last = path[path.length - 1]!;
    if (value === undefined && !Array.isArray(parent)) delete parent[last];
    else parent[last] = structuredClone(value); // fc.constantFrom hands out one `[]` / `{}`: a shared one could become cyclic
  }
  return r;
}

describe.each(MAPPINGS.map((f) => [rel(f), f]))('%s compiled vs interpreted', (_name, file) => {
  it('maps every row of its sample to the same key, resource JSON and rejects', async () => {
    const { m, on, off } = await compiledBoth(file);
    let rows = 0;
    for (const name of on.order) {
      const [a, b] = [await transformAll(m, on.resources.get(name)!), await transformAll(m, off.resources.get(name)!)];
      expect(a, name).toEqual(b);
      rows += a.length;
    }
    expect(rows).toBeGreaterThan(0);
  });

  it('gives the same outcome on sample records with fields changed, removed or of another type', async () => {
    const { m, on, off } = await compiledBoth(file);
    for (const name of on.order) {
      const [resOn, resOff] = [on.resources.get(name)!, off.resources.get(name)!];
      const records = await recordsOf(m, resOn.def.from);
      const grouped = resOn.def.groupBy !== undefined;
      await fc.assert(
        fc.asyncProperty(fc.array(fc.record({ i: fc.nat(), changes: mutations }), { minLength: 1, maxLength: grouped ? 3 : 1 }), async (picks) => {
          const inputs = picks.map(({ i, changes }) => mutate(records[i % records.length]!, changes));
          const input = grouped ? inputs : inputs[0];
          expect(await outcome(resOn, structuredClone(input))).toBe(await outcome(resOff, structuredClone(input)));
        }),
        { numRuns: RUNS, seed: SEED },
      );
    }
  });
});

describe('which shipped expressions are compiled', () => {
  // issue 28: the Synthea, OMOP and FHIR bulk mappings use function definitions, regexes and $map & co.; a form the
  // compiler does not take would silently put a whole mapping back on the interpreter (4–6× slower)
  it.each(MAPPINGS.map((f) => [rel(f), f]))('every expression of %s runs compiled', async (_name, file) => {
    const { on } = await compiledBoth(file);
    const fallbacks = on.expressions.filter((e) => !e.compiled).map((e) => `${e.owner} ${e.role}: ${e.fallback}`);
    expect(fallbacks).toEqual([]);
    expect(on.expressions.length).toBeGreaterThan(2);
  });
});

describe('a dry run writes the same bytes with the compiler on and off', () => {
  const dirs: string[] = [];
  const saved = process.env[JSONATA_COMPILE_ENV];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    if (saved === undefined) delete process.env[JSONATA_COMPILE_ENV];
    else process.env[JSONATA_COMPILE_ENV] = saved;
  });

  async function dryRun(file: string, compile: boolean): Promise<{ files: Record<string, string>; totals: unknown }> {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-compiled-'));
    dirs.push(dir);
    if (compile) delete process.env[JSONATA_COMPILE_ENV];
    else process.env[JSONATA_COMPILE_ENV] = '0';
    const outDir = join(dir, 'out');
    const report = await runPipeline({
      mappingFile: file,
      dryRun: true,
      outDir,
      rejectsFile: join(dir, 'rejects.ndjson'),
      statePath: join(dir, 'state.db'),
      env: ENV,
      now: ctx.now,
    });
    const files = Object.fromEntries(readdirSync(outDir).map((f) => [f, readFileSync(join(outDir, f), 'utf8')]));
    if (existsSync(join(dir, 'rejects.ndjson'))) files['rejects.ndjson'] = readFileSync(join(dir, 'rejects.ndjson'), 'utf8');
    return { files, totals: report.totals };
  }

  it.each(MAPPINGS.map((f) => [rel(f), f]))('%s', async (_name, file) => {
    const on = await dryRun(file, true);
    const off = await dryRun(file, false);
    expect(Object.keys(on.files).filter((f) => f.endsWith('.ndjson')).length).toBeGreaterThan(0);
    expect(on.files).toEqual(off.files);
    expect(on.totals).toEqual(off.totals);
  });
});
