import { describe, expect, it } from 'vitest';
import { foreignCode, type Issue } from '../../src/core/issues.js';
import { handOverIssue } from '../../src/pipeline/hand-over.js';

/** Issue 22, item 6: `handOverIssue` is the one wording of an issue for hand-over files and terminals. */

const at = { file: '/clinic/mapping.yaml', line: 12, column: 5 };
const jsonata = (message: string): Issue => ({ severity: 'error', code: 'jsonata', message, path: '/resources/0/map', location: at });

describe('handOverIssue', () => {
  it("a mapping's $error / $assert text: named by its position, never quoted", () => {
    const e = handOverIssue(jsonata('mapping `patient` map: bad Moreau [D3137]'), { rejectsFile: '/clinic/.care-etl/rejects.ndjson' });
    expect(e.message).toBe("the mapping's $error at mapping.yaml:12:5 (message in rejects.ndjson)");
    expect(e.detail).toBe('mapping `patient` map, [D3137], at mapping.yaml:12:5');
    expect(e.location).toEqual(at);
    expect(handOverIssue(e, { rejectsFile: '/clinic/.care-etl/rejects.ndjson' })).toEqual(e);
    const a = handOverIssue(jsonata('mapping `patient` map: no: Tomas [D3141]'));
    expect(a.message).toBe("the mapping's $assert at mapping.yaml:12:5 (message in the rejects file)");
    // without the owner prefix, nothing of the text is kept either
    expect(handOverIssue(jsonata('bad: Moreau [D3137]')).message).not.toContain('Moreau');
    expect(handOverIssue(jsonata('bad: Moreau [D3137]')).message).not.toContain('bad');
  });

  it('JSONata messages that quote a value: the template without it, objects included', () => {
    expect(handOverIssue(jsonata('mapping `patient` map: Unable to cast value to a number: {"a":"Moreau"} [D3030]')).message).toBe(
      'unable to cast a value to a number',
    );
    expect(handOverIssue(jsonata('mapping `patient` map: Malformed URL passed to $decodeUrl(): "%Moreau" [D3140]')).message).not.toContain('Moreau');
    // operators and function names only: kept as they are
    const t = jsonata('mapping `patient` map: The left side of the "+" operator must evaluate to a number [T2001]');
    expect(handOverIssue(t)).toEqual({
      ...t,
      message: 'The left side of the "+" operator must evaluate to a number',
      detail: 'mapping `patient` map, [T2001], at mapping.yaml:12:5',
    });
  });

  it('an unexpected error inside an expression: value-free', () => {
    const e = handOverIssue({ severity: 'error', code: 'eval-failed', message: 'mapping `patient` map: cannot parse "Moreau"', location: at });
    expect(e.message).toBe('the expression at mapping.yaml:12:5 failed (message in the rejects file)');
  });

  it('a property named by a cell (`{ LAST: … }`): neither the message nor the path names it', () => {
    const e = handOverIssue({
      severity: 'error',
      code: foreignCode('additionalProperties'),
      message: 'unknown property "Moreau" is not allowed',
      path: '/name/0/Moreau',
    });
    expect(e.path).toBe('/name/0');
    expect(JSON.stringify(e)).not.toContain('Moreau');
    expect(handOverIssue(e)).toEqual(e); // idempotent: the terminal may word an already worded issue
  });

  it('a resourceType taken from a cell is not echoed; messages without values pass unchanged', () => {
    const rt = handOverIssue({ severity: 'error', code: 'invalid', path: '/resourceType', message: 'Expected resourceType `Patient`, got `Moreau`' });
    expect(rt.message).toBe('Expected resourceType `Patient`, got another value');
    const none: Issue = { severity: 'error', code: 'invalid', path: '/resourceType', message: 'Expected resourceType `Patient`, got `undefined`' };
    expect(handOverIssue(none)).toEqual({ ...none, detail: 'resource field /resourceType' });
    const miss: Issue = { severity: 'error', code: 'lookup-miss', message: 'the code (1 character) is not in lookup table `gender`', location: at };
    expect(handOverIssue(miss)).toEqual({ ...miss, message: 'the code (1 character) is not in the list `gender`', detail: 'at mapping.yaml:12:5' });
  });

  it("issue 26: the export's column first, in plain words; the mapping's jargon in `detail`; applying it twice changes nothing", () => {
    const date: Issue = {
      severity: 'error',
      code: 'date-invalid',
      message: 'mapping `patient` map: the value is not a valid date in format `MM/DD/YYYY` (day out of range)',
      path: '/resources/0/map',
      location: at,
      columns: ['DOB'],
    };
    const d = handOverIssue(date);
    expect(d.message).toBe('column DOB: not a date in the format MM/DD/YYYY (day out of range)');
    expect(d.detail).toBe('mapping `patient` map, at mapping.yaml:12:5');
    expect(handOverIssue(d)).toEqual(d);
    const lookup = handOverIssue({
      ...date,
      code: 'lookup-miss',
      columns: ['SEX'],
      message:
        'mapping `patient` map: the code (1 character) is not in lookup table `gender` (known: M, F, U); add it or pass a default: $lookup($gender, code, "default")',
    });
    expect(lookup.message).toBe('column SEX: the code (1 character) is not in the list `gender` (known: M, F, U)');
    expect(lookup.detail).toBe('mapping `patient` map, add it or pass a default: $lookup($gender, code, "default"), at mapping.yaml:12:5');
    const key = handOverIssue({
      ...date,
      code: 'key-missing',
      columns: ['MRN'],
      message: 'mapping `patient`: the key `MRN` is empty or missing in this record',
    });
    expect(key.message).toBe("column MRN: empty or missing: it is the row's key");
    const schema = handOverIssue({
      severity: 'error',
      code: 'invalid',
      message: 'must match format "date"',
      path: '/birthDate',
      columns: ['DOB', 'BIRTH_YEAR'],
    });
    expect(schema).toMatchObject({ message: 'columns DOB, BIRTH_YEAR: must match format "date"', detail: 'resource field /birthDate' });
  });

  it('issue 26: a consequence (`ref-rejected`) names the reject of the row it refers to', () => {
    const ref: Issue = {
      severity: 'error',
      code: 'ref-rejected',
      message: 'mapping `careteam` map: patient `000031` was rejected in this run, so this reference cannot be resolved',
      location: at,
      columns: ['MRN'],
      refersTo: { mapping: 'patient', key: '000031' },
    };
    const causeOf = (mapping: string, key: string) => (mapping === 'patient' && key === '000031' ? 'data/patients.csv line 33' : undefined);
    expect(handOverIssue(ref, { causeOf }).message).toBe(
      'column MRN: rejected because patient `000031` was rejected (data/patients.csv line 33): fix that row first',
    );
    expect(handOverIssue(ref).message).toBe('column MRN: rejected because patient `000031` was rejected: fix that row first');
  });
});
