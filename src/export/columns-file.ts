/**
 * `--columns file.yaml`: the columns of one export in a file of their own (same shape as one `exports:` entry),
 * compiled by `compileMapping`; the export is named after the file.
 * Design: docs/design/export.md.
 */
import { basename, dirname, extname, resolve } from 'node:path';
import { isMap, isScalar } from 'yaml';
import { CareEtlError, ExitCode, issue, type Issue, type Location } from '../core/issues.js';
import { isObj } from '../core/is-object.js';
import { compileMapping, type CompiledExport } from '../mapping/compile-mapping.js';
import type { ExportColumn, LoadedMapping } from '../mapping/types.js';
import { readYamlConfig } from '../mapping/yaml-config.js';

/** `file:line:column` of an expression (the data dictionary's reference to it). */
function locationText(loc: Location | undefined): string | undefined {
  if (!loc?.file) return undefined;
  return `${basename(loc.file)}${loc.line !== undefined ? `:${loc.line}${loc.column !== undefined ? `:${loc.column}` : ''}` : ''}`;
}

/** Column name → its expression and position (for `--dictionary`). */
export function columnSourcesOf(columns: readonly ExportColumn[]): Map<string, { expr: string; at?: string }> {
  return new Map(columns.map((c) => [c.name, { expr: c.expr, at: locationText(c.location) }]));
}

/** The compiled columns, plus where each comes from (`sources`, for the data dictionary). */
export async function loadColumnsFile(
  file: string,
  mapping?: LoadedMapping,
): Promise<CompiledExport & { sources: Map<string, { expr: string; at?: string }> }> {
  const abs = resolve(file);
  const name = basename(abs, extname(abs));
  const yaml = await readYamlConfig(file, { what: 'columns file' });
  const { locator: loc, data } = yaml;
  const issues: Issue[] = yaml.errors;
  const fail = () =>
    new CareEtlError(`columns file ${file}: ${issues.length} problem${issues.length === 1 ? '' : 's'}`, {
      issues,
      exitCode: ExitCode.config,
      hint: 'A columns file holds `columns:` — header name → JSONata over one Observation, e.g. `mrn: $sourceKey(subject.reference)`.',
    });
  if (issues.length) throw fail();

  const node = loc.find(['columns'])?.node;
  const columns: ExportColumn[] = [];
  if (!isMap(node) || !isObj(data) || !isObj(data.columns)) {
    issues.push(
      issue.invalid('expected a mapping `columns:` (header name → JSONata expression)', { location: loc.positionOf([]) ?? { file, line: 1, column: 1 } }),
    );
  } else {
    for (const pair of node.items) {
      const col = String(isScalar(pair.key) ? pair.key.value : pair.key);
      const path = ['columns', col];
      const expr = data.columns[col];
      if (typeof expr !== 'string' || expr.trim() === '') {
        issues.push(
          issue.invalid(`column \`${col}\` must be a JSONata expression (text)`, { path: `/columns/${col}`, location: loc.positionOf(path) ?? { file } }),
        );
        continue;
      }
      columns.push({ name: col, expr, location: loc.positionOf(path) ?? { file }, path });
    }
    if (node.items.length === 0) issues.push(issue.invalid('`columns:` is empty', { location: loc.positionOf(['columns']) ?? { file } }));
  }
  for (const k of Object.keys(isObj(data) ? data : {})) {
    if (k !== 'columns')
      issues.push(issue.invalid(`unknown property \`${k}\`; a columns file holds only \`columns:\``, { location: loc.keyPositionOf([k]) ?? { file } }));
  }
  if (issues.length) throw fail();

  const synthetic: LoadedMapping = {
    file: abs,
    dir: dirname(abs),
    version: 1,
    target: {},
    sources: {},
    lookups: mapping?.lookups ?? {},
    limits: mapping?.limits,
    resources: [],
    exports: { [name]: { name, columns } },
    warnings: [],
    positionOf: (path, offset) => loc.positionOf(path, offset),
  };
  return Object.assign(compileMapping(synthetic).exports.get(name)!, { sources: columnSourcesOf(columns) });
}
