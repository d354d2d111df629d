/**
 * Output column names: `original` (the headers as built) or `snake` (`PHQ-9 (44261-6)` → `phq_9_44261_6`: SQL
 * identifiers that need no quoting). Names colliding after the change get `_2`, `_3`… in column order.
 * Design: docs/export.md ("Column names").
 */
import type { CompiledExport } from '../mapping/compile-mapping.js';

export type ColumnNameStyle = 'original' | 'snake';
export const COLUMN_NAME_STYLES: readonly ColumnNameStyle[] = ['original', 'snake'];
/** PostgreSQL's identifier limit: the shortest of the usual SQL engines. */
const MAX_SNAKE = 63;

/** Snake for Parquet (read by code), the headers as they are for CSV (read by people). */
export function defaultColumnNames(format: string): ColumnNameStyle {
  return format === 'parquet' ? 'snake' : 'original';
}

/** Lower-case ASCII letters, digits and `_`; never starting with a digit; never empty. */
export function snakeName(name: string): string {
  const s = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');
  const safe = s === '' ? 'column' : /^[0-9]/.test(s) ? `c_${s}` : s;
  return safe.length > MAX_SNAKE ? safe.slice(0, MAX_SNAKE).replace(/_+$/, '') : safe;
}

/** The output name of each column, unique: a later name equal to an earlier one gets `_2`, `_3`… */
export function outputNames(names: readonly string[], style: ColumnNameStyle): string[] {
  const taken = new Set<string>();
  return names.map((n) => {
    const base = style === 'snake' ? snakeName(n) : n;
    let out = base;
    for (let k = 2; taken.has(out); k++) out = `${base}_${k}`;
    taken.add(out);
    return out;
  });
}

/** A long-layout export whose rows carry the output names (the same export when no name changes). */
export function renameExport<T extends CompiledExport & { sources?: Map<string, S> }, S>(ex: T, style: ColumnNameStyle): T {
  const names = outputNames(ex.columns, style);
  if (names.every((n, i) => n === ex.columns[i])) return ex;
  const pairs = ex.columns.map((from, i) => [from, names[i]!] as const);
  const sources = ex.sources ? new Map([...ex.sources].map(([k, v]) => [names[ex.columns.indexOf(k)] ?? k, v])) : undefined;
  return {
    ...ex,
    columns: names,
    ...(sources ? { sources } : {}),
    evalRow: async (input, ctx) => {
      const row = await ex.evalRow(input, ctx);
      const out: Record<string, unknown> = {};
      for (const [from, to] of pairs) out[to] = row[from];
      return out;
    },
  };
}
