/**
 * Compiles every JSONata expression of a loaded mapping once, checks names across the file (`from`,
 * `$ref` targets, lookup tables, functions), computes the load order and returns evaluators.
 *
 * Evaluation contract (read before calling):
 * - evaluate rows one after another with `await` (not Promise.all over many rows: ~12× slower);
 * - `evalKey` / `evalGroupKey` take one record; for a grouped resource call `evalKey` with the group's
 *   first record (its `key` defaults to the groupBy expression);
 * - `evalMap` takes a record, or with `groupBy` the array of the group's records (`$` is that array);
 *   it returns the pruned resource, or `undefined` when the map produced nothing (the record is skipped);
 * - every row-level failure is a `MappingEvalError` (one Issue, exit code 1): reject the row, go on.
 */
import jsonata from 'jsonata';
import { redactValues } from '../core/secret.js';
import { CareEtlError, ExitCode, hasCode, type Issue, type Location, type KnownIssueCode } from '../core/issues.js';
import { dependencyOrder } from './dependency-order.js';
import { MappingEvalError, MappingFunctionError, RefError, type ExpressionRole } from './errors.js';
import {
  CONTEXT_FUNCTIONS,
  CTX_BINDING,
  JSONATA_BUILTINS,
  LIBRARY_FUNCTIONS,
  checkZone,
  registerFunctions,
  translateDateFormat,
  type EvalContext,
} from './functions.js';
import { closest as closestName } from './closest.js';
import { analyse, errorOffset, nodeStart, type RefCall } from './jsonata-ast.js';
import { defaultLimits } from './load-mapping.js';
import { toPointer } from './yaml-positions.js';
import { MATCH_KEYWORDS, type LoadedMapping, type ResourceMapping, type YamlPath } from './types.js';
import { careTeamIdentity } from './match-values.js';

export type { EvalContext } from './functions.js';
export { MappingEvalError, RefError } from './errors.js';

