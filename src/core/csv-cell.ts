/**
 * CSV cells and options shared by every CSV care-etl writes (the export, the rejects summary): what a strict
 * reader and a spreadsheet both read back as written (see src/export/row-sink.ts for the whole contract).
 */

/** CRLF records; any control character (bare LF or CR, tab, NUL…) forces quotes: strict readers then keep the record whole. */
export const STRICT_CSV = {
  record_delimiter: 'windows',
  quoted_match: /[\u0000-\u001f\u007f]/,
} as const;

const isScalar = (v: unknown): v is string | number | boolean => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';

/**
 * One CSV cell: text stays text, finite numbers stay numbers (csv-stringify exempts them from the `-`
 * formula rule), booleans are `true`/`false`, arrays of scalars are joined with `|`, other arrays and
 * objects are written as JSON; nothing (undefined, null, NaN) is an empty cell.
 */
export function csvCell(v: unknown): string | number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return spreadsheetSafe(v);
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined;
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (Array.isArray(v)) {
    if (v.every((x) => isScalar(x) || x === null || x === undefined)) {
      const parts = v.filter((x) => x !== null && x !== undefined && !(typeof x === 'number' && !Number.isFinite(x)));
      if (parts.length === 1 && typeof parts[0] === 'number') return parts[0];
      return parts.length ? spreadsheetSafe(parts.map((x) => (typeof x === 'boolean' ? (x ? 'true' : 'false') : String(x))).join('|')) : undefined;
    }
    return spreadsheetSafe(JSON.stringify(v));
  }
  if (typeof v === 'object') return spreadsheetSafe(JSON.stringify(v));
  return String(v);
}

const UNHOLDABLE = '\\u0000|[\\uD800-\\uDBFF](?![\\uDC00-\\uDFFF])|(?<![\\uD800-\\uDBFF])[\\uDC00-\\uDFFF]';
const HAS_UNHOLDABLE = new RegExp(UNHOLDABLE);
const ALL_UNHOLDABLE = new RegExp(UNHOLDABLE, 'g');

/** NUL and lone surrogates → U+FFFD: no reader keeps the first, UTF-8 cannot encode the second. */
function spreadsheetSafe(s: string): string {
  return HAS_UNHOLDABLE.test(s) ? s.replace(ALL_UNHOLDABLE, '\uFFFD') : s;
}
