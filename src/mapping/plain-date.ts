/**
 * `$date` without luxon (~10 µs of a dry run's ~40 per row) for formats of YYYY, MM/M, DD/D and literals: luxon's
 * own regex for the format; only a valid date is answered here, anything else goes on to luxon for its error.
 */
import { daysInMonth } from '../schemas/calendar-date.js';

/** A trimmed, non-empty value → `yyyy-MM-dd`, or undefined: not a valid date in the format (luxon decides). */
export type PlainDateParser = (value: string) => string | undefined;

const UNITS: Record<string, { unit: 'y' | 'M' | 'd'; digits: string }> = {
  YYYY: { unit: 'y', digits: '\\d{4}' },
  MM: { unit: 'M', digits: '\\d{2}' },
  M: { unit: 'M', digits: '\\d{1,2}' },
  DD: { unit: 'd', digits: '\\d{2}' },
  D: { unit: 'd', digits: '\\d{1,2}' },
};
const TOKEN_CHARS = new Set(['Y', 'M', 'D', 'H', 'm', 's']);
const parsers = new Map<string, PlainDateParser | null>();

/** The parser of a plain date format, or undefined (luxon: other tokens, `luxon:` formats, a unit missing or repeated). */
export function plainDateParser(format: string): PlainDateParser | undefined {
  let p = parsers.get(format);
  if (p === undefined) {
    p = buildParser(format);
    if (parsers.size < 1000) parsers.set(format, p);
  }
  return p ?? undefined;
}

function buildParser(format: string): PlainDateParser | null {
  if (format === '' || format.startsWith('luxon:') || format.includes("'")) return null;
  let source = '';
  const groupOf: Partial<Record<'y' | 'M' | 'd', number>> = {};
  let group = 0;
  for (let i = 0; i < format.length;) {
    const ch = format[i]!;
    let j = i + 1;
    if (TOKEN_CHARS.has(ch)) {
      while (format[j] === ch) j++;
      const u = UNITS[format.slice(i, j)];
      if (u === undefined || groupOf[u.unit] !== undefined) return null;
      groupOf[u.unit] = ++group;
      source += `(${u.digits})`;
    } else {
      // one literal run, as luxon quotes it: matched as written
      while (j < format.length && !TOKEN_CHARS.has(format[j]!)) j++;
      group++;
      source += `(${format.slice(i, j).replace(/[-[\]{}()*+?.,\\^$|#\s/]/g, '\\$&')})`;
    }
    i = j;
  }
  const { y, M, d } = groupOf;
  if (y === undefined || M === undefined || d === undefined) return null;
  const re = new RegExp(`^${source}$`, 'i');
  return (value) => {
    const m = re.exec(value);
    if (m === null) return undefined;
    const year = m[y]!;
    const month = parseInt(m[M]!, 10);
    const day = parseInt(m[d]!, 10);
    if (month < 1 || month > 12 || day < 1 || day > daysInMonth(parseInt(year, 10), month)) return undefined;
    return `${year}-${month < 10 ? '0' : ''}${month}-${day < 10 ? '0' : ''}${day}`;
  };
}
