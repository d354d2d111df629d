/**
 * `--columns file.yaml`: the columns of one export in a file of their own, same shape as one entry of the
 * mapping's `exports:` section:
 *
 *   columns:
 *     id: id
 *     mrn: $sourceKey(subject.reference)
 *
 * Compiled by `compileMapping` (same functions, same file:line:col errors); the mapping's lookup tables
 * are available as `$<name>`. The export is named after the file (`observations.yaml` → `observations`).
 */
import { readFile } from 'node:fs/promises';
import { basename, dirname, extname, resolve } from 'node:path';
import { LineCounter, isMap, isScalar, parseDocument } from 'yaml';
import { CareEtlError, ExitCode, type Issue } from '../core/issues.js';
import { compileMapping, type CompiledExport } from '../mapping/compile-mapping.js';
import type { Location } from '../core/issues.js';
import type { ExportColumn, LoadedMapping } from '../mapping/types.js';
import { YamlLocator } from '../mapping/yaml-positions.js';

/** `file:line:column` of an expression (the data dictionary's reference to it). */
export function locationText(loc: Location | undefined): string | undefined {
  if (!loc?.file) return undefined;
  return `${basename(loc.file)}${loc.line !== undefined ? `:${loc.line}${loc.column !== undefined ? `:${loc.column}` : ''}` : ''}`;
}

/** Column name → its expression and position (for `--dictionary`). */
export function columnSourcesOf(columns: readonly ExportColumn[]): Map<string, { expr: string; at?: string }> {
  return new Map(columns.map((c) => [c.name, { expr: c.expr, at: locationText(c.location) }]));
}

/** The compiled columns, plus where each comes from (`sources`, for the data dictionary). */
export async function loadColumnsFile(file: string, mapping?: LoadedMapping): Promise<CompiledExport & { sources: Map<string, { expr: string; at?: string }> }> {
  const abs = resolve(file);
  const name = basename(abs, extname(abs));
  let text: string;
  try {
    text = await readFile(abs, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new CareEtlError(`cannot read columns file ${file}${code ? ` (${code})` : ''}`, { exitCode: ExitCode.config, cause: err });
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: true, uniqueKeys: true });
  const loc = new YamlLocator(file, text, doc, lineCounter);
  const issues: Issue[] = doc.errors.map((e) => ({
    severity: 'error',
    code: 'yaml',
    message: e.message.split('\n')[0]!,
    location: e.linePos ? { file, line: e.linePos[0].line, column: e.linePos[0].col } : { file },
  }));
  const fail = () =>
    new CareEtlError(`columns file ${file}: ${issues.length} problem${issues.length === 1 ? '' : 's'}`, {
      issues,
      exitCode: ExitCode.config,
      hint: 'A columns file holds `columns:` — header name → JSONata over one Observation, e.g. `mrn: $sourceKey(subject.reference)`.',
    });
  if (issues.length) throw fail();

  const node = loc.find(['columns'])?.node;
  const data = doc.toJS() as { columns?: unknown } | null;
  const columns: ExportColumn[] = [];
  if (!isMap(node) || !data || typeof data.columns !== 'object' || data.columns === null) {
    issues.push({ severity: 'error', code: 'invalid', message: 'expected a mapping `columns:` (header name → JSONata expression)', location: loc.positionOf([]) ?? { file, line: 1, column: 1 } });
  } else {
    for (const pair of node.items) {
      const col = String(isScalar(pair.key) ? pair.key.value : pair.key);
      const path = ['columns', col];
      const expr = (data.columns as Record<string, unknown>)[col];
      if (typeof expr !== 'string' || expr.trim() === '') {
        issues.push({ severity: 'error', code: 'invalid', path: `/columns/${col}`, message: `column \`${col}\` must be a JSONata expression (text)`, location: loc.positionOf(path) ?? { file } });
        continue;
      }
      columns.push({ name: col, expr, location: loc.positionOf(path) ?? { file }, path });
    }
    if (node.items.length === 0) issues.push({ severity: 'error', code: 'invalid', message: '`columns:` is empty', location: loc.positionOf(['columns']) ?? { file } });
  }
  for (const k of Object.keys(data ?? {})) {
    if (k !== 'columns') issues.push({ severity: 'error', code: 'invalid', message: `unknown property \`${k}\`; a columns file holds only \`columns:\``, location: loc.keyPositionOf([k]) ?? { file } });
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
