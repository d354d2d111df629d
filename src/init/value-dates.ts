/**
 * Dates told by the values alone, for a column whose name says nothing (GEBDAT, AUFN): every sampled value is a
 * real calendar date in one layout. `03.04.1980` is day-first or month-first: a day above 12 decides; when every
 * sampled value reads both ways the layout is left to the author (`ambiguous`), never guessed. Eight-digit
 * values are not read as YYYYMMDD here: without a name saying "date" they are as likely ids.
 */

type ValueDates = { format: string } | { ambiguous: [string, string] };

const ISO = /^(\d{4})-(\d{2})-(\d{2})$/;
/** Day and month (either order) then a 4-digit year, separated by `.`, `/` or `-`. */
const DAY_MONTH = /^(\d{1,2})([./-])(\d{1,2})\2(\d{4})$/;

function isDate(y: number, m: number, d: number): boolean {
  return m >= 1 && m <= 12 && d >= 1 && d <= new Date(Date.UTC(y, m, 0)).getUTCDate();
}

/** The `$date` formats (docs/mapping-functions.md tokens) of day-first and month-first readings. */
function dayMonthFormats(sep: string, padded: boolean): [string, string] {
  const [d, m] = padded ? ['DD', 'MM'] : ['D', 'M'];
  return [`${d}${sep}${m}${sep}YYYY`, `${m}${sep}${d}${sep}YYYY`];
}

export function valueDates(values: string[]): ValueDates | undefined {
  if (!values.length) return undefined;
  if (values.every((v) => ISO.test(v))) {
    const real = values.every((v) => {
      const [, y, m, d] = ISO.exec(v)!;
      return isDate(Number(y), Number(m), Number(d));
    });
    return real ? { format: 'YYYY-MM-DD' } : undefined;
  }
  const parts = values.map((v) => DAY_MONTH.exec(v));
  if (parts.some((p) => !p)) return undefined;
  const seps = new Set(parts.map((p) => p![2]));
  if (seps.size !== 1) return undefined;
  const padded = parts.every((p) => p![1]!.length === 2 && p![3]!.length === 2);
  const [dayFirst, monthFirst] = dayMonthFormats(parts[0]![2]!, padded);
  const asDayFirst = parts.every((p) => isDate(Number(p![4]), Number(p![3]), Number(p![1])));
  const asMonthFirst = parts.every((p) => isDate(Number(p![4]), Number(p![1]), Number(p![3])));
  if (asDayFirst && asMonthFirst) return { ambiguous: [dayFirst, monthFirst] };
  if (asDayFirst) return { format: dayFirst };
  if (asMonthFirst) return { format: monthFirst };
  return undefined;
}
