import { DateTime } from 'luxon';
import { describe, expect, it } from 'vitest';
import { translateDateFormat } from '../../src/mapping/functions.js';
import { plainDateParser } from '../../src/mapping/plain-date.js';

/** The oracle: what luxon (the `$date` path for every other format) makes of a trimmed value. */
function luxonDate(value: string, format: string): string | undefined {
  const f = translateDateFormat(format);
  if (typeof f === 'string') throw new Error(f);
  const dt = DateTime.fromFormat(value, f.luxon, { zone: 'UTC', locale: 'en-US' });
  return dt.isValid ? dt.toFormat('yyyy-MM-dd') : undefined;
}

const PLAIN = ['MM/DD/YYYY', 'M/D/YYYY', 'YYYY-MM-DD', 'DD.MM.YYYY', 'YYYYMMDD', 'MDYYYY', 'D MM YYYY', 'YYYY-M-D', 'DD-MM-YYYY T', 'x(D)[M]+YYYY'];

/** Deterministic values around a format: valid dates, leap days, out-of-range parts, wrong widths, other literals. */
function values(format: string): string[] {
  const out = ['02/29/2000', '02/29/1900', '02/29/2024', '02/30/2024', '00/10/2000', '13/01/2000', '1/2/2020', '0000-01-01', '0005-02-28', '2020-1-1'];
  out.push('31.04.2021', '31.05.2021', '20200230', '20201231', '1122020', '12122020', '5 03 1999', '31-12-2020 t', '31-12-2020 T', 'X(1)[2]+2020');
  let r = 12345;
  const next = (n: number) => ((r = (r * 1103515245 + 12345) >>> 0), (r >>> 8) % n);
  const num = (max: number, width: number) => String(next(max)).padStart(next(8) ? width : 1, '0');
  for (let i = 0; i < 600; i++) {
    let v = format
      .replace('YYYY', () => num(next(10) ? 10000 : 100000, 4))
      .replace(/MM|M/, (t) => num(next(10) ? 13 : 20, t.length))
      .replace(/DD|D/, (t) => num(next(10) ? 32 : 100, t.length));
    if (next(20) === 0) v = v.replace(/[^\d]/, '/');
    out.push(next(10) ? v : v.toLowerCase());
  }
  return out;
}

describe('plain $date formats without luxon', () => {
  it('answers exactly what luxon answers for every value of every plain format (undefined: luxon words the error)', () => {
    let valid = 0;
    for (const format of PLAIN) {
      const parse = plainDateParser(format);
      expect(parse, format).toBeDefined();
      for (const v of values(format)) {
        const expected = luxonDate(v, format);
        if (expected !== undefined) valid++;
        expect(parse!(v), `${format} ${JSON.stringify(v)}`).toBe(expected);
      }
    }
    expect(valid).toBeGreaterThan(2000); // the values exercise the success path, not only the fallback
  });

  it('leaves every other format to luxon', () => {
    for (const f of ['YY-MM-DD', 'MM/YYYY', 'MM/DD', 'MM/DD/YYYY HH:mm', 'luxon:MM/dd/yyyy', 'YYYY-MM-DD-DD', "DD 'of' MM YYYY", 'YYYYY-MM-DD', '']) {
      expect(plainDateParser(f), f).toBeUndefined();
    }
  });
});
