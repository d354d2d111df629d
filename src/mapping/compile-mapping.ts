/**
 * Compiles every JSONata expression of a loaded mapping once, checks names across the file and returns
 * evaluators. Read the evaluation contract (rows one after another, `MappingEvalError` per row) before calling.
 * Design: docs/design/mapping-evaluation.md.
 */
import type jsonata from 'jsonata';
import { jsonataExpression } from '../core/jsonata-package.js';
import { CareEtlError, ExitCode, hasCode, issue, type Issue, type Location, type KnownIssueCode } from '../core/issues.js';
import { dependencyOrder } from './dependency-order.js';
import { MappingEvalError, type ExpressionRole } from './errors.js';
import {
  CONTEXT_FUNCTIONS,
  CTX_BINDING,
  JSONATA_BUILTINS,
  LIBRARY_FUNCTIONS,
  checkZone,
  dateFormatMistake,
  phoneCountryProblem,
  registerFunctions,
  translateDateFormat,
  type EvalContext,
} from './functions.js';
import { closest as closestName } from './closest.js';
import { mapFieldProblems, matchFieldProblems } from './map-fields.js';
import { isInlineTable } from './lookup-tables.js';
import {
  ExpressionEvaluator,
  FALLBACK,
  JSONATA_OPTIONS,
  compilerEnabled,
  mappingExpressionCompiler,
  type EvaluatorSettings,
  type ExprMeta,
  type MappingExpressionCompiler,
} from './expression-evaluator.js';
import { boolize } from './jsonata-compiler/index.js';
import { analyse, errorOffset, nodeStart, type AstFacts, type RefCall } from './jsonata-ast.js';
import { defaultLimits } from './load-mapping.js';
import { regexProblems } from './regex-check.js';
import { toPointer } from './yaml-positions.js';
import { columnsOfExpression } from './error-columns.js';
import { MATCH_KEYWORDS, type LoadedMapping, type ResourceMapping, type YamlPath } from './types.js';
import { careTeamIdentity } from './match-values.js';

export type { EvalContext } from './functions.js';
export { MappingEvalError, RefError } from './errors.js';
export { JSONATA_COMPILE_ENV, JSONATA_OPTIONS } from './expression-evaluator.js';

export interface CompiledResource {
  def: ResourceMapping;
  /** Names of the mappings this one refers to with `$ref` (distinct, in order of first use). */
  refs: string[];
  evalKey(row: unknown): Promise<string>;
  evalGroupKey?(row: unknown): Promise<string>;
  /** `where:` on one record: false (JSONata `$boolean`) = the record is skipped. Absent without `where:`. */
  evalWhere?(row: unknown): Promise<boolean>;
  evalMap(input: unknown, ctx: EvalContext): Promise<unknown>;
  /** evalKey / evalMap answering a plain value when no interpreter is needed (throwing then): no promise per row. */
  keyNow(row: unknown): string | Promise<string>;
  mapNow(input: unknown, ctx: EvalContext): unknown;
  /** Match string of a (mapped or server) resource; undefined when it has none. */
  evalMatch?(resource: unknown): Promise<string | undefined>;
}

/** Context for export columns: no `$ref` there. */
export type ExportContext = Pick<EvalContext, 'sourceKey' | 'now'>;

export interface CompiledExport {
  name: string;
  /** Column names in file order. */
  columns: string[];
  /** One CSV row: column name → value (undefined when the expression gives nothing). */
  evalRow(input: unknown, ctx: ExportContext): Promise<Record<string, unknown>>;
}

/** Whether an expression runs as a compiled closure (true) or on JSONata's interpreter only. */
export interface ExpressionInfo {
  owner: string;
  role: ExpressionRole;
  compiled: boolean;
  /** Why the compiler left it to the interpreter (the form it does not compile); absent when compiled or compiler off. */
  fallback?: string;
}

export interface CompiledMapping {
  mapping: LoadedMapping;
  order: string[];
  /** In dependency order. */
  resources: Map<string, CompiledResource>;
  exports: Map<string, CompiledExport>;
  /** Every expression of the file, in file order. */
  expressions: ExpressionInfo[];
}

