/**
 * Loads a mapping file: YAML (with line/col for every node) → JSON-Schema validation (schemas/
 * mapping.schema.json, errors mapped back to the YAML) → `${VAR}` interpolation (target values and file
 * paths only) → source paths resolved against the mapping's folder → lookup tables read.
 * Every problem found is collected; one CareEtlError (exit 2) carries them all.
 */
import { readTextFile } from '../core/read-text-file.js';
import { readFileSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { dirname, extname, resolve } from 'node:path';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { parse as parseCsv } from 'csv-parse/sync';
import { LineCounter, isMap, isScalar, parseDocument, type Node } from 'yaml';
import { CareEtlError, ExitCode, type Issue, type Location, type KnownIssueCode } from '../core/issues.js';
import { registerSecret } from '../core/secret.js';
import { JSONATA_BUILTINS, LIBRARY_FUNCTIONS } from './functions.js';
import { interpolate } from './interpolate.js';
import type {
  CsvOptions,
  ExportColumn,
  ExportsConfig,
  LoadedMapping,
  MappingLimits,
  ResourceMapping,
  ResourceType,
  SourceConfig,
  SourceFormat,
  TargetConfig,
  UpdateMethodConfig,
} from './types.js';
import { YamlLocator, toPointer, type DocPath } from './yaml-positions.js';
import { schemaIssue } from './schema-issues.js';

export type * from './types.js';

export const MAPPING_SCHEMA_URL = new URL('../../schemas/mapping.schema.json', import.meta.url);
/** Lookup files are read whole: refuse anything bigger. */
export const LOOKUP_FILE_MAX_BYTES = 50 * 1024 * 1024;
const MAX_SCHEMA_ISSUES = 50;

/** Environment variable that, when set, replaces `limits.expressionTimeoutMs` (`0` = no time limit). */
export const EXPRESSION_TIMEOUT_ENV = 'CARE_EXPRESSION_TIMEOUT_MS';

let schemaJson: Record<string, unknown> | undefined;
function mappingSchema(): Record<string, unknown> {
  schemaJson ??= JSON.parse(readFileSync(MAPPING_SCHEMA_URL, 'utf8')) as Record<string, unknown>;
  return schemaJson;
}

let validator: ValidateFunction | undefined;
function mappingValidator(): ValidateFunction {
  if (!validator) {
    const ajv = new Ajv({ allErrors: true, verbose: true, strict: true });
    validator = ajv.compile(mappingSchema());
  }
  return validator;
}

let limitDefaults: MappingLimits | undefined;
/** The `default` of each `limits:` property, read from schemas/mapping.schema.json (the one place they are written). */
export function defaultLimits(): MappingLimits {
  if (!limitDefaults) {
    const props = ((mappingSchema().definitions as Obj | undefined)?.limits as Obj | undefined)?.properties as Obj | undefined;
    const d = (props?.expressionTimeoutMs as Obj | undefined)?.default;
    if (typeof d !== 'number' || !Number.isInteger(d) || d < 1) throw new Error('schemas/mapping.schema.json: #/definitions/limits/properties/expressionTimeoutMs has no valid `default`');
    limitDefaults = { expressionTimeoutMs: d };
  }
  return { ...limitDefaults };
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

export interface LoadMappingOptions {
  /**
   * Variables for `${VAR}` interpolation (default `process.env`). A command that takes a value from a flag
   * (e.g. `--api-key`) passes `{ ...process.env, CARE_API_KEY: flag }` so `${CARE_API_KEY}` resolves.
   */
  env?: Record<string, string | undefined>;
}

export async function loadMapping(file: string, opts: LoadMappingOptions = {}): Promise<LoadedMapping> {
  const env = opts.env ?? process.env;
  const abs = resolve(file);
  const dir = dirname(abs);
  const fail = (issues: Issue[]) =>
    new CareEtlError(`mapping file ${file}: ${issues.length} problem${issues.length === 1 ? '' : 's'}`, {
      issues,
      exitCode: ExitCode.config,
      hint: 'Fix the listed lines. Every key is described in schemas/mapping.schema.json (add `# yaml-language-server: $schema=<path>/schemas/mapping.schema.json` as the first line for completion in your editor).',
    });

  const text = await readTextFile(abs, file, 'mapping file');
  // A key written in the file must not leak through a YAML error's snippet either.
  for (const m of text.matchAll(/^[ \t]*apiKey[ \t]*:[ \t]*["']?([^"'\s#]{4,})/gm)) if (!m[1].startsWith('${')) registerSecret(m[1]);

  // ---------------------------------------------------------------- YAML
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: true, uniqueKeys: true });
  const loc = new YamlLocator(file, text, doc, lineCounter);
  const issues: Issue[] = [];
  const warnings: Issue[] = [];
  const yamlIssue = (e: { code: string; message: string; linePos?: [{ line: number; col: number }, ...unknown[]] }, severity: 'error' | 'warning'): Issue => ({
    severity,
    code: 'yaml',
    message: `${e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '')} (${e.code})`,
    location: e.linePos ? { file, line: e.linePos[0].line, column: e.linePos[0].col } : { file },
  });
  for (const e of doc.errors) issues.push(yamlIssue(e, 'error'));
  for (const w of doc.warnings) warnings.push(yamlIssue(w, 'warning'));
  if (issues.length) throw fail(issues);

  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    throw fail([{ severity: 'error', code: 'yaml', message: (err as Error).message, location: { file, line: 1, column: 1 } }]);
  }
  if (!isObj(data)) {
    throw fail([
      {
        severity: 'error',
        code: 'invalid',
        message: 'a mapping file is a YAML mapping with `version: 1`, `sources:` and `resources:`',
        location: loc.positionOf([]) ?? { file, line: 1, column: 1 },
      },
    ]);
  }

  // ---------------------------------------------------------------- schema
  const validate = mappingValidator();
  if (!validate(data)) issues.push(...schemaIssues(validate.errors ?? [], loc));

  const positionOf = (path: DocPath, offset?: number): Location | undefined => loc.positionOf(path, offset);
  const issueAt = (code: KnownIssueCode, message: string, path: DocPath, offset?: number): Issue => ({
    severity: 'error',
    code,
    message,
    path: toPointer(path),
    location: positionOf(path, offset) ?? { file },
  });

  /** Interpolates one string scalar; problems become issues at the exact `${`. */
  const interp = (value: string, path: DocPath): { value: string; ok: boolean; interpolated: boolean } => {
    const r = interpolate(value, env);
    for (const p of r.problems) issues.push(issueAt(p.code, p.message, path, p.offset));
    return { value: r.value, ok: r.problems.length === 0, interpolated: r.interpolated };
  };

  // ---------------------------------------------------------------- target
  const target: TargetConfig = {};
  if (isObj(data.target)) {
    const t = data.target;
    for (const k of ['baseUrl', 'apiKey', 'emrId', 'tenantId'] as const) {
      const v = t[k];
      if (typeof v !== 'string') continue;
      const r = interp(v, ['target', k]);
      if (!r.ok) continue;
      target[k] = r.value;
      if (k === 'apiKey') registerSecret(r.value);
      if (k === 'apiKey' && !r.interpolated) {
        warnings.push({
          severity: 'warning',
          code: 'secret-in-file',
          message: 'the API key is written in the mapping file; use `apiKey: ${CARE_API_KEY}` and set the variable instead',
          path: '/target/apiKey',
          location: positionOf(['target', 'apiKey']),
        });
      }
      if (k === 'baseUrl' && !isHttpUrl(r.value)) {
        issues.push(issueAt('target-invalid', 'baseUrl must be an http:// or https:// URL', ['target', 'baseUrl']));
      }
    }
    if (isObj(t.updateMethod)) {
      const um: Partial<Record<ResourceType, UpdateMethodConfig>> = {};
      for (const [type, v] of Object.entries(t.updateMethod)) {
        const base: DocPath = ['target', 'updateMethod', type];
        let cfg: UpdateMethodConfig | undefined;
        if (typeof v === 'string') {
          const r = interp(v, base);
          if (r.ok) cfg = { method: r.value as UpdateMethodConfig['method'] };
        } else if (isObj(v) && typeof v.method === 'string') {
          const m = interp(v.method, [...base, 'method']);
          const p = typeof v.path === 'string' ? interp(v.path, [...base, 'path']) : undefined;
          if (m.ok && (!p || p.ok)) cfg = { method: m.value as UpdateMethodConfig['method'], ...(p ? { path: p.value } : {}) };
        }
        if (cfg) um[type as ResourceType] = cfg;
      }
      target.updateMethod = um;
    }
  }

  // ---------------------------------------------------------------- sources
  const sources: Record<string, SourceConfig> = {};
  if (isObj(data.sources)) {
    for (const [name, s] of Object.entries(data.sources)) {
      if (!isObj(s) || typeof s.path !== 'string') continue;
      const base: DocPath = ['sources', name];
      const r = interp(s.path, [...base, 'path']);
      if (!r.ok) continue;
      const path = resolve(dir, r.value);
      const ext = extname(r.value).toLowerCase();
      const format = (typeof s.format === 'string' ? s.format : formatFromExtension(ext)) as SourceFormat | undefined;
      if (!format) {
        issues.push(issueAt('source-format', `cannot tell the format of \`${r.value}\` from its extension; add \`format: csv\`, \`json\` or \`ndjson\``, [...base, 'path']));
        continue;
      }
      const src: SourceConfig = { name, path, format };
      if (typeof s.records === 'string') {
        if (format !== 'json') issues.push(issueAt('invalid', `\`records\` only applies to json sources (this source is ${format})`, [...base, 'records']));
        else src.records = s.records;
      }
      let csv: CsvOptions | undefined = isObj(s.csv) ? ({ ...s.csv } as CsvOptions) : undefined;
      if (csv && format !== 'csv') issues.push(issueAt('invalid', `\`csv\` options only apply to csv sources (this source is ${format})`, [...base, 'csv']));
      if (format === 'csv' && ext === '.tsv' && !csv?.delimiter) csv = { ...csv, delimiter: '\t' };
      if (csv && format === 'csv') src.csv = csv;
      sources[name] = src;
    }
  }

  // ---------------------------------------------------------------- lookups
  const lookups: Record<string, Record<string, string>> = {};
  if (isObj(data.lookups)) {
    const reserved = new Set<string>([...JSONATA_BUILTINS, ...LIBRARY_FUNCTIONS]);
    for (const [name, l] of Object.entries(data.lookups)) {
      const base: DocPath = ['lookups', name];
      if (reserved.has(name)) {
        issues.push({
          ...issueAt('lookup-name', `a lookup cannot be named \`${name}\`: \`$${name}\` is a function; choose another name (e.g. \`${name}Codes\`)`, base),
          location: loc.keyPositionOf(base) ?? { file },
        });
        continue;
      }
      if (!isObj(l)) continue;
      if (typeof l.path === 'string') {
        if (typeof l.key !== 'string' || typeof l.value !== 'string') continue;
        const r = interp(l.path, [...base, 'path']);
        if (!r.ok) continue;
        const ext = extname(r.value).toLowerCase();
        const format = typeof l.format === 'string' ? l.format : ext === '.csv' ? 'csv' : ext === '.json' ? 'json' : undefined;
        if (format !== 'csv' && format !== 'json') {
          issues.push(issueAt('lookup-file', `cannot tell the format of \`${r.value}\`; add \`format: csv\` or \`format: json\``, [...base, 'path']));
          continue;
        }
        const res = await readLookupFile(resolve(dir, r.value), r.value, format, l.key, l.value);
        for (const p of res.problems) issues.push(issueAt(p.code, `lookup \`${name}\`: ${p.message}`, [...base, p.at]));
        if (res.table) lookups[name] = res.table;
      } else {
        const table: Record<string, string> = Object.create(null) as Record<string, string>;
        for (const [code, label] of Object.entries(l)) if (typeof label === 'string') table[code] = label;
        // codes YAML reads as numbers/booleans: `01: x` is the number 1 → key "1", not "01"
        const node = loc.find(base)?.node;
        if (isMap(node)) {
          for (const pair of node.items) {
            const k = pair.key as Node | null;
            if (!isScalar(k) || typeof k.value === 'string') continue;
            const src = loc.sourceOf(k);
            if (src !== undefined && src !== String(k.value)) {
              issues.push({
                severity: 'error',
                code: 'lookup-code-not-text',
                message: `lookup \`${name}\`: YAML reads the code \`${src}\` as ${typeof k.value === 'number' ? `the number ${String(k.value)}` : `\`${String(k.value)}\``}; quote it: "${src}"`,
                path: toPointer(base),
                location: k.range ? loc.locationAt(k.range[0]) : { file },
              });
            }
          }
        }
        lookups[name] = table;
      }
    }
  }

  // ---------------------------------------------------------------- resources
  const resources: ResourceMapping[] = [];
  if (Array.isArray(data.resources)) {
    const firstIndex = new Map<string, number>();
    data.resources.forEach((r: unknown, index: number) => {
      if (!isObj(r)) return;
      const base: DocPath = ['resources', index];
      if (typeof r.name === 'string') {
        const prev = firstIndex.get(r.name);
        if (prev !== undefined) {
          const p = positionOf(['resources', prev, 'name']);
          issues.push(issueAt('duplicate-name', `a mapping named \`${r.name}\` already exists (resources[${prev}]${p?.line ? `, line ${p.line}` : ''}); names must be unique`, [...base, 'name']));
          return;
        }
        firstIndex.set(r.name, index);
      }
      const { name, type, from, map } = r;
      const keySrc = typeof r.key === 'string' ? r.key : typeof r.groupBy === 'string' ? r.groupBy : undefined;
      if (typeof name !== 'string' || typeof type !== 'string' || typeof from !== 'string' || typeof map !== 'string' || keySrc === undefined) return;
      const keyPath: DocPath = [...base, typeof r.key === 'string' ? 'key' : 'groupBy'];
      const match = typeof r.match === 'string' ? r.match : type === 'CareTeam' ? 'references' : 'identifier';
      const matchPath: DocPath = typeof r.match === 'string' ? [...base, 'match'] : [...base, 'type'];
      const at = (p: DocPath) => positionOf(p) ?? { file };
      const res: ResourceMapping = {
        name,
        type: type as ResourceType,
        from,
        key: keySrc,
        map,
        onMissing: r.onMissing === 'end' ? 'end' : 'ignore',
        match,
        index,
        locations: { key: at(keyPath), map: at([...base, 'map']), match: at(matchPath) },
        paths: { key: keyPath, map: [...base, 'map'], match: matchPath },
      };
      if (r.reconcile === 'auto' || r.reconcile === 'always' || r.reconcile === 'never') res.reconcile = r.reconcile;
      if (typeof r.groupBy === 'string') {
        res.groupBy = r.groupBy;
        res.locations.groupBy = at([...base, 'groupBy']);
        res.paths.groupBy = [...base, 'groupBy'];
      }
      resources.push(res);
    });
  }

  // ---------------------------------------------------------------- exports
  let exportsCfg: ExportsConfig | undefined;
  if (isObj(data.exports)) {
    exportsCfg = {};
    for (const [name, e] of Object.entries(data.exports)) {
      if (!isObj(e) || !isObj(e.columns)) continue;
      const colsPath: DocPath = ['exports', name, 'columns'];
      // column order from the YAML node (JS objects put integer-like keys first)
      const node = loc.find(colsPath)?.node;
      const order = isMap(node) ? node.items.map((p) => String(isScalar(p.key) ? p.key.value : p.key)) : Object.keys(e.columns);
      const columns: ExportColumn[] = [];
      for (const col of order) {
        const expr = e.columns[col];
        if (typeof expr !== 'string') continue;
        const path = [...colsPath, col];
        columns.push({ name: col, expr, location: positionOf(path) ?? { file }, path });
      }
      exportsCfg[name] = { name, columns };
    }
  }

  // ---------------------------------------------------------------- limits
  const limits = defaultLimits();
  if (isObj(data.limits) && typeof data.limits.expressionTimeoutMs === 'number') limits.expressionTimeoutMs = data.limits.expressionTimeoutMs;
  const envTimeout = env[EXPRESSION_TIMEOUT_ENV];
  if (envTimeout !== undefined && envTimeout.trim() !== '') {
    const t = envTimeout.trim();
    if (/^\d{1,9}$/.test(t)) {
      limits.expressionTimeoutMs = Number(t);
    } else {
      issues.push({
        severity: 'error',
        code: 'env-invalid',
        message: `${EXPRESSION_TIMEOUT_ENV} must be a whole number of milliseconds (0 = no time limit), got \`${t.length > 20 ? `${t.slice(0, 20)}…` : t}\``,
        location: { file },
      });
    }
  }

  if (issues.length) throw fail(issues);

  return {
    file: abs,
    dir,
    version: 1,
    target,
    sources,
    lookups,
    resources,
    ...(exportsCfg ? { exports: exportsCfg } : {}),
    limits,
    warnings,
    positionOf,
  };
}

function isHttpUrl(v: string): boolean {
  try {
    const u = new URL(v);
    return u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    return false;
  }
}

function formatFromExtension(ext: string): SourceFormat | undefined {
  switch (ext) {
    case '.csv':
    case '.tsv':
    case '.txt':
      return 'csv';
    case '.json':
      return 'json';
    case '.ndjson':
    case '.jsonl':
      return 'ndjson';
    default:
      return undefined;
  }
}


// -------------------------------------------------------------------------------------------- lookups

interface LookupProblem {
  code: KnownIssueCode;
  message: string;
  at: 'path' | 'key' | 'value';
}

async function readLookupFile(
  abs: string,
  shown: string,
  format: 'csv' | 'json',
  keyCol: string,
  valueCol: string,
): Promise<{ table?: Record<string, string>; problems: LookupProblem[] }> {
  const problems: LookupProblem[] = [];
  let text: string;
  try {
    const st = await stat(abs);
    if (st.size > LOOKUP_FILE_MAX_BYTES) {
      return { problems: [{ code: 'lookup-file', message: `\`${shown}\` is ${Math.round(st.size / 1048576)} MB; lookup files are limited to 50 MB`, at: 'path' }] };
    }
    text = await readFile(abs, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { problems: [{ code: 'lookup-file', message: `cannot read \`${shown}\` (${code === 'ENOENT' ? 'file not found' : code ?? 'error'}; resolved to ${abs})`, at: 'path' }] };
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);

  let rows: unknown[];
  try {
    if (format === 'csv') {
      rows = parseCsv(text, { columns: true, skip_empty_lines: true, bom: true }) as unknown[];
    } else {
      const parsed = JSON.parse(text) as unknown;
      if (!Array.isArray(parsed)) return { problems: [{ code: 'lookup-file', message: `\`${shown}\` must hold a JSON array of objects`, at: 'path' }] };
      rows = parsed;
    }
  } catch (err) {
    return { problems: [{ code: 'lookup-file', message: `\`${shown}\` is not valid ${format.toUpperCase()}: ${(err as Error).message.split('\n')[0]}`, at: 'path' }] };
  }
  if (rows.length === 0) return { problems: [{ code: 'lookup-file', message: `\`${shown}\` has no rows`, at: 'path' }] };
  const first = rows[0];
  if (!isObj(first) || !(keyCol in first)) problems.push({ code: 'lookup-column', message: `\`${shown}\` has no column \`${keyCol}\``, at: 'key' });
  if (!isObj(first) || !(valueCol in first)) problems.push({ code: 'lookup-column', message: `\`${shown}\` has no column \`${valueCol}\``, at: 'value' });
  if (problems.length) return { problems };

  const table: Record<string, string> = Object.create(null) as Record<string, string>;
  const rowLabel = (i: number) => (format === 'csv' ? `row ${i + 2}` : `element ${i + 1}`);
  for (let i = 0; i < rows.length && problems.length < 10; i++) {
    const row = rows[i];
    if (!isObj(row)) {
      problems.push({ code: 'lookup-file', message: `\`${shown}\` ${rowLabel(i)} is not an object`, at: 'path' });
      continue;
    }
    const k = row[keyCol];
    const v = row[valueCol];
    if (k === undefined || k === null || k === '' || typeof k === 'object') continue; // blank code: skipped
    if (v === undefined || v === null || typeof v === 'object') {
      problems.push({ code: 'lookup-file', message: `\`${shown}\` ${rowLabel(i)}: \`${valueCol}\` is missing`, at: 'value' });
      continue;
    }
    const code = String(k);
    const label = String(v);
    if (Object.prototype.hasOwnProperty.call(table, code) && table[code] !== label) {
      problems.push({ code: 'lookup-duplicate', message: `\`${shown}\` ${rowLabel(i)}: code \`${code}\` appears twice with different labels`, at: 'path' });
      continue;
    }
    table[code] = label;
  }
  return problems.length ? { problems } : { table, problems };
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
  for (const e of out) {
    const issue = schemaIssue(e, loc);
    const sig = `${issue.path}|${issue.message}`;
    if (seen.has(sig)) continue;
    seen.add(sig);
    issues.push(issue);
  }
  if (issues.length > MAX_SCHEMA_ISSUES) {
    const more = issues.length - MAX_SCHEMA_ISSUES;
    issues.length = MAX_SCHEMA_ISSUES;
    issues.push({ severity: 'error', code: 'invalid', message: `… and ${more} more schema problems`, location: { file: loc.file } });
  }
  return issues;
}

