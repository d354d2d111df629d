import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { columnsOfCall, columnsOfExpression, columnsOfField } from '../../src/mapping/error-columns.js';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import { readRejectsFile } from '../../src/report/report-model.js';
import { handOverIssue } from '../../src/pipeline/hand-over.js';

/** Issue 26, item 2: which columns of the export a row-level failure is about, from the expression's syntax tree. */

const MAP =
  '{ "name": [{ "family": $name(LAST), "given": [$name(FIRST)] }], "birthDate": $date(DOB, "MM/DD/YYYY"), "x": $[0].MRN, "p": [$.{ "s": $dateTime(START, "YYYY-MM-DD") }] }';

describe('error-columns', () => {
  it('a failing call: the columns its arguments read (the position JSONata gives, just after its `(`)', () => {
    const at = (call: string) => MAP.indexOf(call) + call.length;
    expect(columnsOfCall(MAP, at('$date('), 'date')).toEqual(['DOB']);
    expect(columnsOfCall(MAP, at('$dateTime('), 'dateTime')).toEqual(['START']);
    expect(columnsOfCall(MAP, at('$date('), 'name')).toEqual([]); // another function at that place: not this call
    expect(columnsOfCall(MAP, undefined, 'date')).toEqual([]);
    expect(columnsOfCall('{ "a": ', 3, 'date')).toEqual([]); // not an expression
  });

  it('a key expression, and the value the map builds at a resource path (array positions ignored)', () => {
    expect(columnsOfExpression('MRN')).toEqual(['MRN']);
    expect(columnsOfExpression('$pad(ID, 6) & "-" & SITE')).toEqual(['ID', 'SITE']);
    expect(columnsOfField(MAP, '/birthDate')).toEqual(['DOB']);
    expect(columnsOfField(MAP, '/name/0/family')).toEqual(['LAST']);
    expect(columnsOfField(MAP, '/name/0')).toEqual(['LAST', 'FIRST']);
    expect(columnsOfField(MAP, '/x')).toEqual(['MRN']);
    expect(columnsOfField(MAP, '/p/0/s')).toEqual(['START']); // `$.{…}` is not followed: the columns of `p`
    expect(columnsOfField(MAP, '/resourceType')).toEqual([]);
  });
});

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('a schema error on a field names the columns its expression reads', () => {
  it('birthDate from BIRTH: the validate stage reject says `column BIRTH`', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-error-columns-'));
    dirs.push(dir);
    mkdirSync(join(dir, 'data'));
    writeFileSync(join(dir, 'data/p.csv'), 'ID,BIRTH\n1,1990-01-01\n2,not a date\n');
    writeFileSync(
      join(dir, 'mapping.yaml'),
      [
        'version: 1',
        'sources:',
        '  people: { path: data/p.csv }',
        'resources:',
        '  - name: patient',
        '    type: Patient',
        '    from: people',
        '    key: ID',
        '    map: |',
        '      { "identifier": [{ "system": "urn:x", "value": ID }], "birthDate": BIRTH }',
        '',
      ].join('\n'),
    );
    const out = join(dir, 'out');
    const report = await runPipeline({ mappingFile: join(dir, 'mapping.yaml'), dryRun: true, outDir: out, rejectsFile: join(out, 'rejects.ndjson') });
    expect(report.totals.rejected).toBe(1);
    const { rejects } = await readRejectsFile(join(out, 'rejects.ndjson'));
    const [r] = rejects;
    expect(r!.stage).toBe('validate');
    expect(r!.issues[0]!.columns).toEqual(['BIRTH']);
    const h = handOverIssue(r!.issues[0]!);
    expect(h.message).toMatch(/^column BIRTH: /);
    expect(h.detail).toMatch(/^pattern \^.*\$, resource field \/birthDate$/); // the regular expression is jargon
    const summary = readFileSync(join(out, 'rejects.summary.csv'), 'utf8');
    expect(summary).toContain('"column BIRTH: must be a FHIR R4 date: YYYY, YYYY-MM or YYYY-MM-DD');
    expect(summary).not.toContain('not a date');
  });
});
