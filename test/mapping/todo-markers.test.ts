import { describe, expect, it } from 'vitest';
import { findTodoMarkers, scanTodoCalls, todoIssue } from '../../src/mapping/todo-markers.js';
import { keyingOf, refKeyExpr } from '../../src/init/fhir-starter.js';
import { fhirFacts, refForm } from '../../src/init/fhir-facts.js';

describe('scanTodoCalls: `$TODO(…)` calls in JSONata text', () => {
  it('finds calls with their text and extent', () => {
    const s = '{ "system": $TODO("the MRN namespace, e.g. urn:x"), "value": $TODO( \'single \\\'quoted\\\'\' ) }';
    const calls = scanTodoCalls(s);
    expect(calls.map((c) => c.text)).toEqual(['the MRN namespace, e.g. urn:x', "single 'quoted'"]);
    expect(calls.map((c) => s.slice(c.offset, c.offset + c.length))).toEqual(['$TODO("the MRN namespace, e.g. urn:x")', "$TODO( 'single \\'quoted\\'' )"]);
  });

  it('skips comments, string literals, quoted names and other names; nested parentheses end at the matching one', () => {
    const s = [
      '/* "x": $TODO("commented out") */',
      '"a": "not a call: $TODO(\\"in a string\\")",',
      '`$TODO(name)`: 1,',
      '"b": $TODOS("another function"), "c": $x.$TODO',
      '"d": $TODO("with (parentheses) and \\"quotes\\"" & $string(1))',
    ].join('\n');
    const calls = scanTodoCalls(s);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.text).toBe('with (parentheses) and "quotes"');
    expect(s.slice(calls[0]!.offset, calls[0]!.offset + calls[0]!.length)).toBe('$TODO("with (parentheses) and \\"quotes\\"" & $string(1))');
  });

  it('a call without a string argument: its argument text', () => {
    expect(scanTodoCalls('$TODO()')[0]!.text).toBe('');
    expect(scanTodoCalls('$TODO(MRN)')[0]!.text).toBe('MRN');
  });
});

describe('findTodoMarkers: every marker of a mapping file, with file:line:column', () => {
  const text = [
    'version: 1', // 1
    'sources:', // 2
    `  visits: { path: v.json, records: '$TODO("where the records are")' }`, // 3
    'lookups:', // 4
    `  gender: { "M": male, "X": '$TODO("the gender of X")' }`, // 5
    'resources:', // 6
    '  - name: patient', // 7
    `    type: "$TODO(\\"Patient, Practitioner or CareTeam\\")"`, // 8
    '    from: visits', // 9
    '    key: id', // 10
    '    map: |', // 11
    '      {', // 12
    '        /* "gender": $TODO("commented: not counted") */', // 13
    '        "identifier": [{ "system": $TODO("the MRN namespace"), "value": id }]', // 14
    '      }', // 15
    '',
  ].join('\n');

  it('finds them in flow maps, quoted scalars and block scalars, at the `$` of each call', () => {
    const markers = findTodoMarkers(text, 'm.yaml');
    expect(markers.map((m) => [m.pointer, m.owner, m.text, m.whole, `${m.location.line}:${m.location.column}`])).toEqual([
      ['/sources/visits/records', 'source `visits` records', 'where the records are', true, '3:37'],
      ['/lookups/gender/X', 'lookup `gender` code `X`', 'the gender of X', true, '5:30'],
      ['/resources/0/type', 'mapping `patient` type', 'Patient, Practitioner or CareTeam', true, '8:12'],
      ['/resources/0/map', 'mapping `patient` map', 'the MRN namespace', false, '14:36'],
    ]);
    const lines = text.split('\n');
    for (const m of markers) expect(lines[m.location.line! - 1]!.slice(m.location.column! - 1)).toMatch(/^\$TODO\(/);
    expect(todoIssue(markers[3]!)).toEqual({
      severity: 'error',
      code: 'todo',
      message: 'mapping `patient` map: TODO — the MRN namespace',
      path: '/resources/0/map',
      location: { file: 'm.yaml', line: 14, column: 36 },
    });
  });

  it('a file that is not YAML has none (the loader reports it)', () => {
    expect(findTodoMarkers('a: [unclosed\n  $TODO("x")', 'm.yaml')).toEqual([]);
  });
});

describe('reference forms and keys of FHIR exports (init)', () => {
  it('tells references by id from references by identifier', () => {
    expect(refForm('Patient/abc', 'Patient')).toEqual({ kind: 'id' });
    expect(refForm('https://ehr.example/fhir/Patient/abc/_history/3', 'Patient')).toEqual({ kind: 'id' });
    expect(refForm('urn:uuid:0c9e6b7d-2a64', 'Practitioner')).toEqual({ kind: 'id' });
    expect(refForm('Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|9999941990', 'Practitioner')).toEqual({
      kind: 'identifier',
      system: 'http://hl7.org/fhir/sid/us-npi',
    });
    expect(refForm('#pr1', 'Practitioner')).toEqual({ kind: 'other' });
    expect(refForm('RelatedPerson/peter', 'Practitioner')).toEqual({ kind: 'other' });
  });

  it('references in several forms make the key a TODO that validate will report', () => {
    const enc = (who: string) => ({ resourceType: 'Encounter', subject: { reference: 'Patient/p1' }, participant: [{ individual: { reference: who } }] });
    const facts = fhirFacts([enc('Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|1'), enc('Practitioner/x'), enc('#contained')])!;
    expect(keyingOf('Patient', [facts])).toEqual({ kind: 'id' });
    const k = keyingOf('Practitioner', [facts]);
    expect(k.kind).toBe('mixed');
    const expr = refKeyExpr('Practitioner', k, '$r');
    expect(scanTodoCalls(expr).map((c) => c.text)).toEqual([
      'the practitioner key from the reference $r: these exports refer to a Practitioner in several ways (Encounter.participant.individual: `Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|<value>`; Encounter.participant.individual: `Practitioner/<id>` or `urn:uuid:<id>`); return the key the practitioner mapping uses',
    ]);
  });
});