export interface CompileMappingOptions {
  /** Compile the common subset of JSONata to JS closures (default: on, unless CARE_JSONATA_COMPILE=0). */
  compileExpressions?: boolean;
}

const KNOWN_FUNCTIONS: ReadonlySet<string> = new Set<string>([...JSONATA_BUILTINS, ...LIBRARY_FUNCTIONS]);

/** What the steps of compileMapping share. */
interface MappingCx {
  m: LoadedMapping;
  file: string;
  issues: Issue[];
  at(path: YamlPath, offset?: number): Location;
  push(code: KnownIssueCode, message: string, path: YamlPath, offset?: number): void;
  tableNames: WeakMap<object, string>;
  lookupNames: string[];
  resourceNames: string[];
  jsonataOptions: { stack: number; timeout?: number };
  settings: EvaluatorSettings;
  compiler?: MappingExpressionCompiler;
  expressions: ExpressionInfo[];
}

interface Pending {
  def: ResourceMapping;
  key?: ExpressionEvaluator;
  groupBy?: ExpressionEvaluator;
  where?: ExpressionEvaluator;
  map?: ExpressionEvaluator;
  match?: ExpressionEvaluator;
  refCalls: RefCall[];
}

export function compileMapping(m: LoadedMapping, opts: CompileMappingOptions = {}): CompiledMapping {
  const cx = mappingCx(m, opts.compileExpressions ?? compilerEnabled());
  const pending = m.resources.map((def) => compileResource(cx, def));
  for (const s of Object.values(m.sources)) {
    if (s.records !== undefined) compileChecked(cx, { src: s.records, path: ['sources', s.name, 'records'], role: 'records', owner: `source \`${s.name}\`` });
  }
  const exports = compileExports(cx);
  const order = loadOrder(cx, pending);
  if (cx.issues.length) {
    throw new CareEtlError(`mapping file ${cx.file}: ${cx.issues.length} problem${cx.issues.length === 1 ? '' : 's'}`, {
      issues: cx.issues,
      exitCode: ExitCode.config,
      hint: 'Expressions are JSONata (https://docs.jsonata.org) plus the functions in docs/mapping-functions.md.',
    });
  }
  const byName = new Map(pending.map((p) => [p.def.name, p]));
  const resources = new Map(order.map((name) => [name, resourceEvaluators(cx, byName.get(name)!)]));
  return { mapping: m, order, resources, exports, expressions: cx.expressions };
}

function mappingCx(m: LoadedMapping, compileExpressions: boolean): MappingCx {
  const issues: Issue[] = [];
  const file = m.positionOf([])?.file ?? m.file;
  const at = (path: YamlPath, offset?: number): Location => m.positionOf(path, offset) ?? { file };
  const tableNames = new WeakMap<object, string>();
  for (const [name, table] of Object.entries(m.lookups)) tableNames.set(table, name);
  const timeoutMs = (m.limits ?? defaultLimits()).expressionTimeoutMs;
  return {
    m,
    file,
    issues,
    at,
    push: (code, message, path, offset) => issues.push(issue.error(code, message, { path: toPointer(path), location: at(path, offset) })),
    tableNames,
    lookupNames: Object.keys(m.lookups),
    resourceNames: m.resources.map((r) => r.name),
    jsonataOptions: timeoutMs > 0 ? { ...JSONATA_OPTIONS, timeout: timeoutMs } : { ...JSONATA_OPTIONS },
    settings: { at, timeoutMs },
    compiler: compileExpressions ? mappingExpressionCompiler({ tableNames, lookups: m.lookups }) : undefined,
    expressions: [],
  };
}

