/**
 * `care-etl test`: runs the cases of mapping test files offline. Each case goes through the real
 * row → resource stage of a run (`transformSource`: key, groupBy, duplicate keys, map, pruning, schema
 * validation) with `$ref` resolved from stubs, so a case passes exactly when a run would produce the
 * expected resource (or rejection).
 */
import { placeholderId } from '../mapping/placeholder-id.js';
import { readdir, stat } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import type jsonata from 'jsonata';
import { jsonataExpression } from '../core/jsonata-package.js';
import { CareEtlError, ExitCode, formatLocation, hasCode, issue, issuesOf, type Issue } from '../core/issues.js';
import { compileMapping, type CompiledMapping, type CompiledResource } from '../mapping/compile-mapping.js';
import { closest } from '../mapping/closest.js';
import { RefError } from '../mapping/errors.js';
import type { EvalContext } from '../mapping/functions.js';
import { loadMapping } from '../mapping/load-mapping.js';
import { detectFormat, openSource } from '../sources/open-source.js';
import type { SourceConfig, SourceItem } from '../sources/types.js';
import { transformSource, type TransformItem } from '../transform/transform-source.js';
import { validateResource } from '../validate/resource-validator.js';
import { loadTestFile } from './load-test-file.js';
import { structuralDiff } from './structural-diff.js';
import type {
  CaseFailure,
  CaseResult,
  FileResult,
  MappingTestFile,
  ProducedReject,
  RefStubs,
  RejectExpectation,
  RowSelector,
  TestCaseDef,
  TestReport,
  TestTotals,
} from './types.js';
import { LINEAR_REGEX_ENGINE } from '../core/linear-regex.js';
import { regexProblems } from '../mapping/regex-check.js';

export type * from './types.js';

/** Connection variables always get these in tests: a mapping's `target:` loads, and nothing can connect. */
export const TEST_CONNECTION_ENV: Readonly<Record<string, string>> = {
  CARE_BASE_URL: 'https://care-etl-test.invalid',
  CARE_API_KEY: 'care-etl-test-placeholder',
  CARE_EMR_ID: 'care-etl-test',
  CARE_TENANT_ID: 'care-etl-test',
};

export interface RunTestsOptions {
  /** Base of relative paths (default `process.cwd()`). */
  cwd?: string;
  /** Only cases whose name contains this text. */
  grep?: string;
  /** Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Called when a file is done (for streaming output). */
  onFile?: (result: FileResult) => void;
}

const TEST_FILE = /\.test\.ya?ml$/;
/**
 * Folders a recursive search does not enter: dependencies, build output, dot-folders (`.git`, `.care-etl`) and
 * `fixtures` (test data of other test suites, e.g. this repository's `test/fixtures/`, holds deliberately
 * broken test files). Only folders found while walking are skipped: a folder named on the command line, or
 * holding a file named there, is always searched.
 */
const SKIP_DIRS = new Set(['node_modules', 'dist', 'fixtures']);
const skipDir = (name: string): boolean => SKIP_DIRS.has(name) || name.startsWith('.');

/**
 * `*.test.yaml` files under the given files/folders (recursively, sorted; see `SKIP_DIRS` for the folders a
 * search skips); paths that do not exist are returned apart. A file that is not a test file (a mapping,
 * `care-etl test mapping.yaml`) stands for the test files of its folder that test it: they are returned with
 * that mapping in `forMapping`.
 */
