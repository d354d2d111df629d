/**
 * Loads a mapping file: YAML (with line/col for every node) → JSON-Schema validation (schemas/
 * mapping.schema.json, errors mapped back to the YAML) → one step per section: limits, `target`, `sources`,
 * `lookups` (lookup-tables.ts), `resources`, `exports` — `${VAR}` interpolation in target values and file
 * paths, paths resolved against the mapping's folder, lookup files read.
 * Every problem found is collected; one CareEtlError (exit 2) carries them all.
 */
import { dirname, resolve } from 'node:path';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { generatedValidators, MAPPING_SCHEMA_FILE, mappingAjv } from '../schemas/validator-setup.js';
import { isMap, isScalar } from 'yaml';
import { CareEtlError, ExitCode, issue, type Issue, type Location, type KnownIssueCode } from '../core/issues.js';
import { registerSecret } from '../core/secret.js';
import { interpolate } from './interpolate.js';
import { fileEntryOptions, looksLikeNdjson, ndjsonInJsonMessage } from './lookup-format.js';
import { defaultLimits, defaultOnMissing } from './mapping-defaults.js';
import { readYamlConfig, schemaHint } from './yaml-config.js';
import { closeLookups, readLookups } from './lookup-tables.js';
import type { LookupFileReader } from './lookup-file.js';
import type { ExportColumn, ExportsConfig, LoadedMapping, MappingLimits, ResourceMapping, SourceConfig, TargetConfig, UpdateMethodConfig } from './types.js';
import { YamlLocator, toPointer, type DocPath } from './yaml-positions.js';
import { foldMisspelledKeys, schemaIssue } from './schema-issues.js';
import type { WritableType } from '../schemas/resource-types.js';
import { isObj, type Obj } from '../core/is-object.js';

export type * from './types.js';

export { closeLookups } from './lookup-tables.js';
export { defaultLimits } from './mapping-defaults.js';

export const MAPPING_SCHEMA_URL = new URL('../../schemas/mapping.schema.json', import.meta.url);
const MAX_SCHEMA_ISSUES = 50;

/** Environment variable that, when set, replaces `limits.expressionTimeoutMs` (`0` = no time limit). */
export const EXPRESSION_TIMEOUT_ENV = 'CARE_EXPRESSION_TIMEOUT_MS';

let validator: ValidateFunction | undefined;
/** The one built with care-etl (schemas/validator-setup.ts), else compiled now without code optimisation (~35 of ~85 ms CPU). */
function mappingValidator(): ValidateFunction {
  validator ??= generatedValidators('mapping')?.[MAPPING_SCHEMA_FILE] ?? mappingAjv({ optimize: false }).getSchema(MAPPING_SCHEMA_FILE);
  if (!validator) throw new Error(`care-etl: schema ${MAPPING_SCHEMA_FILE} did not compile`);
  return validator;
}

export interface LoadMappingOptions {
  /**
   * Variables for `${VAR}` interpolation (default `process.env`). A command that takes a value from a flag
   * (e.g. `--api-key`) passes `{ ...process.env, CARE_API_KEY: flag }` so `${CARE_API_KEY}` resolves.
   */
  env?: Record<string, string | undefined>;
  /** Lookup files up to this size are held in memory, larger ones indexed on disk (default: lookup-file.ts LOOKUP_MEMORY_MAX_BYTES, 32 MiB). */
  lookupMemoryMaxBytes?: number;
  /** Parent folder of on-disk lookup indexes (default: the system temp dir). */
  lookupTempDir?: string;
  /** Reads each lookup file (default `readLookupFile`; the studio's keeps unchanged files' tables between edits). */
  lookupReader?: LookupFileReader;
  /** The mapping's text as an editor holds it (the studio): used instead of reading `file`, whose folder still resolves relative paths. */
  text?: string;
}

