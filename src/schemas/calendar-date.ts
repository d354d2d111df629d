/**
 * FHIR's regular expressions for `date` and `dateTime` check the shape only: `1985-02-30` and `2001-04-31` match
 * them, and a strict server answers 400. The schemas add `"format": "calendar-date"` (registered once, in
 * resource-schemas.ts) so a full date, alone or as the date part of a date-time, must be a day of the calendar.
 */
export const CALENDAR_DATE_FORMAT = 'calendar-date';

const FULL_DATE = /^(\d{4})-(\d{2})-(\d{2})(?:$|T)/;

/** Days in month 1–12 of the proleptic Gregorian calendar (what FHIR and ISO 8601 use). */
export function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/**
 * True unless `value` starts with a full date (`YYYY-MM-DD`, alone or before `T`) that is not a calendar day.
 * Partial dates (`1985`, `1985-02`) and anything of another shape (month 13, day 00 or 32) pass: the shape is the pattern's job, so one
 * wrong value gets one message.
 */
export function isCalendarDate(value: string): boolean {
  const m = FULL_DATE.exec(value);
  if (!m) return true;
  const [month, day] = [Number(m[2]), Number(m[3])];
  if (month < 1 || month > 12 || day < 1 || day > 31) return true; // month 13, day 00 or 32: the pattern's message
  return day <= daysInMonth(Number(m[1]), month);
}