/** Compiles one expression; reports syntax and static problems; no evaluator on a syntax error. */
function compileChecked(cx: MappingCx, meta: ExprMeta): { ev?: ExpressionEvaluator; refs: RefCall[] } {
  const { src, path, role, owner } = meta;
  let expr: jsonata.Expression;
  try {
    expr = jsonataExpression(src, cx.jsonataOptions);
  } catch (err) {
    const e = err as { code?: string; message?: string };
    cx.push('jsonata-syntax', `${owner} ${role}: ${e.message ?? String(err)}${e.code ? ` [${e.code}]` : ''}`, path, errorOffset(src, e as object));
    return { refs: [] };
  }
  const facts = analyse(src, expr.ast());
  for (const p of facts.problems) cx.push(p.code, `${owner} ${role}: ${p.message}`, path, p.offset);
  for (const p of regexProblems(src, expr.ast())) cx.push(p.code, `${owner} ${role}: ${p.message}`, path, p.offset);
  const refs = checkRefs(cx, meta, facts);
  checkCalls(cx, meta, facts);
  checkVariables(cx, meta, facts);

  registerFunctions(expr, { tableNames: cx.tableNames });
  for (const [name, table] of Object.entries(cx.m.lookups)) expr.assign(name, table);
  const result = cx.compiler?.(expr);
  const compiled = result?.ok ? result.fn : undefined;
  cx.expressions.push({ owner, role, compiled: compiled !== undefined, ...(result && !result.ok ? { fallback: result.reason } : {}) });
  return { ev: new ExpressionEvaluator(expr, compiled, meta, cx.settings), refs };
}

/** `$ref` only in `map`, to a mapping of this file. */
function checkRefs(cx: MappingCx, { path, role, owner }: ExprMeta, facts: AstFacts): RefCall[] {
  const refs: RefCall[] = [];
  for (const r of facts.refs) {
    if (role !== 'map') {
      cx.push('ref-context', `${owner} ${role}: $ref can only be used in \`map\``, path, r.offset);
    } else if (!cx.resourceNames.includes(r.name)) {
      const guess = closestName(r.name, cx.resourceNames);
      cx.push(
        'ref-unknown',
        `${owner} refers to \`${r.name}\` with $ref, which is not a mapping in this file (mappings: ${cx.resourceNames.join(', ')})${guess ? `; did you mean \`${guess}\`?` : ''}`,
        path,
        r.offset,
      );
    } else {
      refs.push(r);
    }
  }
  return refs;
}

/** Context functions where there is a context; literal date formats and zones that cannot work. */
function checkCalls(cx: MappingCx, { src, path, role, owner }: ExprMeta, facts: AstFacts): void {
  for (const call of facts.calls) {
    if (CONTEXT_FUNCTIONS.has(call.name) && call.name !== 'ref' && role !== 'map' && role !== 'column') {
      cx.push('ref-context', `${owner} ${role}: $${call.name} can only be used in \`map\` and export columns`, path, call.offset);
    }
    const fmt = call.args[1];
    if ((call.name === 'date' || call.name === 'dateTime') && fmt?.type === 'string' && typeof fmt.value === 'string') {
      const t = translateDateFormat(fmt.value);
      const bad = typeof t === 'string' ? t : dateFormatMistake(fmt.value);
      if (bad) cx.push('date-format-invalid', `${owner} ${role}: ${bad}`, path, nodeStart(src, fmt));
    }
    if (call.name === 'phone' && fmt?.type === 'string' && typeof fmt.value === 'string' && fmt.value !== '') {
      const bad = phoneCountryProblem(fmt.value.toUpperCase());
      if (bad) cx.push('phone-country', `${owner} ${role}: ${bad}`, path, nodeStart(src, fmt));
    }
    const zone = call.args[2];
    if (call.name === 'dateTime' && zone?.type === 'string' && typeof zone.value === 'string') {
      const bad = checkZone(zone.value);
      if (bad) cx.push('date-zone-invalid', `${owner} ${role}: ${bad}`, path, nodeStart(src, zone));
    }
  }
}