/** What every step shares: where the file is, its YAML positions, the issues found so far. */
interface LoadContext {
  file: string;
  dir: string;
  env: Record<string, string | undefined>;
  loc: YamlLocator;
  issues: Issue[];
  warnings: Issue[];
  positionOf(path: DocPath, offset?: number): Location | undefined;
  issueAt(code: KnownIssueCode, message: string, path: DocPath, offset?: number): Issue;
  /** Interpolates one string scalar; problems become issues at the exact `${`. */
  interp(value: string, path: DocPath): { value: string; ok: boolean; interpolated: boolean };
}

export async function loadMapping(file: string, opts: LoadMappingOptions = {}): Promise<LoadedMapping> {
  const env = opts.env ?? process.env;
  const abs = resolve(file);
  const { data, loc, warnings, fail } = await readMappingYaml(file, opts.text);
  const ctx = loadContext(file, abs, env, loc, warnings);

  const validate = mappingValidator();
  if (!validate(data)) ctx.issues.push(...schemaIssues(validate.errors ?? [], loc));

  // limits first (the lookup expressions run under the time limit), their issues last (file order)
  const limitIssues: Issue[] = [];
  const limits = readLimits(data.limits, env, file, limitIssues);
  const target = readTarget(data.target, ctx);
  if (Object.hasOwn(data, 'target')) target.declared = true; // even empty: a real server is meant (src/target/open-target.ts)
  const sources = await readSources(data.sources, ctx);
  const lookups = await readLookups(data.lookups, {
    ...ctx,
    read: { timeoutMs: limits.expressionTimeoutMs, memoryMaxBytes: opts.lookupMemoryMaxBytes, tempDir: opts.lookupTempDir, reader: opts.lookupReader },
  });
  const resources = readResources(data.resources, ctx);
  const exportsCfg = readExports(data.exports, ctx);
  const state = typeof data.state === 'string' ? ctx.interp(data.state, ['state']) : undefined;
  ctx.issues.push(...limitIssues);

  if (ctx.issues.length) {
    closeLookups(lookups);
    throw fail(ctx.issues);
  }
  return {
    file: abs,
    dir: ctx.dir,
    version: 1,
    target,
    sources,
    lookups,
    resources,
    ...(exportsCfg ? { exports: exportsCfg } : {}),
    ...(state?.ok ? { state: state.value } : {}),
    limits,
    warnings,
    positionOf: ctx.positionOf,
  };
}