export interface CompiledResource {
  def: ResourceMapping;
  /** Names of the mappings this one refers to with `$ref` (distinct, in order of first use). */
  refs: string[];
  evalKey(row: unknown): Promise<string>;
  evalGroupKey?(row: unknown): Promise<string>;
  evalMap(input: unknown, ctx: EvalContext): Promise<unknown>;
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

export interface CompiledMapping {
  mapping: LoadedMapping;
  order: string[];
  /** In dependency order. */
  resources: Map<string, CompiledResource>;
  exports: Map<string, CompiledExport>;
}

/**
 * JSONata guardrails (2.2), given to every expression compiled here; each failure rejects the row, never the run.
 * - `stack`: evaluation nested deeper than 500 levels (non-tail recursion without an end) fails with D1011 instead
 *   of exhausting the JS stack.
 * - `timeout` (added per mapping in `compileMapping`: `limits.expressionTimeoutMs`, default 5000 ms from
 *   schemas/mapping.schema.json, CARE_EXPRESSION_TIMEOUT_MS overrides, 0 = off): JSONata optimises tail calls,
 *   so `($f := function($x) { $f($x) }; $f(1))` never reaches the stack limit and would spin forever; the time
 *   limit fails it with D1012. It is measured from the start of each `evaluate()` and checked with Date.now() at
 *   every evaluation step (cost: BENCHMARKS.md, "Expression time limit"). It cannot interrupt one long built-in
 *   call — a catastrophic regular expression runs to its end on the main thread, only then is the limit seen.
 */
export const JSONATA_OPTIONS = { stack: 500 } as const;

const KNOWN_FUNCTIONS: ReadonlySet<string> = new Set<string>([...JSONATA_BUILTINS, ...LIBRARY_FUNCTIONS]);

interface ExprMeta {
  src: string;
  path: YamlPath;
  role: ExpressionRole;
  owner: string;
}

export function compileMapping(m: LoadedMapping): CompiledMapping {
  const issues: Issue[] = [];
  const file = m.positionOf([])?.file ?? m.file;
  const at = (path: YamlPath, offset?: number): Location => m.positionOf(path, offset) ?? { file };
  const push = (code: KnownIssueCode, message: string, path: YamlPath, offset?: number) =>
    issues.push({ severity: 'error', code, message, path: toPointer(path), location: at(path, offset) });

  const tableNames = new WeakMap<object, string>();
  for (const [name, table] of Object.entries(m.lookups)) tableNames.set(table, name);
  const lookupNames = Object.keys(m.lookups);
  const resourceNames = m.resources.map((r) => r.name);
  const timeoutMs = (m.limits ?? defaultLimits()).expressionTimeoutMs;
  const jsonataOptions = timeoutMs > 0 ? { ...JSONATA_OPTIONS, timeout: timeoutMs } : { ...JSONATA_OPTIONS };

  /** Compiles one expression; reports syntax and static problems; returns undefined on a syntax error. */
  const compile = (meta: ExprMeta): { expr?: jsonata.Expression; refs: RefCall[] } => {
    const { src, path, role, owner } = meta;
    let expr: jsonata.Expression;
    try {
      expr = jsonata(src, jsonataOptions);
    } catch (err) {
      const e = err as { code?: string; message?: string };
      push('jsonata-syntax', `${owner} ${role}: ${e.message ?? String(err)}${e.code ? ` [${e.code}]` : ''}`, path, errorOffset(src, e as object));
      return { refs: [] };
    }
    const facts = analyse(src, expr.ast());
    for (const p of facts.problems) push(p.code, `${owner} ${role}: ${p.message}`, path, p.offset);

    const refs: RefCall[] = [];
    for (const r of facts.refs) {
      if (role !== 'map') {
        push('ref-context', `${owner} ${role}: $ref can only be used in \`map\``, path, r.offset);
      } else if (!resourceNames.includes(r.name)) {
        const guess = closestName(r.name, resourceNames);
        push(
          'ref-unknown',
          `${owner} refers to \`${r.name}\` with $ref, which is not a mapping in this file (mappings: ${resourceNames.join(', ')})${guess ? `; did you mean \`${guess}\`?` : ''}`,
          path,
          r.offset,
        );
      } else {
        refs.push(r);
      }
    }

    for (const call of facts.calls) {
      if (CONTEXT_FUNCTIONS.has(call.name) && call.name !== 'ref' && role !== 'map' && role !== 'column') {
        push('ref-context', `${owner} ${role}: $${call.name} can only be used in \`map\` and export columns`, path, call.offset);
      }
      const fmt = call.args[1];
      if ((call.name === 'date' || call.name === 'dateTime') && fmt?.type === 'string' && typeof fmt.value === 'string') {
        const t = translateDateFormat(fmt.value);
        if (typeof t === 'string') push('date-format-invalid', `${owner} ${role}: ${t}`, path, nodeStart(src, fmt));
      }
      const zone = call.args[2];
      if (call.name === 'dateTime' && zone?.type === 'string' && typeof zone.value === 'string') {
        const bad = checkZone(zone.value);
        if (bad) push('date-zone-invalid', `${owner} ${role}: ${bad}`, path, nodeStart(src, zone));
      }
    }

    const reported = new Set<string>();
    for (const v of facts.variables) {
      if (v.name === '' || v.name === '$' || facts.bound.has(v.name) || lookupNames.includes(v.name)) continue;
      if (KNOWN_FUNCTIONS.has(v.name) && !v.lookupTable) continue;
      if (reported.has(v.name)) continue;
      reported.add(v.name);
      if (v.lookupTable) {
        const guess = closestName(v.name, lookupNames);
        push(
          'lookup-unknown',
          `${owner} ${role}: lookup table \`$${v.name}\` is not defined under \`lookups:\` (${lookupNames.length ? `defined: ${lookupNames.join(', ')}` : 'none defined'})${guess ? `; did you mean \`$${guess}\`?` : ''}`,
          path,
          v.offset,
        );
      } else if (v.called) {
        const guess = closestName(v.name, [...KNOWN_FUNCTIONS]);
        push('function-unknown', `${owner} ${role}: \`$${v.name}\` is not a function${guess ? ` (did you mean \`$${guess}\`?)` : ''}`, path, v.offset);
      } else {
        const guess = closestName(v.name, lookupNames);
        push(
          'variable-unknown',
          `${owner} ${role}: \`$${v.name}\` is not defined: not a lookup table${lookupNames.length ? ` (${lookupNames.join(', ')})` : ''}, function, or variable bound in this expression${guess ? `; did you mean \`$${guess}\`?` : ''}`,
          path,
          v.offset,
        );
      }
    }

    registerFunctions(expr, { tableNames });
    for (const [name, table] of Object.entries(m.lookups)) expr.assign(name, table);
    return { expr, refs };
  };

  // ---------------------------------------------------------------- resources
  interface Pending {
    def: ResourceMapping;
    key?: jsonata.Expression;
    groupBy?: jsonata.Expression;
    map?: jsonata.Expression;
    match?: jsonata.Expression;
    refCalls: RefCall[];
  }
  const pending: Pending[] = [];
  const sourceNames = Object.keys(m.sources);
  for (const def of m.resources) {
    const owner = `mapping \`${def.name}\``;
    if (!Object.prototype.hasOwnProperty.call(m.sources, def.from)) {
      const guess = closestName(def.from, sourceNames);
      push(
        'source-unknown',
        `${owner} reads from \`${def.from}\`, which is not under \`sources:\` (sources: ${sourceNames.join(', ') || 'none'})${guess ? `; did you mean \`${guess}\`?` : ''}`,
        ['resources', def.index, 'from'],
      );
    }
    const p: Pending = { def, refCalls: [] };
    p.key = compile({ src: def.key, path: def.paths.key, role: 'key', owner }).expr;
    if (def.groupBy !== undefined && def.paths.groupBy) {
      p.groupBy = compile({ src: def.groupBy, path: def.paths.groupBy, role: 'groupBy', owner }).expr;
    }
    const map = compile({ src: def.map, path: def.paths.map, role: 'map', owner });
    p.map = map.expr;
    p.refCalls = map.refs;
    if (!MATCH_KEYWORDS.includes(def.match)) {
      p.match = compile({ src: def.match, path: def.paths.match, role: 'match', owner }).expr;
    }
    pending.push(p);
  }

  for (const s of Object.values(m.sources)) {
    if (s.records !== undefined) compile({ src: s.records, path: ['sources', s.name, 'records'], role: 'records', owner: `source \`${s.name}\`` });
  }