/** Every `$name` is a lookup table, a function, or bound in the expression. */
function checkVariables(cx: MappingCx, { path, role, owner }: ExprMeta, facts: AstFacts): void {
  const { lookupNames } = cx;
  const reported = new Set<string>();
  for (const v of facts.variables) {
    if (v.name === '' || v.name === '$' || facts.bound.has(v.name) || lookupNames.includes(v.name)) continue;
    if (KNOWN_FUNCTIONS.has(v.name) && !v.lookupTable) continue;
    if (reported.has(v.name)) continue;
    reported.add(v.name);
    if (v.lookupTable) {
      const guess = closestName(v.name, lookupNames);
      cx.push(
        'lookup-unknown',
        `${owner} ${role}: lookup table \`$${v.name}\` is not defined under \`lookups:\` (${lookupNames.length ? `defined: ${lookupNames.join(', ')}` : 'none defined'})${guess ? `; did you mean \`$${guess}\`?` : ''}`,
        path,
        v.offset,
      );
    } else if (v.called) {
      const guess = closestName(v.name, [...KNOWN_FUNCTIONS]);
      cx.push('function-unknown', `${owner} ${role}: \`$${v.name}\` is not a function${guess ? ` (did you mean \`$${guess}\`?)` : ''}`, path, v.offset);
    } else {
      const guess = closestName(v.name, lookupNames);
      cx.push(
        'variable-unknown',
        `${owner} ${role}: \`$${v.name}\` is not defined: not a lookup table${lookupNames.length ? ` (${lookupNames.join(', ')})` : ''}, function, or variable bound in this expression${guess ? `; did you mean \`$${guess}\`?` : ''}`,
        path,
        v.offset,
      );
    }
  }
}

function compileResource(cx: MappingCx, def: ResourceMapping): Pending {
  const owner = `mapping \`${def.name}\``;
  if (!Object.prototype.hasOwnProperty.call(cx.m.sources, def.from)) {
    const sourceNames = Object.keys(cx.m.sources);
    const guess = closestName(def.from, sourceNames);
    cx.push(
      'source-unknown',
      `${owner} reads from \`${def.from}\`, which is not under \`sources:\` (sources: ${sourceNames.join(', ') || 'none'})${guess ? `; did you mean \`${guess}\`?` : ''}`,
      ['resources', def.index, 'from'],
    );
  }
  const p: Pending = { def, refCalls: [] };
  p.key = compileChecked(cx, { src: def.key, path: def.paths.key, role: 'key', owner }).ev;
  if (def.groupBy !== undefined && def.paths.groupBy) {
    p.groupBy = compileChecked(cx, { src: def.groupBy, path: def.paths.groupBy, role: 'groupBy', owner }).ev;
  }
  if (def.where !== undefined && def.paths.where) {
    p.where = compileChecked(cx, { src: def.where, path: def.paths.where, role: 'where', owner }).ev;
  }
  const map = compileChecked(cx, { src: def.map, path: def.paths.map, role: 'map', owner });
  p.map = map.ev;
  p.refCalls = map.refs;
  if (map.ev) checkMapFields(cx, def, owner);
  if (!MATCH_KEYWORDS.includes(def.match)) {
    p.match = compileChecked(cx, { src: def.match, path: def.paths.match, role: 'match', owner }).ev;
    if (p.match) for (const f of matchFieldProblems(def.match, def.type)) cx.push(f.code, `${owner} match: ${f.message}`, def.paths.match, f.offset);
  }
  return p;
}

/** The map's literal fields, `$ref` types and inline lookup labels against the resource's schema (map-fields.ts). */
function checkMapFields(cx: MappingCx, def: ResourceMapping, owner: string): void {
  const refTypes = new Map(cx.m.resources.map((r) => [r.name, r.type]));
  // inline tables only (their entries have a place in the mapping file), code → text label
  const inlineLookups = new Map<string, Record<string, string>>();
  for (const [name, table] of Object.entries(cx.m.lookups)) {
    if (isInlineTable(table) && Object.values(table).every((v) => typeof v === 'string')) inlineLookups.set(name, table as Record<string, string>);
  }
  for (const f of mapFieldProblems(def.map, def.type, { refTypes, inlineLookups })) {
    const message = `${owner} map: ${f.message}`;
    if (f.yamlPath && cx.issues.some((i) => i.message === message)) continue; // one table, several maps: said once
    if (f.yamlPath) cx.push(f.code, message, f.yamlPath);
    else cx.push(f.code, message, def.paths.map, f.offset);
  }
}

function compileExports(cx: MappingCx): Map<string, CompiledExport> {
  const exports = new Map<string, CompiledExport>();
  for (const ex of Object.values(cx.m.exports ?? {})) {
    const cols = ex.columns.map((c) => ({
      name: c.name,
      ev: compileChecked(cx, { src: c.expr, path: c.path, role: 'column', owner: `export \`${ex.name}\` column \`${c.name}\`` }).ev,
    }));
    exports.set(ex.name, {
      name: ex.name,
      columns: cols.map((c) => c.name),
      async evalRow(input, ctx) {
        const bindings = { [CTX_BINDING]: ctx };
        const row: Record<string, unknown> = {};
        for (const c of cols) row[c.name] = plain(await c.ev!.evaluate(input, bindings, ex.name));
        return row;
      },
    });
  }
  return exports;
}

