import { describe, expect, test } from 'vitest';
import { daysInMonth, isCalendarDate } from '../../src/schemas/calendar-date.js';
import { getResourceValidator } from '../../src/schemas/resource-schemas.js';

describe('isCalendarDate', () => {
  test('leap years of the Gregorian calendar', () => {
    expect([2000, 2024, 1996, 1600].map((y) => daysInMonth(y, 2))).toEqual([29, 29, 29, 29]);
    expect([1900, 2100, 2023, 1985].map((y) => daysInMonth(y, 2))).toEqual([28, 28, 28, 28]);
    expect(isCalendarDate('2000-02-29')).toBe(true);
    expect(isCalendarDate('2024-02-29')).toBe(true);
    expect(isCalendarDate('1900-02-29')).toBe(false);
    expect(isCalendarDate('2023-02-29')).toBe(false);
  });

  test('days past the end of their month', () => {
    for (const bad of ['1985-02-30', '2001-04-31', '2001-06-31', '2001-09-31', '2001-11-31', '1985-02-31']) expect(isCalendarDate(bad), bad).toBe(false);
    for (const ok of ['1985-01-31', '2001-04-30', '2001-12-31', '1985-02-28', '0001-01-01']) expect(isCalendarDate(ok), ok).toBe(true);
  });

  test('partial dates and other shapes are left to the pattern', () => {
    for (const v of ['1985', '1985-02', '1985-13-01', '1985-02-00', '1985-01-32', '85-02-30', '', 'not a date']) expect(isCalendarDate(v), v).toBe(true);
  });

  test('the date part of a date-time, whatever its zone', () => {
    expect(isCalendarDate('2001-04-31T10:00:00Z')).toBe(false);
    expect(isCalendarDate('1985-02-30T23:59:59.5+14:00')).toBe(false);
    expect(isCalendarDate('2000-02-29T00:00:00-05:00')).toBe(true);
    expect(isCalendarDate('2024-02-29T10:00:00.123+02:00')).toBe(true);
  });
});

describe('resource schemas: full dates are calendar dates', () => {
  const patient = getResourceValidator('Patient');
  const practitioner = getResourceValidator('Practitioner');
  const careTeam = getResourceValidator('CareTeam');
  const observation = getResourceValidator('Observation');

  test('an impossible birthDate is one issue naming the field, never the value', () => {
    for (const bad of ['1985-02-30', '2001-04-31', '1900-02-29']) {
      const issues = patient({ resourceType: 'Patient', birthDate: bad });
      expect(issues, bad).toEqual([
        expect.objectContaining({ path: '/birthDate', code: 'format', message: expect.stringContaining('must be a calendar date') }),
      ]);
      expect(issues[0]!.message).not.toContain(bad);
    }
    expect(practitioner({ resourceType: 'Practitioner', birthDate: '2001-04-31' })).toEqual([expect.objectContaining({ path: '/birthDate', code: 'format' })]);
  });

  test('month 13 and day 00 stay one pattern issue; partial dates and 2000-02-29 stay valid', () => {
    for (const bad of ['1985-13-01', '1985-02-00'])
      expect(patient({ resourceType: 'Patient', birthDate: bad }), bad).toEqual([expect.objectContaining({ path: '/birthDate', code: 'pattern' })]);
    for (const ok of ['1985', '1985-02', '2000-02-29']) expect(patient({ resourceType: 'Patient', birthDate: ok }), ok).toEqual([]);
  });

  test('dateTime fields: the date part is checked, the zone does not matter', () => {
    const period = (start: string) => careTeam({ resourceType: 'CareTeam', period: { start } });
    expect(period('2001-04-31T10:00:00Z')).toEqual([expect.objectContaining({ path: '/period/start', code: 'format' })]);
    expect(period('2001-04-31')).toEqual([expect.objectContaining({ path: '/period/start', code: 'format' })]);
    expect(period('2000-02-29T10:00:00+02:00')).toEqual([]);
    const participant = careTeam({
      resourceType: 'CareTeam',
      participant: [{ member: { reference: 'Practitioner/a' }, period: { start: '2024-01-01', end: '1900-02-29T00:00:00Z' } }],
    });
    expect(participant).toEqual([expect.objectContaining({ path: '/participant/0/period/end', code: 'format' })]);
    expect(observation({ resourceType: 'Observation', effectiveDateTime: '2023-02-29T08:00:00-05:00' })).toEqual([
      expect.objectContaining({ path: '/effectiveDateTime', code: 'format' }),
    ]);
  });
});
