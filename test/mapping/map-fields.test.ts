import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mapFieldProblems, matchFieldProblems } from '../../src/mapping/map-fields.js';
import { compileMapping } from '../../src/mapping/compile-mapping.js';
import { closeLookups, loadMapping } from '../../src/mapping/load-mapping.js';
import { issuesOf } from './helpers.js';

const unknown = (src: string, type: 'Patient' | 'Practitioner' | 'CareTeam' = 'Patient') =>
  mapFieldProblems(src, type).map((p) => [p.message.replace(/ \(fields: .*\)$/, ''), src.slice(p.offset, p.offset + 12)]);

describe("a map's literal keys checked against the resource's schema when the mapping is loaded", () => {
  it('a misspelt field, at its literal, with the did-you-mean; a field the API does not have, with the list', () => {
    expect(unknown('{ "birthdate": DOB, "gender": "male" }')).toEqual([['Patient has no field `birthdate`; did you mean `birthDate`?', '"birthdate":']]);
    expect(mapFieldProblems('{ "generalPractitioner": [] }', 'Patient')[0]!.message).toBe(
      'Patient has no field `generalPractitioner` (fields: resourceType, identifier, active, name, telecom, gender, birthDate, address, extension, managingOrganization)',
    );
  });

  it('nested objects through arrays, conditions, blocks and a path`s last step', () => {
    expect(unknown('( $x := 1; { "name": [{ "famly": L }] } )')).toEqual([['Patient.name has no field `famly`; did you mean `family`?', '"famly": L }']]);
    expect(unknown('{ "telecom": P ? [{ "sytem": "phone" }] }')).toEqual([['Patient.telecom has no field `sytem`; did you mean `system`?', '"sytem": "ph']]);
    expect(unknown('{ "telecom": [contacts.{ "system": "phone", "vaule": v }] }')).toEqual([
      ['Patient.telecom has no field `vaule`; did you mean `value`?', '"vaule": v }'],
    ]);
    expect(unknown('{ "participant": [{ "member": { "refrence": R } }] }', 'CareTeam')).toEqual([
      ['CareTeam.participant.member has no field `refrence`; did you mean `reference`?', '"refrence": '],
    ]);
  });

  it('a `$ref` where the schema wants a reference to another type: named with both types, at the mapping name', () => {
    const refTypes = new Map([
      ['patient', 'Patient'],
      ['practitioner', 'Practitioner'],
    ]);
    const src = '{ "subject": { "reference": $ref("practitioner", MRN) }, "participant": [{ "member": { "reference": $ref("practitioner", NPI) } }] }';
    expect(mapFieldProblems(src, 'CareTeam', { refTypes }).map((p) => [p.code, p.message, src.slice(p.offset, p.offset + 14)])).toEqual([
      [
        'ref-type-mismatch',
        'CareTeam.subject.reference must refer to a Patient, but mapping `practitioner` loads Practitioners: `$ref("practitioner", …)` gives `Practitioner/<id>`; refer to a Patient mapping',
        '"practitioner"',
      ],
    ]);
  });

  it('an inline lookup label the field it feeds does not allow: at the lookup entry, with the did-you-mean; TODO markers left to `todo`', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-map-fields-'));
    try {
      writeFileSync(join(dir, 'rows.csv'), 'MRN,SEX\n1,m\n');
      const file = join(dir, 'm.yaml');
      writeFileSync(
        file,
        'version: 1\nsources:\n  rows: { path: rows.csv }\nlookups:\n  sex: { m: männlich, w: femal, d: other, x: \'$TODO("which?")\' }\nresources:\n  - name: patient\n    type: Patient\n    from: rows\n    key: MRN\n    map: \'{ "gender": $lookup($sex, SEX) }\'\n',
      );
      const m = await loadMapping(file, { env: {} });
      const { issues } = await issuesOf(() => compileMapping(m));
      expect(issues.map((i) => [i.code, i.message.replace(/^mapping `patient` map: /, ''), i.location?.line, i.location?.column])).toEqual([
        [
          'lookup-value-invalid',
          'lookup `sex` gives `männlich` for `m`, which Patient.gender (fed by `$lookup($sex, …)`) does not allow: male, female, other, unknown',
          5,
          13,
        ],
        [
          'lookup-value-invalid',
          'lookup `sex` gives `femal` for `w`, which Patient.gender (fed by `$lookup($sex, …)`) does not allow: male, female, other, unknown; did you mean `female`?',
          5,
          26,
        ],
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a blank inline label is valid (the field is left out of that row): `u: ""` is not a label the enum lacks', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-map-fields-'));
    try {
      writeFileSync(join(dir, 'rows.csv'), 'MRN,SEX\n1,u\n');
      const file = join(dir, 'm.yaml');
      writeFileSync(
        file,
        'version: 1\nsources:\n  rows: { path: rows.csv }\nlookups:\n  sex: { m: male, f: female, u: "" }\nresources:\n  - name: patient\n    type: Patient\n    from: rows\n    key: MRN\n    map: \'{ "gender": $lookup($sex, SEX) }\'\n',
      );
      const m = await loadMapping(file, { env: {} });
      expect(compileMapping(m).order).toEqual(['patient']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a file lookup table is not checked at load (its labels have no place in the mapping; each row is checked)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-map-fields-'));
    try {
      writeFileSync(join(dir, 'rows.csv'), 'MRN,SEX\n1,m\n');
      writeFileSync(join(dir, 'sex.csv'), 'CODE,LABEL\nm,männlich\n');
      const file = join(dir, 'm.yaml');
      writeFileSync(
        file,
        'version: 1\nsources:\n  rows: { path: rows.csv }\nlookups:\n  sex: { path: sex.csv, key: CODE, value: LABEL }\nresources:\n  - name: patient\n    type: Patient\n    from: rows\n    key: MRN\n    map: \'{ "gender": $lookup($sex, SEX) }\'\n',
      );
      const m = await loadMapping(file, { env: {} });
      try {
        expect(compileMapping(m).order).toEqual(['patient']);
      } finally {
        closeLookups(m.lookups);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a `match:` reading a field the resource cannot have never gives a value: named at its step, with the did-you-mean', () => {
    const at = (src: string, type: 'Patient' | 'CareTeam') =>
      matchFieldProblems(src, type).map((p) => [p.message.replace(/ \(fields: .*$/, ''), src.slice(p.offset)]);
    expect(at('subject.refrence', 'CareTeam')).toEqual([['CareTeam.subject has no field `refrence`; did you mean `reference`?', 'refrence']]);
    expect(at('name[0].famly & "|" & $string(birthdate)', 'Patient')).toEqual([
      ['Patient.name has no field `famly`; did you mean `family`?', 'famly & "|" & $string(birthdate)'],
      ['Patient has no field `birthdate`; did you mean `birthDate`?', 'birthdate)'],
    ]);
    expect(at('identifier[system="urn:x"].value', 'Patient')).toEqual([]); // `system` inside the filter reads the identifier
    expect(at('subject.reference', 'CareTeam')).toEqual([]);
  });

  it('computed keys and results built by functions are left to the row`s validation; valid maps give nothing', () => {
    expect(unknown('{ LAST: 1, "name": [$merge([{ "famly": L }])] }')).toEqual([]);
    expect(unknown('{ "resourceType": "Patient", "identifier": [{ "system": "s", "value": V }], "active": true, "birthDate": D }')).toEqual([]);
  });

  it('`validate` (compileMapping) reports it at the key`s file:line:col', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-map-fields-'));
    try {
      writeFileSync(join(dir, 'rows.csv'), 'MRN,DOB\n1,1980-01-02\n');
      const file = join(dir, 'm.yaml');
      writeFileSync(
        file,
        'version: 1\nsources:\n  rows: { path: rows.csv }\nresources:\n  - name: patient\n    type: Patient\n    from: rows\n    key: MRN\n    map: |\n      { "identifier": [{ "value": MRN }],\n        "birthdate": DOB }\n',
      );
      const m = await loadMapping(file, { env: {} });
      const { issues } = await issuesOf(() => compileMapping(m));
      expect(issues).toEqual([
        expect.objectContaining({
          code: 'map-field-unknown',
          location: { file, line: 11, column: 9 },
          message: expect.stringContaining('did you mean `birthDate`?'),
        }),
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