/** Load order from the `$ref`s; cycles are reported at the `$ref` that closes them. */
function loadOrder(cx: MappingCx, pending: Pending[]): string[] {
  const dep = dependencyOrder(pending.map((p) => ({ name: p.def.name, refs: [...new Set(p.refCalls.map((r) => r.name))] })));
  for (const issue of dep.issues) {
    if (hasCode(issue, 'ref-unknown') || hasCode(issue, 'duplicate-name')) continue; // reported above, with positions
    const cycle = dep.cycles.find((c) => issue.message.includes(c.join(' → ')));
    const first = cycle && pending.find((p) => p.def.name === cycle[0]);
    const call = first && cycle && first.refCalls.find((r) => r.name === cycle[1]);
    if (first && call) cx.issues.push({ ...issue, path: toPointer(first.def.paths.map), location: cx.at(first.def.paths.map, call.offset) });
    else cx.issues.push({ ...issue, location: { file: cx.file } });
  }
  return dep.order;
}

/**
 * Longest key, in UTF-8 bytes: PostgreSQL refuses an index entry past ~2,700 bytes (the state's entries are indexed
 * by scope, mapping and key), and no identifier comes near it.
 */
const MAX_KEY_BYTES = 1024;

/** Past MAX_KEY_BYTES (a UTF-16 unit is at most 3 bytes of UTF-8: short keys are not measured). */
function tooLongForKey(key: string): boolean {
  return key.length * 3 > MAX_KEY_BYTES && Buffer.byteLength(key) > MAX_KEY_BYTES;
}

/** The key of a row (or group), or a MappingEvalError: it must be one non-blank text or number. */
function keyOf(v: unknown, meta: ExprMeta, resource: string, at: MappingCx['at']): string {
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  const trimmed = typeof v === 'string' ? v.trim() : '';
  if (trimmed !== '' && !trimmed.includes('\u0000') && !tooLongForKey(trimmed)) return trimmed;
  const what = meta.role === 'groupBy' ? 'group key' : 'key';
  let code: KnownIssueCode = 'key-missing';
  let detail = `the ${what} \`${short(meta.src)}\` is empty or missing in this record`;
  // Either one failed every run of the tenant on a PostgreSQL state, on this one row.
  if (trimmed.includes('\u0000')) {
    code = 'key-invalid';
    detail = `the ${what} \`${short(meta.src)}\` holds a NUL character (U+0000), which no identifier holds and a PostgreSQL state cannot store; fix it in the export (a NUL byte in a cell is usually a damaged file)`;
  } else if (trimmed !== '') {
    code = 'key-invalid';
    detail = `the ${what} \`${short(meta.src)}\` is ${Buffer.byteLength(trimmed).toLocaleString('en-US')} bytes long: a key is an identifier of at most ${MAX_KEY_BYTES.toLocaleString('en-US')} bytes (UTF-8), which a PostgreSQL state can index; key on an identifying column, not on free text`;
  } else if (Array.isArray(v)) {
    code = 'key-invalid';
    detail = `the ${what} \`${short(meta.src)}\` gives ${v.length} values; it must give one`;
  } else if (v !== undefined && v !== null && typeof v !== 'string') {
    code = 'key-invalid';
    detail = `the ${what} \`${short(meta.src)}\` gives ${typeof v === 'object' ? 'an object' : `a ${typeof v}`}; it must give text or a number`;
  }
  const problem = issue.error(code, `${meta.owner}: ${detail}`, { path: toPointer(meta.path), location: at(meta.path) });
  const columns = columnsOfExpression(meta.src);
  if (columns.length) problem.columns = columns;
  return raise(new MappingEvalError(problem, { resource, role: meta.role }));
}