  // ---------------------------------------------------------------- exports
  const exports = new Map<string, CompiledExport>();
  for (const ex of Object.values(m.exports ?? {})) {
    const cols: { name: string; expr?: jsonata.Expression; meta: ExprMeta }[] = [];
    for (const c of ex.columns) {
      const meta: ExprMeta = { src: c.expr, path: c.path, role: 'column', owner: `export \`${ex.name}\` column \`${c.name}\`` };
      cols.push({ name: c.name, expr: compile(meta).expr, meta });
    }
    exports.set(ex.name, {
      name: ex.name,
      columns: cols.map((c) => c.name),
      async evalRow(input, ctx) {
        const bindings = { [CTX_BINDING]: ctx };
        const row: Record<string, unknown> = {};
        for (const c of cols) row[c.name] = plain(await run(c.expr!, input, bindings, c.meta, ex.name));
        return row;
      },
    });
  }

  // ---------------------------------------------------------------- order
  const dep = dependencyOrder(pending.map((p) => ({ name: p.def.name, refs: [...new Set(p.refCalls.map((r) => r.name))] })));
  for (const issue of dep.issues) {
    if (hasCode(issue, 'ref-unknown') || hasCode(issue, 'duplicate-name')) continue; // reported above, with positions
    const cycle = dep.cycles.find((c) => issue.message.includes(c.join(' → ')));
    const first = cycle && pending.find((p) => p.def.name === cycle[0]);
    const call = first && cycle && first.refCalls.find((r) => r.name === cycle[1]);
    if (first && call) issues.push({ ...issue, path: toPointer(first.def.paths.map), location: at(first.def.paths.map, call.offset) });
    else issues.push({ ...issue, location: { file } });
  }

  if (issues.length) {
    throw new CareEtlError(`mapping file ${file}: ${issues.length} problem${issues.length === 1 ? '' : 's'}`, {
      issues,
      exitCode: ExitCode.config,
      hint: 'Expressions are JSONata (https://docs.jsonata.org) plus the functions in docs/mapping-functions.md.',
    });
  }

