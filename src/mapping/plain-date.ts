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
  const fixed = fixedWidthParser(format);
  if (fixed) return fixed;
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

/**
 * The same parser for a format of YYYY, MM, DD and ASCII literals only (`MM/DD/YYYY`, `YYYY-MM-DD`): every part
 * has one width, so the value is read by position — digits where the tokens are, each literal as the regex's `i`
 * flag compares it (ASCII letters in either case) — without a regex match and its captures.
 */
function fixedWidthParser(format: string): PlainDateParser | null {
  const digits: number[] = [];
  const literals: [number, number][] = []; // position, char code (ASCII letters in lower case)
  let y = -1;
  let M = -1;
  let d = -1;
  for (let i = 0; i < format.length;) {
    const ch = format[i]!;
    if (TOKEN_CHARS.has(ch)) {
      let j = i + 1;
      while (format[j] === ch) j++;
      const token = format.slice(i, j);
      if (token === 'YYYY') y = i;
      else if (token === 'MM') M = i;
      else if (token === 'DD') d = i;
      else return null; // M, D: one or two digits
      for (let k = i; k < j; k++) digits.push(k);
      i = j;
    } else {
      const c = format.charCodeAt(i);
      if (c > 127) return null;
      literals.push([i, lowerAscii(c)]);
      i++;
    }
  }
  const width = format.length;
  return (value) => {
    if (value.length !== width) return undefined;
    for (let k = 0; k < digits.length; k++) {
      const c = value.charCodeAt(digits[k]!);
      if (c < 48 || c > 57) return undefined;
    }
    for (let k = 0; k < literals.length; k++) if (lowerAscii(value.charCodeAt(literals[k]![0])) !== literals[k]![1]) return undefined;
    const year = value.slice(y, y + 4);
    const month = (value.charCodeAt(M) - 48) * 10 + value.charCodeAt(M + 1) - 48;
    const day = (value.charCodeAt(d) - 48) * 10 + value.charCodeAt(d + 1) - 48;
    if (month < 1 || month > 12 || day < 1 || day > daysInMonth(Number(year), month)) return undefined;
    return `${year}-${value.slice(M, M + 2)}-${value.slice(d, d + 2)}`;
  };
}

function lowerAscii(c: number): number {
  return c >= 65 && c <= 90 ? c + 32 : c;
}
