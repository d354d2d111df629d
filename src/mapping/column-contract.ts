/**
 * The column contract: every field a resource mapping's row expressions read (row-fields.ts) must be a column of
 * its source — the CSV header, exactly; for JSON / NDJSON a field of the first records (source-columns.ts) — so a
 * misspelled column stops `validate`, `run` and `plan` before anything is written, instead of loading every row
 * without it. Fields a JSON record may lack are declared in the source's `optional:` list or tested with
 * `$exists(FIELD)` in the expression.
 */
import { jsonataExpression } from '../core/jsonata-package.js';
import { CareEtlError, ExitCode, issue, type Issue, type Location } from '../core/issues.js';
import { sourceColumns, type SourceColumns } from '../sources/source-columns.js';
import type { SourceConfig } from '../sources/types.js';
import { closestColumn } from './closest.js';
import { rowFieldReads } from './row-fields.js';
import { toPointer } from './yaml-positions.js';
import type { LoadedMapping, ResourceMapping, YamlPath } from './types.js';

/** One expression evaluated against the rows of a resource mapping's source. */
export interface RowExpression {
  expr: string;
  yamlPath: YamlPath;
  location: Location;
  /** The mapping key it is written under: `key`, `groupBy`, `map`, … */
  label: string;
}

export const COLUMN_CONTRACT_HINT =
  "Every field an expression reads from a row must be a column of its source (CSV: the header, case-sensitive; JSON/NDJSON: a field of the first 1,000 records). Fix the name, or for a field some JSON records lack, list it under the source's `optional:` or test it with `$exists(FIELD)`. See docs/column-contract.md.";

/** The expressions of `def` that read its source's rows (`match` reads the mapped resource; `groupBy`'s `map` reads the group, whose steps still reach the rows' fields). */
export function rowExpressionsOf(def: ResourceMapping): RowExpression[] {
  const list: RowExpression[] = [
    { expr: def.key, yamlPath: def.paths.key, location: def.locations.key, label: def.paths.key.at(-1) === 'groupBy' ? 'groupBy' : 'key' },
  ];
  if (def.groupBy !== undefined && def.paths.groupBy && def.locations.groupBy && def.paths.key.at(-1) !== 'groupBy') {
    list.push({ expr: def.groupBy, yamlPath: def.paths.groupBy, location: def.locations.groupBy, label: 'groupBy' });
  }
  if (def.where !== undefined && def.paths.where && def.locations.where) {
    list.push({ expr: def.where, yamlPath: def.paths.where, location: def.locations.where, label: 'where' });
  }
  list.push({ expr: def.map, yamlPath: def.paths.map, location: def.locations.map, label: 'map' });
  return list;
}

/**
 * The contract's issues (`column-missing`), one per missing field read, for every resource mapping of `m` (or
 * `only` of them). A source whose columns cannot be read is skipped: the source check reports it.
 */
export async function columnContractIssues(
  m: LoadedMapping,
  only?: readonly string[],
  /** How a source's columns are read (default `sourceColumns`; the studio passes its cache of them). */
  columnsOfSource: (source: SourceConfig) => Promise<SourceColumns | undefined> = sourceColumns,
): Promise<Issue[]> {
  const issues: Issue[] = [];
  const columnsOf = new Map<string, Promise<SourceColumns | undefined>>();
  for (const def of m.resources) {
    if (only && !only.includes(def.name)) continue;
    const source = m.sources[def.from];
    if (!source) continue;
    if (!columnsOf.has(def.from))
      columnsOf.set(
        def.from,
        columnsOfSource(source).catch(() => undefined),
      );
    const cols = await columnsOf.get(def.from)!;
    if (!cols) continue;
    issues.push(...expressionIssues(m, def, source, cols, rowExpressionsOf(def)));
  }
  return issues;
}