function resourceEvaluators(cx: MappingCx, p: Pending): CompiledResource {
  const { def } = p;
  const owner = `mapping \`${def.name}\``;
  const keyEv = p.key!;
  const mapEv = p.map!;
  const keyField = /^[A-Za-z_][A-Za-z0-9_]*$/.test(def.key.trim()) && !/^(and|or|in|true|false|null)$/.test(def.key.trim()) ? def.key.trim() : undefined;
  let lastCtx: EvalContext | undefined;
  let lastBindings: Record<string, unknown> = {};
  const fail = (code: KnownIssueCode, message: string): never =>
    raise(
      new MappingEvalError(issue.error(code, `${owner} map: ${message}`, { path: toPointer(def.paths.map), location: cx.at(def.paths.map) }), {
        resource: def.name,
        role: 'map',
      }),
    );

  const compiled: CompiledResource = {
    def,
    refs: [...new Set(p.refCalls.map((r) => r.name))],
    evalKey: async (row) => compiled.keyNow(row),
    evalMap: async (input, ctx) => compiled.mapNow(input, ctx),
    keyNow(row) {
      // Most keys name one column (`MRN`): read it directly when the value is plain text or a number —
      // the same result JSONata gives, without an evaluation per row. Anything else goes through JSONata.
      if (keyField !== undefined && row !== null && typeof row === 'object' && !Array.isArray(row)) {
        const v = Object.hasOwn(row, keyField) ? (row as Record<string, unknown>)[keyField] : undefined; // own fields only, as JSONata reads them
        if (typeof v === 'string' || typeof v === 'number') return keyOf(v, keyEv.meta, def.name, cx.at);
      }
      return keyEv.evaluate(row, undefined, def.name).then((v) => keyOf(v, keyEv.meta, def.name, cx.at));
    },
    mapNow(input, ctx) {
      if (ctx !== lastCtx) {
        lastCtx = ctx;
        lastBindings = { [CTX_BINDING]: ctx };
      }
      const raw = mapEv.tryCompiled(input, lastBindings);
      return raw === FALLBACK ? mapEv.interpret(input, lastBindings, def.name).then(resourceOf) : resourceOf(raw);
    },
  };
  /** The mapped value as the resource sent: pruned, `resourceType` checked or put first. */
  function resourceOf(raw: unknown): Record<string, unknown> | undefined {
    const out = pruneResource(raw, def.type);
    if (out === undefined) return undefined;
    if (typeof out !== 'object' || Array.isArray(out)) {
      return fail('map-not-object', `must produce one object (a ${def.type}), got ${Array.isArray(out) ? 'an array' : `a ${typeof out}`}`);
    }
    const obj = out as Record<string, unknown>;
    if (obj.resourceType !== def.type) {
      return fail('resource-type-mismatch', `produced resourceType \`${String(obj.resourceType)}\` but the mapping's type is ${def.type}`);
    }
    return obj;
  }
  if (p.groupBy) {
    const gEv = p.groupBy;
    compiled.evalGroupKey = async (row) => keyOf(await gEv.evaluate(row, undefined, def.name), gEv.meta, def.name, cx.at);
  }
  if (p.where) {
    const wEv = p.where;
    // JSONata's own truthiness (`$boolean`; nothing = false), so `where: STATUS != "deleted"` reads as in a condition.
    compiled.evalWhere = async (row) => boolize(await wEv.evaluate(row, undefined, def.name));
  }
  const evalMatch = matchEvaluator(cx, p);
  if (evalMatch) compiled.evalMatch = evalMatch;
  return compiled;
}

function matchEvaluator(cx: MappingCx, { def, match }: Pending): CompiledResource['evalMatch'] {
  if (def.match === 'identifier') return async (resource) => identifierMatch(resource);
  if (def.match === 'references') return async (resource) => careTeamIdentity(resource);
  if (!match) return undefined;
  return async (resource) => {
    const v = await match.evaluate(resource, undefined, def.name);
    if (v === undefined || v === null || v === '') return undefined;
    if (typeof v === 'string') return v;
    if (typeof v === 'number' || typeof v === 'boolean') return String(v);
    const { meta } = match;
    const problem = issue.error(
      'match-invalid',
      `${meta.owner} match: \`${short(def.match)}\` must give text, got ${Array.isArray(v) ? `${v.length} values` : 'an object'}`,
      {
        path: toPointer(meta.path),
        location: cx.at(meta.path),
      },
    );
    return raise(new MappingEvalError(problem, { resource: def.name, role: 'match' }));
  };
}