export async function findTestFiles(
  paths: string[],
  cwd = process.cwd(),
): Promise<{ files: string[]; missing: string[]; forMapping: Map<string, Set<string>> }> {
  const files = new Set<string>();
  const missing: string[] = [];
  const forMapping = new Map<string, Set<string>>();
  const walk = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true });
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      const p = join(dir, e.name);
      if (e.isDirectory()) {
        if (!skipDir(e.name)) await walk(p);
      } else if (TEST_FILE.test(e.name)) files.add(p);
    }
  };
  for (const p of paths.length ? paths : ['.']) {
    const abs = resolve(cwd, p);
    let st;
    try {
      st = await stat(abs);
    } catch {
      missing.push(p);
      continue;
    }
    if (st.isDirectory()) await walk(abs);
    else if (TEST_FILE.test(abs)) files.add(abs);
    else {
      const dir = dirname(abs);
      for (const e of (await readdir(dir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
        if (!e.isFile() || !TEST_FILE.test(e.name)) continue;
        const t = join(dir, e.name);
        files.add(t);
        forMapping.set(t, (forMapping.get(t) ?? new Set()).add(abs));
      }
    }
  }
  // A test file found through a folder as well runs whatever it tests.
  for (const t of forMapping.keys())
    if (
      paths.some((p) => {
        const a = resolve(cwd, p);
        return t.startsWith(`${a}/`) || t === a;
      })
    )
      forMapping.delete(t);
  return { files: [...files], missing, forMapping };
}

export async function runMappingTests(paths: string[], opts: RunTestsOptions = {}): Promise<TestReport> {
  const started = performance.now();
  const cwd = opts.cwd ?? process.cwd();
  const { files, missing, forMapping } = await findTestFiles(paths, cwd);
  const results: FileResult[] = [];
  for (const p of missing) {
    const r: FileResult = {
      file: resolve(cwd, p),
      cases: [],
      durationMs: 0,
      error: { message: `${p}: no such file or folder`, issues: [issue.fileUnreadable(p, `${p}: no such file or folder`)] },
    };
    results.push(r);
    opts.onFile?.(r);
  }
  const cache = new Map<string, Promise<CompiledMapping>>();
  for (const f of files) {
    const r = await runTestFile(f, { ...opts, cache, onlyMappings: forMapping.get(f) });
    if (!r) continue;
    results.push(r);
    opts.onFile?.(r);
  }
  const totals: TestTotals = { files: results.length, brokenFiles: 0, cases: 0, passed: 0, failed: 0, errors: 0, skipped: 0 };
  for (const r of results) {
    if (r.error) totals.brokenFiles++;
    for (const c of r.cases) {
      totals.cases++;
      if (c.status === 'passed') totals.passed++;
      else if (c.status === 'failed') totals.failed++;
      else if (c.status === 'error') totals.errors++;
      else totals.skipped++;
    }
  }
  const exitCode = totals.brokenFiles > 0 || totals.errors > 0 || results.length === 0 ? ExitCode.config : totals.failed > 0 ? ExitCode.rejected : ExitCode.ok;
  return { files: results, totals, durationMs: Math.round(performance.now() - started), exitCode };
}

/** Error details of a thrown value (CareEtlError issues kept with their positions). */
function errorOf(err: unknown): { message: string; issues: Issue[]; hint?: string } {
  return { message: err instanceof Error ? err.message : String(err), issues: issuesOf(err), hint: err instanceof CareEtlError ? err.hint : undefined };
}

/** Loads and compiles a mapping once per (file, env). */
function compiled(cache: Map<string, Promise<CompiledMapping>>, file: string, env: NodeJS.ProcessEnv): Promise<CompiledMapping> {
  const id = `${file}\0${JSON.stringify(Object.entries(env).sort())}`;
  let p = cache.get(id);
  if (!p) {
    p = loadMapping(file, { env }).then(compileMapping);
    p.catch(() => undefined); // awaited by the callers; avoid an unhandled rejection warning in between
    cache.set(id, p);
  }
  return p;
}

export async function runTestFile(file: string, opts?: RunTestsOptions & { cache?: Map<string, Promise<CompiledMapping>> }): Promise<FileResult>;
/** With `onlyMappings`: undefined when the test file tests another mapping. */
export async function runTestFile(
  file: string,
  opts: RunTestsOptions & { cache?: Map<string, Promise<CompiledMapping>>; onlyMappings?: Set<string> },
): Promise<FileResult | undefined>;
export async function runTestFile(
  file: string,
  opts: RunTestsOptions & { cache?: Map<string, Promise<CompiledMapping>>; onlyMappings?: Set<string> } = {},
): Promise<FileResult | undefined> {
  const started = performance.now();
  const cwd = opts.cwd ?? process.cwd();
  // Files are named relative to the process's folder in messages (shorter), absolute otherwise; either form
  // resolves to the same file, since relative paths are resolved against process.cwd().
  const shown = (p: string) => {
    const rel = relative(process.cwd(), p);
    return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : p;
  };
  const result: FileResult = { file: resolve(cwd, file), cases: [], durationMs: 0 };
  const done = () => {
    result.durationMs = Math.round(performance.now() - started);
    return result;
  };

  let test: MappingTestFile;
  try {
    test = await loadTestFile(shown(resolve(cwd, file)));
  } catch (err) {
    result.error = errorOf(err);
    return done();
  }
  if (opts.onlyMappings && !opts.onlyMappings.has(test.mappingFile)) return undefined;
  result.mappingFile = test.mappingFile;

  const env: NodeJS.ProcessEnv = { ...(opts.env ?? process.env), ...test.env, ...TEST_CONNECTION_ENV };
  let mapping: CompiledMapping;
  try {
    mapping = await compiled(opts.cache ?? new Map(), shown(test.mappingFile), env);
  } catch (err) {
    result.error = errorOf(err);
    if (hasCode(result.error.issues[0], 'file-unreadable')) {
      result.error.hint = 'A test file names its mapping with `mapping:` (relative to the test file); without it, `mapping.yaml` in the same folder.';
    }
    return done();
  }

  const runStart = new Date();
  for (const c of test.cases) {
    if (opts.grep && !c.name.includes(opts.grep)) continue;
    result.cases.push(await runCase(c, test, mapping, runStart, shown));
  }
  return done();
}

function mergeRefs(a: RefStubs, b: RefStubs | undefined): RefStubs {
  if (!b) return a;
  const out: RefStubs = { ...a };
  for (const [name, t] of Object.entries(b)) {
    const prev = out[name];
    out[name] = t === 'auto' || prev === undefined || prev === 'auto' ? t : { ...prev, ...t };
  }
  return out;
}

/** The EvalContext of a case: `$ref` from the stubs, failing like a run does for anything else. */
export function stubContext(stubs: RefStubs, typeOf: (name: string) => string | undefined, now: Date): EvalContext {
  return {
    now,
    resolveRef(name, key) {
      const table = stubs[name];
      const type = typeOf(name) ?? name;
      if (table === 'auto') return `${type}/${placeholderId(key)}`;
      const id = table && Object.prototype.hasOwnProperty.call(table, key) ? table[key] : undefined;
      if (id) return `${type}/${id}`;
      // The same error a run gives for a key that was not loaded (src/pipeline/run-pipeline.ts).
      throw new RefError(name, key, `no ${name} with key \`${key}\` has been loaded (not in its source, or not yet loaded)`, 'ref-missing');
    },
    sourceKey(reference) {
      const [type, id] = reference.split('/');
      if (!id) return undefined;
      for (const [name, table] of Object.entries(stubs)) {
        if (typeOf(name) !== type) continue;
        if (table === 'auto') return id;
        for (const [key, v] of Object.entries(table)) if (v === id) return key;
      }
      return undefined;
    },
  };
}

async function* inlineItems(c: TestCaseDef, res: CompiledResource, shownFile: string): AsyncGenerator<SourceItem> {
  let record = 0;
  for (const row of c.input ?? []) {
    record++;
    yield { ok: true, data: row.data, origin: { source: res.def.from, file: shownFile, line: row.line, record } };
  }
}

function inRows(record: number, rows: RowSelector[] | undefined): boolean {
  if (!rows) return true;
  return rows.some((r) => (typeof r === 'number' ? r === record : record >= r.from && record <= r.to));
}

async function* fixtureItems(c: TestCaseDef, mapping: CompiledMapping, res: CompiledResource, shown: (p: string) => string): AsyncGenerator<SourceItem> {
  const fx = c.fixture!;
  const src = mapping.mapping.sources[res.def.from];
  let cfg: SourceConfig = { ...src };
  if (fx.path) {
    const fmt = detectFormat(fx.path) ?? src.format;
    cfg = fmt === src.format ? { ...src, path: fx.path } : { name: src.name, path: fx.path, format: fmt };
  }
  cfg = { ...cfg, path: shown(cfg.path) };
  let where: jsonata.Expression | undefined;
  if (fx.where) {
    try {
      where = jsonataExpression(fx.where, { RegexEngine: LINEAR_REGEX_ENGINE });
    } catch (err) {
      const e = err as { message?: string; position?: number };
      throw new CareEtlError(`fixture \`where\` is not valid JSONata: ${e.message ?? String(err)}`, {
        issues: [
          issue.error('jsonata-syntax', `fixture \`where\`: ${e.message ?? String(err)}${e.position !== undefined ? ` (at character ${e.position})` : ''}`, {
            location: c.location,
          }),
        ],
      });
    }
    const unsupported = regexProblems(fx.where, where.ast());
    if (unsupported.length) {
      throw new CareEtlError(`fixture \`where\`: ${unsupported[0]!.message}`, {
        issues: unsupported.map((p) => issue.error(p.code, `fixture \`where\`: ${p.message} (at character ${p.offset})`, { location: c.location })),
      });
    }
  }
  const maxRow = fx.rows?.reduce<number>((m, r) => Math.max(m, typeof r === 'number' ? r : r.to), 0);
  for await (const item of openSource(cfg)) {
    const n = item.origin.record;
    if (maxRow !== undefined && n > maxRow) break;
    if (!inRows(n, fx.rows)) continue;
    if (where && item.ok) {
      let keep: unknown;
      try {
        keep = await where.evaluate(item.data);
      } catch (err) {
        const e = err as { message?: string };
        throw new CareEtlError(`fixture \`where\` failed on record ${n}: ${e.message ?? String(err)}`, {
          issues: [issue.error('jsonata', `fixture \`where\` failed on record ${n}: ${e.message ?? String(err)}`, { location: c.location })],
        });
      }
      if (keep !== true) continue;
    }
    yield item;
  }
}

function originText(item: { file: string; line?: number; record?: number }): string {
  return formatLocation({ file: item.file, line: item.line, record: item.line === undefined ? item.record : undefined });
}

function rejectMatches(r: ProducedReject, want: RejectExpectation): boolean {
  if (r.stage !== want.stage) return false;
  return r.issues.some(
    (i) =>
      (want.code === undefined || i.code === want.code) &&
      (want.message === undefined || i.message.includes(want.message)) &&
      (want.path === undefined || i.path === want.path),
  );
}

function describeExpectation(want: RejectExpectation): string {
  return [
    `stage ${want.stage}`,
    want.code && `code ${want.code}`,
    want.message && `message containing "${want.message}"`,
    want.path !== undefined && `path ${want.path}`,
  ]
    .filter(Boolean)
    .join(', ');
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

async function runCase(c: TestCaseDef, test: MappingTestFile, mapping: CompiledMapping, runStart: Date, shown: (p: string) => string): Promise<CaseResult> {
  const t0 = performance.now();
  const result: CaseResult = { name: c.name, resource: c.resource, status: 'passed', durationMs: 0, location: c.location, failures: [] };
  const finish = (status: CaseResult['status']) => {
    result.status = status;
    result.durationMs = Math.round((performance.now() - t0) * 10) / 10;
    return result;
  };
  if (c.skip) return finish('skipped');

  const names = [...mapping.resources.keys()];
  const resourceName = c.resource ?? (names.length === 1 ? names[0] : undefined);
  if (!resourceName || !mapping.resources.has(resourceName)) {
    result.failures.push({
      message: resourceName
        ? `\`resource: ${resourceName}\` is not a mapping of ${shown(test.mappingFile)} (mappings: ${names.join(', ')})${closest(resourceName, names) ? `; did you mean \`${closest(resourceName, names)}\`?` : ''}`
        : `name the mapping under test with \`resource:\` (${shown(test.mappingFile)} has ${names.join(', ')})`,
      issues: [],
    });
    return finish('error');
  }
  result.resource = resourceName;
  const res = mapping.resources.get(resourceName)!;
  const typeOf = (name: string) => mapping.resources.get(name)?.def.type;
  const ctx = stubContext(mergeRefs(test.refs, c.refs), typeOf, c.now ?? test.now ?? runStart);
  const items = c.fixture ? fixtureItems(c, mapping, res, shown) : inlineItems(c, res, shown(test.file));

  const outputs: TransformItem[] = [];
  try {
    for await (const item of transformSource(res, items, { ctx, validate: validateResource })) outputs.push(item);
  } catch (err) {
    const e = errorOf(err);
    result.failures.push({ message: e.message, issues: e.issues });
    return finish('error');
  }

  const resources = outputs.filter((o) => o.ok).map((o) => (o as { resource: unknown }).resource);
  const rejects: ProducedReject[] = outputs
    .filter((o): o is Extract<TransformItem, { ok: false }> => !o.ok)
    .map((r) => ({ stage: r.stage, origin: originText(r), key: r.key, issues: r.issues }));
  const failures: CaseFailure[] = [];
  const allIssues = (rs: ProducedReject[]) =>
    rs.flatMap((r) => r.issues.map((i) => ({ ...i, message: `${r.stage} (${r.origin}${r.key !== undefined ? `, key ${r.key}` : ''}): ${i.message}` })));
  const refHint = (rs: ProducedReject[]) =>
    rs.some((r) => r.issues.some((i) => hasCode(i, 'ref-missing')))
      ? ' — to stub a reference, add its key under `refs:` (e.g. `refs: { patient: { "<key>": p-1 } }`)'
      : '';

  if (c.reject) {
    if (rejects.length === 0)
      failures.push({
        message: `expected a rejection (${describeExpectation(c.reject)}), but ${resources.length ? 'every row was accepted' : 'nothing was rejected'}`,
      });
    else if (rejects.length > 1)
      failures.push({ message: `expected one rejection (${describeExpectation(c.reject)}), got ${rejects.length}`, issues: allIssues(rejects) });
    else if (!rejectMatches(rejects[0]!, c.reject))
      failures.push({ message: `the rejection does not match (expected ${describeExpectation(c.reject)})`, issues: allIssues(rejects) });
  } else if (rejects.length) {
    failures.push({ message: `${plural(rejects.length, 'rejection')} not expected by the case${refHint(rejects)}`, issues: allIssues(rejects) });
  }

  const expected = c.expect !== undefined ? c.expect : c.expectSubset;
  const subset = c.expect === undefined;
  if (expected !== undefined) {
    const list = Array.isArray(expected) ? expected : [expected];
    if (resources.length !== list.length) {
      failures.push({
        message: `expected ${plural(list.length, 'resource')}, got ${plural(resources.length, 'resource')}${resources.length === 0 && !rejects.length ? ' (the map produced nothing: the rows were skipped)' : ''}`,
      });
    }
    const n = Math.min(list.length, resources.length);
    for (let i = 0; i < n; i++) {
      const diff = structuralDiff(list[i], resources[i], { subset });
      if (diff.length) {
        const which = list.length > 1 ? `resource ${i + 1} of ${list.length}` : 'the resource';
        failures.push({
          message: `${which} ${subset ? 'does not contain the expected fields' : 'differs from the expected one'} (map: ${formatLocation(res.def.locations.map)})`,
          diff,
        });
      }
    }
  } else if (c.reject && resources.length && c.count === undefined) {
    failures.push({
      message: `expected only the rejection, but ${plural(resources.length, 'resource')} ${resources.length === 1 ? 'was' : 'were'} produced too (add \`expect\` or \`expectSubset\` for them)`,
    });
  }

  if (c.count !== undefined && resources.length !== c.count && !(expected !== undefined && Array.isArray(expected) && expected.length === c.count)) {
    failures.push({ message: `expected ${plural(c.count, 'resource')}, got ${resources.length}` });
  }

  result.failures = failures;
  if (failures.length) result.produced = { resources, rejects };
  return finish(failures.length ? 'failed' : 'passed');
}
