import { describe, expect, it } from 'vitest';
import { closest } from '../../src/mapping/closest.js';

describe('closest', () => {
  it('suggests a name differing only in case (a typed `$splitlist`, `$Date`, `type: patient`)', () => {
    expect(closest('splitlist', ['split', 'splitList', 'date'])).toBe('splitList');
    expect(closest('Date', ['date', 'dateTime'])).toBe('date');
    expect(closest('patient', ['Patient', 'Practitioner', 'CareTeam'])).toBe('Patient');
  });

  it('suggests nothing for a name that is a candidate, and the nearest by edits otherwise', () => {
    expect(closest('date', ['Date', 'date'])).toBeUndefined();
    expect(closest('dat', ['date', 'name'])).toBe('date');
    expect(closest('gender', ['name', 'date'])).toBeUndefined();
  });
});