  // ---------------------------------------------------------------- evaluators
  /** Evaluates one expression; every failure becomes a MappingEvalError positioned in the YAML. */
  async function run(expr: jsonata.Expression, input: unknown, bindings: Record<string, unknown> | undefined, meta: ExprMeta, resource: string): Promise<unknown> {
    try {
      return await expr.evaluate(input, bindings);
    } catch (err) {
      throw toEvalError(err, meta, resource);
    }
  }

  function toEvalError(err: unknown, meta: ExprMeta, resource: string): MappingEvalError {
    if (err instanceof MappingEvalError) return err;
    const e = (err ?? {}) as { code?: unknown; message?: unknown; position?: unknown; token?: unknown };
    const location = at(meta.path, errorOffset(meta.src, e));
    let code: KnownIssueCode;
    let message = typeof e.message === 'string' ? e.message : String(err);
    let jsonataCode: string | undefined;
    if (err instanceof MappingFunctionError || err instanceof RefError) {
      code = err.code;
    } else if (typeof e.code === 'string' && /^[A-Z]\d{4}$/.test(e.code)) {
      code = 'jsonata';
      jsonataCode = e.code;
      // JSONata's messages quote the offending value (`Unable to cast value to a number: "Sofia"`): a cell's content.
      const { value, value2 } = e as { value?: unknown; value2?: unknown };
      message = `${guardrailMessage(e.code) ?? redactValues(message, [value, value2])} [${e.code}]`;
    } else {
      code = 'eval-failed';
    }
    const issue: Issue = { severity: 'error', code, message: `${meta.owner} ${meta.role}: ${message}`, path: toPointer(meta.path), location };
    return new MappingEvalError(issue, { resource, role: meta.role, jsonataCode, cause: err });
  }

  /** Our wording for JSONata's guardrail errors (theirs suggests a rewrite that then loops until the time limit). No row data in it. */
  function guardrailMessage(jsonataCode: string): string | undefined {
    if (jsonataCode === 'D1012') {
      return `the expression ran longer than ${timeoutMs} ms and was stopped (likely infinite recursion: a function that keeps calling itself); if it is only slow, raise \`limits.expressionTimeoutMs\``;
    }
    if (jsonataCode === 'D1011') {
      return `the expression nested more than ${JSONATA_OPTIONS.stack} levels deep (function calls within function calls) and was stopped (likely infinite recursion: a function that keeps calling itself)`;
    }
    return undefined;
  }

  function keyOf(v: unknown, meta: ExprMeta, resource: string): string {
    if (typeof v === 'number' && Number.isFinite(v)) return String(v);
    if (typeof v === 'string' && v.trim() !== '') return v.trim();
    const what = meta.role === 'groupBy' ? 'group key' : 'key';
    let code: KnownIssueCode = 'key-missing';
    let detail = `the ${what} \`${short(meta.src)}\` is empty or missing in this record`;
    if (Array.isArray(v)) {
      code = 'key-invalid';
      detail = `the ${what} \`${short(meta.src)}\` gives ${v.length} values; it must give one`;
    } else if (v !== undefined && v !== null && typeof v !== 'string') {
      code = 'key-invalid';
      detail = `the ${what} \`${short(meta.src)}\` gives ${typeof v === 'object' ? 'an object' : `a ${typeof v}`}; it must give text or a number`;
    }
    const issue: Issue = { severity: 'error', code, message: `${meta.owner}: ${detail}`, path: toPointer(meta.path), location: at(meta.path) };
    return raise(new MappingEvalError(issue, { resource, role: meta.role }));
  }