/** Throws one `CareEtlError` (exit 2) with every missing field of `m`'s mappings; nothing when the contract holds. */
export async function checkColumnContract(m: LoadedMapping, only?: readonly string[]): Promise<void> {
  const issues = await columnContractIssues(m, only);
  if (issues.length === 0) return;
  throw new CareEtlError(`mapping file ${m.file}: ${issues.length} field(s) read from rows are not columns of their source`, {
    issues,
    exitCode: ExitCode.config,
    hint: COLUMN_CONTRACT_HINT,
  });
}

function expressionIssues(m: LoadedMapping, def: ResourceMapping, source: SourceConfig, cols: SourceColumns, exprs: RowExpression[]): Issue[] {
  const issues: Issue[] = [];
  const have = new Set(cols.columns);
  const optional = new Set(source.optional ?? []);
  const reported = new Set<string>();
  const otherDelimiter = headerDelimiter(source, cols);
  for (const e of exprs) {
    let ast: object;
    try {
      ast = jsonataExpression(e.expr).ast();
    } catch {
      continue; // a syntax error: the compiler reports it
    }
    const { reads, existsGuarded } = rowFieldReads(e.expr, ast);
    for (const read of reads) {
      if (have.has(read.name) || optional.has(read.name) || (!cols.exact && existsGuarded.has(read.name))) continue;
      const location = m.positionOf(e.yamlPath, read.offset) ?? e.location;
      const id = `${read.name}@${location.line}:${location.column}`;
      if (reported.has(id)) continue; // `key` defaulting to `groupBy`: one expression, reached twice
      reported.add(id);
      const message = otherDelimiter
        ? delimiterMessage(def, source, cols, e.label, read.name, otherDelimiter)
        : missingMessage(def, source, cols, e.label, read.name);
      issues.push(issue.error('column-missing', message, { path: toPointer(e.yamlPath), location }));
      if (otherDelimiter) return issues; // one cause for every field read: said once
    }
  }
  return issues;
}

function missingMessage(def: ResourceMapping, source: SourceConfig, cols: SourceColumns, label: string, field: string): string {
  const near = closestColumn(field, cols.columns);
  const file = source.path;
  const where = cols.exact
    ? `source \`${source.name}\` (${file}) has no column \`${field}\``
    : `no field \`${field}\` in the first ${cols.sampled ?? 0} record(s) of source \`${source.name}\` (${file})`;
  const optional = cols.exact ? '' : `, or list \`${field}\` under \`sources.${source.name}.optional\` if records may lack it`;
  const fix = near
    ? `did you mean \`${near}\`? Fix: write \`${near}\`${cols.exact ? ' (header names are case-sensitive)' : ''}${optional}`
    : `${cols.exact ? 'its columns are' : 'fields seen:'} ${preview(cols.columns)}; fix: use one of them${optional}`;
  return `mapping \`${def.name}\` \`${label}\` reads \`${field}\`, but ${where}; ${fix}`;
}

/** The delimiter a one-column CSV header is split by, when it is not the source's own (`;` read with the default `,`). */
function headerDelimiter(source: SourceConfig, cols: SourceColumns): string | undefined {
  if (!cols.exact || cols.columns.length !== 1) return undefined;
  const own = source.csv?.delimiter ?? (source.path.toLowerCase().endsWith('.tsv') ? '\t' : ',');
  return [';', '\t', '|', ','].find((d) => d !== own && cols.columns[0]!.includes(d));
}

function delimiterMessage(def: ResourceMapping, source: SourceConfig, cols: SourceColumns, label: string, field: string, delimiter: string): string {
  const shown = JSON.stringify(delimiter);
  return (
    `mapping \`${def.name}\` \`${label}\` reads \`${field}\`, but source \`${source.name}\` (${source.path}) has a single column, ` +
    `\`${cols.columns[0]!.slice(0, 80)}${cols.columns[0]!.length > 80 ? '…' : ''}\`: its header is split by ${shown}, not by the source's delimiter; ` +
    `fix: set \`csv: { delimiter: ${shown} }\` under \`sources.${source.name}\``
  );
}

function preview(columns: string[]): string {
  const shown = columns.slice(0, 12).map((c) => `\`${c}\``);
  return shown.join(', ') + (columns.length > 12 ? `, … (${columns.length} in all)` : '');
}
