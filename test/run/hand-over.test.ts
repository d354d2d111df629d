import { describe, expect, it } from 'vitest';
import { foreignCode, type Issue } from '../../src/core/issues.js';
import { handOverIssue } from '../../src/pipeline/hand-over.js';

/** Issue 22, item 6: `handOverIssue` is the one wording of an issue for hand-over files and terminals. */

const at = { file: '/clinic/mapping.yaml', line: 12, column: 5 };
const jsonata = (message: string): Issue => ({ severity: 'error', code: 'jsonata', message, path: '/resources/0/map', location: at });

describe('handOverIssue', () => {
  it("a mapping's $error / $assert text: named by its position, never quoted", () => {
    const e = handOverIssue(jsonata('mapping `patient` map: bad Moreau [D3137]'), { rejectsFile: '/clinic/.care-etl/rejects.ndjson' });
    expect(e.message).toBe("mapping `patient` map: the mapping's $error at mapping.yaml:12:5 (message in rejects.ndjson) [D3137]");
    expect(e.location).toEqual(at);
    expect(handOverIssue(e, { rejectsFile: '/clinic/.care-etl/rejects.ndjson' })).toEqual(e);
    const a = handOverIssue(jsonata('mapping `patient` map: no: Tomas [D3141]'));
    expect(a.message).toBe("mapping `patient` map: the mapping's $assert at mapping.yaml:12:5 (message in the rejects file) [D3141]");
    // without the owner prefix, nothing of the text is kept either
    expect(handOverIssue(jsonata('bad: Moreau [D3137]')).message).not.toContain('Moreau');
    expect(handOverIssue(jsonata('bad: Moreau [D3137]')).message).not.toContain('bad');
  });

  it('JSONata messages that quote a value: the template without it, objects included', () => {
    expect(handOverIssue(jsonata('mapping `patient` map: Unable to cast value to a number: {"a":"Moreau"} [D3030]')).message).toBe(
      'mapping `patient` map: unable to cast a value to a number [D3030]',
    );
    expect(handOverIssue(jsonata('mapping `patient` map: Malformed URL passed to $decodeUrl(): "%Moreau" [D3140]')).message).not.toContain('Moreau');
    // operators and function names only: kept as they are
    const t = jsonata('mapping `patient` map: The left side of the "+" operator must evaluate to a number [T2001]');
    expect(handOverIssue(t)).toEqual(t);
  });

  it('an unexpected error inside an expression: value-free', () => {
    const e = handOverIssue({ severity: 'error', code: 'eval-failed', message: 'mapping `patient` map: cannot parse "Moreau"', location: at });
    expect(e.message).toBe('mapping `patient` map: the expression at mapping.yaml:12:5 failed (message in the rejects file)');
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
    expect(handOverIssue(none)).toEqual(none);
    const miss: Issue = { severity: 'error', code: 'lookup-miss', message: 'the code (1 character) is not in lookup table `gender`', location: at };
    expect(handOverIssue(miss)).toBe(miss);
  });
});