  const resources = new Map<string, CompiledResource>();
  const byName = new Map(pending.map((p) => [p.def.name, p]));
  for (const name of dep.order) {
    const p = byName.get(name)!;
    const { def } = p;
    const owner = `mapping \`${def.name}\``;
    const keyMeta: ExprMeta = { src: def.key, path: def.paths.key, role: 'key', owner };
    const mapMeta: ExprMeta = { src: def.map, path: def.paths.map, role: 'map', owner };
    const keyExpr = p.key!;
    const mapExpr = p.map!;
    const keyField = /^[A-Za-z_][A-Za-z0-9_]*$/.test(def.key.trim()) && !/^(and|or|in|true|false|null)$/.test(def.key.trim()) ? def.key.trim() : undefined;
    let lastCtx: EvalContext | undefined;
    let lastBindings: Record<string, unknown> = {};

    const compiled: CompiledResource = {
      def,
      refs: [...new Set(p.refCalls.map((r) => r.name))],
      async evalKey(row) {
        // Most keys name one column (`MRN`): read it directly when the value is plain text or a number —
        // the same result JSONata gives, without an evaluation per row. Anything else goes through JSONata.
        if (keyField !== undefined && row !== null && typeof row === 'object' && !Array.isArray(row)) {
          const v = Object.hasOwn(row, keyField) ? (row as Record<string, unknown>)[keyField] : undefined; // own fields only, as JSONata reads them
          if (typeof v === 'string' || typeof v === 'number') return keyOf(v, keyMeta, def.name);
        }
        return keyOf(await run(keyExpr, row, undefined, keyMeta, def.name), keyMeta, def.name);
      },
      async evalMap(input, ctx) {
        if (ctx !== lastCtx) {
          lastCtx = ctx;
          lastBindings = { [CTX_BINDING]: ctx };
        }
        const raw = await run(mapExpr, input, lastBindings, mapMeta, def.name);
        const out = prune(raw);
        if (out === undefined) return undefined;
        const fail = (code: KnownIssueCode, message: string) =>
          raise(new MappingEvalError({ severity: 'error', code, message: `${owner} map: ${message}`, path: toPointer(def.paths.map), location: at(def.paths.map) }, { resource: def.name, role: 'map' }));
        if (typeof out !== 'object' || Array.isArray(out)) {
          return fail('map-not-object', `must produce one object (a ${def.type}), got ${Array.isArray(out) ? 'an array' : `a ${typeof out}`}`);
        }
        const obj = out as Record<string, unknown>;
        if (obj.resourceType === undefined) return { resourceType: def.type, ...obj };
        if (obj.resourceType !== def.type) {
          return fail('resource-type-mismatch', `produced resourceType \`${String(obj.resourceType)}\` but the mapping's type is ${def.type}`);
        }
        return obj;
      },
    };

    if (p.groupBy && def.groupBy !== undefined && def.paths.groupBy) {
      const gExpr = p.groupBy;
      const gMeta: ExprMeta = { src: def.groupBy, path: def.paths.groupBy, role: 'groupBy', owner };
      compiled.evalGroupKey = async (row) => keyOf(await run(gExpr, row, undefined, gMeta, def.name), gMeta, def.name);
    }

    if (def.match === 'identifier') {
      compiled.evalMatch = async (resource) => identifierMatch(resource);
    } else if (def.match === 'references') {
      compiled.evalMatch = async (resource) => careTeamIdentity(resource);
    } else if (p.match) {
      const mExpr = p.match;
      const mMeta: ExprMeta = { src: def.match, path: def.paths.match, role: 'match', owner };
      compiled.evalMatch = async (resource) => {
        const v = await run(mExpr, resource, undefined, mMeta, def.name);
        if (v === undefined || v === null || v === '') return undefined;
        if (typeof v === 'string') return v;
        if (typeof v === 'number' || typeof v === 'boolean') return String(v);
        const issue: Issue = { severity: 'error', code: 'match-invalid', message: `${owner} match: \`${short(def.match)}\` must give text, got ${Array.isArray(v) ? `${v.length} values` : 'an object'}`, path: toPointer(mMeta.path), location: at(mMeta.path) };
        return raise(new MappingEvalError(issue, { resource: def.name, role: 'match' }));
      };
    }
    resources.set(name, compiled);
  }

  return { mapping: m, order: dep.order, resources, exports };
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
      return v.trim() === '' ? undefined : v;
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
      const out: Record<string, unknown> = {};
      let n = 0;
      for (const k of Object.keys(v)) {
        const p = prune((v as Record<string, unknown>)[k]);
        if (p !== undefined) {
          out[k] = p;
          n++;
        }
      }
      return n ? out : undefined;
    }
    default:
      return undefined;
  }
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