function raise(err: Error): never {
  throw err;
}

/** `system|value` of the first identifier that has both. */
export function identifierMatch(resource: unknown): string | undefined {
  const ids = (resource as { identifier?: unknown } | null)?.identifier;
  if (!Array.isArray(ids)) return undefined;
  for (const id of ids) {
    const { system, value } = (id ?? {}) as { system?: unknown; value?: unknown };
    if (typeof system === 'string' && system !== '' && (typeof value === 'string' || typeof value === 'number') && String(value) !== '') {
      return `${system}|${String(value)}`;
    }
  }
  return undefined;
}

function isJsonataFunction(v: object): boolean {
  const f = v as { _jsonata_lambda?: unknown; _jsonata_function?: unknown };
  return f._jsonata_lambda === true || f._jsonata_function === true;
}

/**
 * Removes what must not reach the API: undefined, null, blank strings, NaN/Infinity, functions, and —
 * recursively — arrays and objects left empty (`{ "telecom": [] }`, `{ "address": [{}] }`). `false` and
 * `0` are kept. Returns a fresh plain-JSON copy (JSONata sequence flags are dropped); undefined when
 * nothing is left.
 */
export function prune(v: unknown): unknown {
  if (v === undefined || v === null) return undefined;
  switch (typeof v) {
    case 'string':
      return isVisibleAscii(v.charCodeAt(0)) || v.trim() !== '' ? v : undefined;
    case 'number':
      return Number.isFinite(v) ? v : undefined;
    case 'boolean':
      return v;
    case 'object': {
      if (Array.isArray(v)) {
        const out: unknown[] = [];
        for (const x of v) {
          const p = prune(x);
          if (p !== undefined) out.push(p);
        }
        return out.length ? out : undefined;
      }
      if (isJsonataFunction(v)) return undefined;
      // for…in with an own-property check: Object.keys' order without its array per object (~15 % of prune)
      let out: Record<string, unknown> | undefined;
      for (const k in v) {
        if (!Object.prototype.hasOwnProperty.call(v, k)) continue;
        const p = prune((v as Record<string, unknown>)[k]);
        if (p !== undefined) (out ??= {})[k] = p;
      }
      return out;
    }
    default:
      return undefined;
  }
}

/** A printable, non-space ASCII code: a string starting with one is not blank (no `trim()` copy needed to tell). */
function isVisibleAscii(code: number): boolean {
  return code > 32 && code < 127;
}

/**
 * `prune` of a mapped resource with `resourceType` put first when the mapping left it out — one copy where
 * `{ resourceType, ...prune(raw) }` made two. A `resourceType` the mapping set keeps its place (pruned as usual).
 */
function pruneResource(raw: unknown, type: string): unknown {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw) || isJsonataFunction(raw)) return prune(raw);
  const src = raw as Record<string, unknown>;
  if (Object.hasOwn(src, 'resourceType') && prune(src.resourceType) !== undefined) return prune(raw);
  const out: Record<string, unknown> = { resourceType: type };
  let n = 0;
  for (const k of Object.keys(src)) {
    if (k === 'resourceType') continue;
    const p = prune(src[k]);
    if (p !== undefined) {
      out[k] = p;
      n++;
    }
  }
  return n ? out : undefined;
}

/** Export cells: plain copies of arrays/objects (no sequence flags), functions dropped. */
function plain(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return typeof v === 'function' ? undefined : v;
  if (Array.isArray(v)) return v.map(plain);
  if (isJsonataFunction(v)) return undefined;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v)) out[k] = plain((v as Record<string, unknown>)[k]);
  return out;
}

function short(src: string): string {
  const s = src.replace(/\s+/g, ' ').trim();
  return s.length > 40 ? `${s.slice(0, 40)}…` : s;
}
