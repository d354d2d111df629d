import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { CareEtlError, formatIssue } from '../../src/core/issues.js';
import { loadView } from '../../src/export/view/load-view.js';
import { compileView } from '../../src/export/view/view-definition.js';
import { viewRows } from '../../src/export/view/view-rows.js';

/** The issues (formatted as the terminal shows them) of a view that cannot be used. */
function problems(view: unknown): string[] {
  try {
    compileView(view, 'v.json', { resource: 'Observation' });
  } catch (err) {
    expect(err).toBeInstanceOf(CareEtlError);
    expect((err as CareEtlError).exitCode).toBe(2);
    return (err as CareEtlError).issues.map(formatIssue);
  }
  throw new Error('the view was accepted');
}

const col = (name: string, path: string) => ({ name, path });

describe('ViewDefinition checks: every problem named by file and JSON path, all at once', () => {
  test('unsupported FHIRPath and view features', () => {
    const out = problems({
      resource: 'Observation',
      constant: [{ name: 'n', valueInteger: 1 }],
      select: [
        { column: [col('a', 'id'), col('b', 'value.ofType(Quantity).value.lowBoundary()'), col('c', 'effective is dateTime'), col('d', '@2020-01-01')] },
        { repeat: ['item'], column: [col('e', '%rowIndex')] },
        { forEach: 'component.where(code.exists())', column: [col('f', "code.coding.where(system = 'x').code.substring(1)")] },
      ],
    });
    expect(out).toEqual([
      expect.stringMatching(
        /^v\.json: error \[view-unsupported\] at select\[0\]\.column\[1\]\.path: the function `lowBoundary\(\)` is not supported at character 30/,
      ),
      expect.stringMatching(/at select\[0\]\.column\[2\]\.path: the operator `is` is not supported/),
      expect.stringMatching(/\[view-invalid\] at select\[0\]\.column\[3\]\.path: unexpected character `@`/),
      expect.stringMatching(/\[view-unsupported\] at select\[1\]\.repeat: `repeat` is not supported/),
      expect.stringMatching(/at select\[1\]\.column\[0\]\.path: `%rowIndex` is not supported/),
      expect.stringMatching(/at select\[2\]\.column\[0\]\.path: the function `substring\(\)` is not supported/),
    ]);
  });

  test('shape: resource type, names, duplicates, constants, unionAll columns, ofType placement', () => {
    expect(problems({ resource: 'Patient', select: [{ column: [col('id', 'id')] }] })).toEqual([
      expect.stringMatching(/at resource: expected `Observation` \(care-etl exports Observations\), got `Patient`/),
    ]);
    const out = problems({
      resource: 'Observation',
      constant: [{ name: 'x' }],
      select: [
        {
          column: [col('id', 'id'), col('id', 'status'), col('bad name', 'id'), col('t', 'where(true).ofType(string)'), col('k', 'subject.getReferenceKey(1)')],
        },
        { unionAll: [{ column: [col('u', 'id')] }, { column: [col('v', 'id')] }] },
      ],
    });
    expect(out.join('\n')).toContain('at constant[0]: expected exactly one value[x]');
    expect(out.join('\n')).toContain('at select[0].column[1].name: the column `id` is defined twice');
    expect(out.join('\n')).toContain('at select[0].column[2].name: expected a column name');
    expect(out.join('\n')).toContain('at select[0].column[3].path: `ofType()` is supported only right after an element name');
    expect(out.join('\n')).toContain('at select[0].column[4].path: `getReferenceKey()` takes a type name');
    expect(out.join('\n')).toContain('at select[1].unionAll[1]: expected the same columns in the same order as unionAll[0] (u), got v');
  });

  test('a file saved with a BOM (Windows editors) loads', () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-view-'));
    const file = join(dir, 'bom.view.json');
    writeFileSync(file, '\uFEFF' + JSON.stringify({ resource: 'Observation', select: [{ column: [{ name: 'id', path: 'id' }] }] }));
    expect(loadView(file).view).toBeDefined();
  });

  test('a JSON syntax error is named at its line:col', () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-view-'));
    const file = join(dir, 'broken.view.json');
    writeFileSync(file, '{\n  "resource": "Observation",\n  select: []\n}\n');
    let err: unknown;
    try {
      loadView(file);
    } catch (e) {
      err = e;
    }
    expect((err as CareEtlError).issues[0]).toMatchObject({ code: 'view-invalid', location: { file, line: 3, column: 3 } });
  });
});

describe('rows of an Observation', () => {
  const obs = {
    resourceType: 'Observation',
    id: 'o1',
    subject: { reference: 'https://care.example/fhir/Patient/p9/_history/2' },
    code: { coding: [{ system: 'http://loinc.org', code: '44261-6' }], text: 'PHQ-9' },
    effectiveDateTime: '2024-03-01T10:00:00Z',
    valueInteger: 12,
    component: [],
  };

  test('choice elements bare and through ofType; reference keys; forEachOrNull over nothing; join; not()', () => {
    const view = compileView(
      {
        resource: 'Observation',
        select: [
          {
            column: [
              col('id', 'getResourceKey()'),
              col('patient', 'subject.getReferenceKey(Patient)'),
              col('practitioner', 'subject.getReferenceKey(Practitioner)'),
              col('when', 'effective'),
              col('score', 'value.ofType(integer)'),
              col('not_string', 'value.ofType(string).exists().not()'),
              col('codes', "code.coding.code.join('|')"),
              col('double', 'value.ofType(integer) * 2 + 0.5'),
            ],
          },
          { forEachOrNull: 'component', column: [col('component_code', 'code.coding.first().code')] },
        ],
      },
      'v.json',
    );
    expect(viewRows(view, obs, 'v.json')).toEqual([
      {
        id: 'o1',
        patient: 'p9',
        practitioner: null,
        when: '2024-03-01T10:00:00Z',
        score: 12,
        not_string: true,
        codes: '44261-6',
        double: 24.5,
        component_code: null,
      },
    ]);
    expect(view.root.names).toEqual(['id', 'patient', 'practitioner', 'when', 'score', 'not_string', 'codes', 'double', 'component_code']);
  });

  test('a where that is not boolean fails on the resource, naming the path and the id, never the value', () => {
    const view = compileView({ resource: 'Observation', where: [{ path: 'code.text' }], select: [{ column: [col('id', 'id')] }] }, 'v.json');
    expect(() => viewRows(view, obs, 'v.json')).toThrow(CareEtlError);
    try {
      viewRows(view, obs, 'v.json');
    } catch (err) {
      const e = err as CareEtlError;
      expect(e.message).toBe('The ViewDefinition v.json failed on Observation o1');
      expect(e.issues[0]).toMatchObject({ code: 'view-eval', path: 'where[0].path' });
      expect(e.describe()).not.toContain('PHQ-9');
    }
  });
});
