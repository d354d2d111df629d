import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { closeLookups, loadMapping } from '../../src/mapping/load-mapping.js';
import { columnContractIssues } from '../../src/mapping/column-contract.js';
import { closestColumn } from '../../src/mapping/closest.js';

const dir = mkdtempSync(join(tmpdir(), 'care-etl-contract-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
writeFileSync(join(dir, 'people.csv'), 'MRN,First Name,LAST\n1,Ada,Lovelace\n');
writeFileSync(join(dir, 'semicolons.csv'), 'MRN;First Name;LAST\n1;Ada;Lovelace\n');

/** The contract's issues of a mapping over people.csv: `[message's field, line:col]`. */
async function issuesOf(resource: string, source = '{ path: people.csv }'): Promise<[string, string][]> {
  const file = join(dir, 'm.yaml');
  writeFileSync(file, `version: 1\nsources:\n  people: ${source}\nresources:\n  - name: patient\n    type: Patient\n    from: people\n${resource}`);
  const m = await loadMapping(file, { env: {} });
  try {
    return (await columnContractIssues(m)).map((i) => [i.message.match(/reads `([^`]+)`/)![1]!, `${i.location?.line}:${i.location?.column}`]);
  } finally {
    closeLookups(m.lookups);
  }
}

describe('column contract of a mapping over a CSV source', () => {
  it('backquoted names with spaces are compared exactly, placed at the backquote', async () => {
    expect(await issuesOf('    key: MRN\n    map: \'{ "name": [{ "given": [`First Name`], "family": LAST }] }\'\n')).toEqual([]);
    expect(await issuesOf('    key: MRN\n    map: \'{ "name": [{ "given": [`First name`] }] }\'\n')).toEqual([['First name', '9:34']]);
  });

  it('`groupBy` as the key: one issue, not one per role; `$[0].` steps of a group read the rows', async () => {
    expect(await issuesOf('    groupBy: MRNX\n    map: \'{ "name": [{ "family": $[0].LASTX }] }\'\n')).toEqual([
      ['MRNX', '8:14'],
      ['LASTX', '9:39'],
    ]);
  });

  it('a `where:` row filter reads row fields too', async () => {
    expect(await issuesOf('    key: MRN\n    where: STATUSX != "deleted"\n    map: \'{ "name": [{ "family": LAST }] }\'\n')).toEqual([['STATUSX', '9:12']]);
  });

  it('a CSV header is exact: `$exists` does not make a column optional there, `optional:` does', async () => {
    const map = '    key: MRN\n    map: \'{ "gender": $exists(SEX) ? SEX }\'\n';
    expect((await issuesOf(map)).map(([f]) => f)).toEqual(['SEX', 'SEX']);
    expect(await issuesOf(map, '{ path: people.csv, optional: [SEX] }')).toEqual([]);
  });

  it('a header read as one column because of the wrong delimiter: one issue naming the delimiter to set, not "did you mean" per field', async () => {
    const file = join(dir, 'm.yaml');
    writeFileSync(
      file,
      'version: 1\nsources:\n  people: { path: semicolons.csv }\nresources:\n  - name: patient\n    type: Patient\n    from: people\n    key: MRN\n    map: \'{ "name": [{ "family": LAST }] }\'\n',
    );
    const m = await loadMapping(file, { env: {} });
    const issues = await columnContractIssues(m);
    closeLookups(m.lookups);
    expect(issues).toHaveLength(1);
    expect(issues[0]!.location).toMatchObject({ line: 8, column: 10 });
    expect(issues[0]!.message).toContain('has a single column, `MRN;First Name;LAST`: its header is split by ";"');
    expect(issues[0]!.message).toContain('fix: set `csv: { delimiter: ";" }` under `sources.people`');
  });
});

describe('closestColumn', () => {
  it('another case, a near spelling, a contained name; nothing for an unrelated one', () => {
    expect(closestColumn('lastname', ['MRN', 'lastName'])).toBe('lastName');
    expect(closestColumn('LASTNAM', ['MRN', 'LASTNAME'])).toBe('LASTNAME');
    expect(closestColumn('LASTNAME', ['MRN', 'FIRST', 'LAST'])).toBe('LAST');
    expect(closestColumn('PATIENT_MRN', ['MRN', 'FIRST'])).toBe('MRN');
    expect(closestColumn('GENDER', ['MRN', 'FIRST'])).toBeUndefined();
  });
});