/** Reads and parses the file (`readYamlConfig`); YAML errors (and a document that is not a mapping) throw at once. */
async function readMappingYaml(
  file: string,
  text?: string,
): Promise<{ data: Obj; loc: YamlLocator; warnings: Issue[]; fail: (issues: Issue[]) => CareEtlError }> {
  const yaml = await readYamlConfig(file, {
    what: 'mapping file',
    text,
    // A key written in the file must not leak through a YAML error's snippet either.
    beforeParse: (text) => {
      for (const m of text.matchAll(/^[ \t]*apiKey[ \t]*:[ \t]*["']?([^"'\s#]{4,})/gm)) if (!m[1].startsWith('${')) registerSecret(m[1]);
    },
  });
  // Hints never repeat advice already followed: the modeline is suggested only to a file without one.
  const hint = schemaHint(yaml.text, 'mapping.schema.json', 'Fix the listed lines.');
  const fail = (issues: Issue[]) =>
    new CareEtlError(`mapping file ${file}: ${issues.length} problem${issues.length === 1 ? '' : 's'}`, { issues, exitCode: ExitCode.config, hint });
  if (yaml.errors.length) throw fail(yaml.errors);
  if (!isObj(yaml.data)) {
    throw fail([
      issue.invalid('a mapping file is a YAML mapping with `version: 1`, `sources:` and `resources:`', {
        location: yaml.locator.positionOf([]) ?? { file, line: 1, column: 1 },
      }),
    ]);
  }
  return { data: yaml.data, loc: yaml.locator, warnings: yaml.warnings, fail };
}

function loadContext(file: string, abs: string, env: Record<string, string | undefined>, loc: YamlLocator, warnings: Issue[]): LoadContext {
  const issues: Issue[] = [];
  const positionOf = (path: DocPath, offset?: number): Location | undefined => loc.positionOf(path, offset);
  const issueAt = (code: KnownIssueCode, message: string, path: DocPath, offset?: number): Issue =>
    issue.error(code, message, { path: toPointer(path), location: positionOf(path, offset) ?? { file } });
  const interp = (value: string, path: DocPath): { value: string; ok: boolean; interpolated: boolean } => {
    const r = interpolate(value, env);
    for (const p of r.problems) issues.push(issueAt(p.code, p.message, path, p.offset));
    return { value: r.value, ok: r.problems.length === 0, interpolated: r.interpolated };
  };
  return { file, dir: dirname(abs), env, loc, issues, warnings, positionOf, issueAt, interp };
}

// ---------------------------------------------------------------- target

function readTarget(raw: unknown, ctx: LoadContext): TargetConfig {
  const target: TargetConfig = {};
  if (!isObj(raw)) return target;
  for (const k of ['baseUrl', 'apiKey', 'emrId', 'tenantId'] as const) {
    const v = raw[k];
    if (typeof v !== 'string') continue;
    const r = ctx.interp(v, ['target', k]);
    if (!r.ok) continue;
    target[k] = r.value;
    if (k === 'apiKey') registerSecret(r.value);
    if (k === 'apiKey' && !r.interpolated) {
      ctx.warnings.push(
        issue.warning('secret-in-file', 'the API key is written in the mapping file; use `apiKey: ${CARE_API_KEY}` and set the variable instead', {
          path: '/target/apiKey',
          location: ctx.positionOf(['target', 'apiKey']),
        }),
      );
    }
    if (k === 'baseUrl' && !isHttpUrl(r.value)) {
      ctx.issues.push(ctx.issueAt('target-invalid', 'baseUrl must be an http:// or https:// URL', ['target', 'baseUrl']));
    }
  }
  if (isObj(raw.updateMethod)) target.updateMethod = readUpdateMethods(raw.updateMethod, ctx);
  return target;
}

function readUpdateMethods(raw: Obj, ctx: LoadContext): Partial<Record<WritableType, UpdateMethodConfig>> {
  const um: Partial<Record<WritableType, UpdateMethodConfig>> = {};
  for (const [type, v] of Object.entries(raw)) {
    const base: DocPath = ['target', 'updateMethod', type];
    let cfg: UpdateMethodConfig | undefined;
    if (typeof v === 'string') {
      const r = ctx.interp(v, base);
      if (r.ok) cfg = { method: r.value as UpdateMethodConfig['method'] };
    } else if (isObj(v) && typeof v.method === 'string') {
      const m = ctx.interp(v.method, [...base, 'method']);
      const p = typeof v.path === 'string' ? ctx.interp(v.path, [...base, 'path']) : undefined;
      if (m.ok && (!p || p.ok)) cfg = { method: m.value as UpdateMethodConfig['method'], ...(p ? { path: p.value } : {}) };
    }
    if (cfg) um[type as WritableType] = cfg;
  }
  return um;
}

// ---------------------------------------------------------------- sources

async function readSources(raw: unknown, ctx: LoadContext): Promise<Record<string, SourceConfig>> {
  const sources: Record<string, SourceConfig> = {};
  if (!isObj(raw)) return sources;
  for (const [name, s] of Object.entries(raw)) {
    if (!isObj(s) || typeof s.path !== 'string') continue;
    const base: DocPath = ['sources', name];
    const r = ctx.interp(s.path, [...base, 'path']);
    if (!r.ok) continue;
    const entry = fileEntryOptions(s, r.value);
    for (const p of entry.problems) ctx.issues.push(ctx.issueAt(p.code, p.message, [...base, ...p.at]));
    if (!entry.options) continue;
    const { format, formatDeclared, records, csv } = entry.options;
    const src: SourceConfig = { name, path: resolve(ctx.dir, r.value), format };
    if (records !== undefined) src.records = records;
    if (csv !== undefined) src.csv = csv;
    if (Array.isArray(s.optional)) src.optional = s.optional.filter((f): f is string => typeof f === 'string');
    // A `.json` file holding NDJSON fails deep in the JSON reader with a position: say what it is, here.
    if (format === 'json' && (await looksLikeNdjson(src.path))) {
      ctx.issues.push(ctx.issueAt('source-format', ndjsonInJsonMessage(r.value), [...base, formatDeclared ? 'format' : 'path']));
    }
    sources[name] = src;
  }
  return sources;
}

// ---------------------------------------------------------------- resources

function readResources(raw: unknown, ctx: LoadContext): ResourceMapping[] {
  const resources: ResourceMapping[] = [];
  if (!Array.isArray(raw)) return resources;
  const firstIndex = new Map<string, number>();
  raw.forEach((r: unknown, index: number) => {
    if (!isObj(r)) return;
    const base: DocPath = ['resources', index];
    if (typeof r.name === 'string') {
      const prev = firstIndex.get(r.name);
      if (prev !== undefined) {
        const p = ctx.positionOf(['resources', prev, 'name']);
        ctx.issues.push(
          ctx.issueAt(
            'duplicate-name',
            `a mapping named \`${r.name}\` already exists (resources[${prev}]${p?.line ? `, line ${p.line}` : ''}); names must be unique`,
            [...base, 'name'],
          ),
        );
        return;
      }
      firstIndex.set(r.name, index);
    }
    const res = resourceMapping(r, index, ctx);
    if (res) resources.push(res);
  });
  return resources;
}

function resourceMapping(r: Obj, index: number, ctx: LoadContext): ResourceMapping | undefined {
  const base: DocPath = ['resources', index];
  const { name, type, from, map } = r;
  const keySrc = typeof r.key === 'string' ? r.key : typeof r.groupBy === 'string' ? r.groupBy : undefined;
  if (typeof name !== 'string' || typeof type !== 'string' || typeof from !== 'string' || typeof map !== 'string' || keySrc === undefined) return undefined;
  const keyPath: DocPath = [...base, typeof r.key === 'string' ? 'key' : 'groupBy'];
  const match = typeof r.match === 'string' ? r.match : type === 'CareTeam' ? 'references' : 'identifier';
  const matchPath: DocPath = typeof r.match === 'string' ? [...base, 'match'] : [...base, 'type'];
  const at = (p: DocPath) => ctx.positionOf(p) ?? { file: ctx.file };
  const res: ResourceMapping = {
    name,
    type: type as WritableType,
    from,
    key: keySrc,
    map,
    onMissing: r.onMissing === 'end' || r.onMissing === 'ignore' ? r.onMissing : defaultOnMissing(),
    match,
    index,
    locations: { key: at(keyPath), map: at([...base, 'map']), match: at(matchPath) },
    paths: { key: keyPath, map: [...base, 'map'], match: matchPath },
  };
  if (r.reconcile === 'auto' || r.reconcile === 'always' || r.reconcile === 'never') res.reconcile = r.reconcile;
  if (typeof r.allowEnding === 'number' || typeof r.allowEnding === 'string') res.allowEnding = r.allowEnding;
  if (typeof r.groupBy === 'string') {
    res.groupBy = r.groupBy;
    res.locations.groupBy = at([...base, 'groupBy']);
    res.paths.groupBy = [...base, 'groupBy'];
  }
  if (typeof r.where === 'string') {
    res.where = r.where;
    res.locations.where = at([...base, 'where']);
    res.paths.where = [...base, 'where'];
  }
  return res;
}

// ---------------------------------------------------------------- exports

function readExports(raw: unknown, ctx: LoadContext): ExportsConfig | undefined {
  if (!isObj(raw)) return undefined;
  const exportsCfg: ExportsConfig = {};
  for (const [name, e] of Object.entries(raw)) {
    if (!isObj(e) || !isObj(e.columns)) continue;
    const colsPath: DocPath = ['exports', name, 'columns'];
    // column order from the YAML node (JS objects put integer-like keys first)
    const node = ctx.loc.find(colsPath)?.node;
    const order = isMap(node) ? node.items.map((p) => String(isScalar(p.key) ? p.key.value : p.key)) : Object.keys(e.columns);
    const columns: ExportColumn[] = [];
    for (const col of order) {
      const expr = e.columns[col];
      if (typeof expr !== 'string') continue;
      const path = [...colsPath, col];
      columns.push({ name: col, expr, location: ctx.positionOf(path) ?? { file: ctx.file }, path });
    }
    exportsCfg[name] = { name, columns };
  }
  return exportsCfg;
}

// ---------------------------------------------------------------- limits

/** `limits:` over the schema defaults; CARE_EXPRESSION_TIMEOUT_MS wins over both. */
function readLimits(raw: unknown, env: Record<string, string | undefined>, file: string, issues: Issue[]): MappingLimits {
  const limits = defaultLimits();
  if (isObj(raw) && typeof raw.expressionTimeoutMs === 'number') limits.expressionTimeoutMs = raw.expressionTimeoutMs;
  const envTimeout = env[EXPRESSION_TIMEOUT_ENV];
  if (envTimeout !== undefined && envTimeout.trim() !== '') {
    const t = envTimeout.trim();
    if (/^\d{1,9}$/.test(t)) {
      limits.expressionTimeoutMs = Number(t);
    } else {
      issues.push(
        issue.error(
          'env-invalid',
          `${EXPRESSION_TIMEOUT_ENV} must be a whole number of milliseconds (0 = no time limit), got \`${t.length > 20 ? `${t.slice(0, 20)}…` : t}\``,
          {
            location: { file },
          },
        ),
      );
    }
  }
  return limits;
}

function isHttpUrl(v: string): boolean {
  try {
    const u = new URL(v);
    return u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    return false;
  }
}

// -------------------------------------------------------------------------------------------- schema errors

/** Turns ajv errors into issues at the YAML nodes; collapses anyOf noise, drops `if` wrappers. */
function schemaIssues(errors: ErrorObject[], loc: YamlLocator): Issue[] {
  let rest = errors.filter((e) => e.keyword !== 'if' && !(e.propertyName !== undefined && e.keyword !== 'propertyNames'));
  const out: ErrorObject[] = [];
  const anyOfs = rest.filter((e) => e.keyword === 'anyOf' || e.keyword === 'oneOf');
  const consumed = new Set<ErrorObject>();
  const replacement = new Map<ErrorObject, ErrorObject[]>();
  for (const a of anyOfs) {
    const prefix = `${a.schemaPath}/`;
    const branches = new Map<string, ErrorObject[]>();
    for (const e of rest) {
      if (e === a || !e.schemaPath.startsWith(prefix) || !e.instancePath.startsWith(a.instancePath)) continue;
      consumed.add(e);
      const b = e.schemaPath.slice(prefix.length).split('/')[0]!;
      branches.set(b, [...(branches.get(b) ?? []), e]);
    }
    const plausible = [...branches.values()].filter((errs) => !errs.some((e) => e.keyword === 'type' && e.instancePath === a.instancePath));
    if (plausible.length === 1) replacement.set(a, plausible[0]!);
  }
  rest = rest.filter((e) => !consumed.has(e));
  for (const e of rest) out.push(...(replacement.get(e) ?? [e]));

  const issues: Issue[] = [];
  const seen = new Set<string>();
  for (const e of foldMisspelledKeys(out)) {
    const found = schemaIssue(e, loc);
    const sig = `${found.path}|${found.message}`;
    if (seen.has(sig)) continue;
    seen.add(sig);
    issues.push(found);
  }
  if (issues.length > MAX_SCHEMA_ISSUES) {
    const more = issues.length - MAX_SCHEMA_ISSUES;
    issues.length = MAX_SCHEMA_ISSUES;
    issues.push(issue.invalid(`… and ${more} more schema problems`, { location: { file: loc.file } }));
  }
  return issues;
}
