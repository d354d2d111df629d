import { afterAll, describe, expect, it } from 'vitest';
import { sourceColumns } from '../../src/sources/source-columns.js';
import { fixture, tempDir } from './helpers.js';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

describe('sourceColumns: the columns the column contract checks against', () => {
  it("CSV: the header, with the source's delimiter, after a byte-order mark", async () => {
    expect(await sourceColumns({ name: 's', path: fixture('patients-semicolon.csv'), csv: { delimiter: ';' } })).toEqual({
      columns: ['MRN', 'first_name', 'city'],
      exact: true,
    });
    const bom = tmp.write('bom.csv', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('MRN,First Name\n1,Ada\n')]));
    expect((await sourceColumns({ name: 's', path: bom }))?.columns).toEqual(['MRN', 'First Name']);
  });

  it('CSV without a header row: `csv.columns`', async () => {
    const file = tmp.write('nohead.csv', '1,Ada\n');
    expect((await sourceColumns({ name: 's', path: file, csv: { columns: ['ID', 'NAME'] } }))?.columns).toEqual(['ID', 'NAME']);
  });

  it('JSON: the fields of the records under `records`; NDJSON: the union of the first N records only', async () => {
    expect(await sourceColumns({ name: 's', path: fixture('staff.json'), records: 'staff' })).toEqual({
      columns: ['id', 'name', 'npi'],
      exact: false,
      sampled: 2,
    });
    const file = tmp.write('p.ndjson', '{"a":1}\n{"b":2}\n{"c":3}\n');
    expect(await sourceColumns({ name: 's', path: file }, 2)).toEqual({ columns: ['a', 'b'], exact: false, sampled: 2 });
  });

  it('unknown (undefined) for a missing file and a JSON file without records: the source checks say why', async () => {
    expect(await sourceColumns({ name: 's', path: tmp.path('absent.csv') })).toBeUndefined();
    expect(await sourceColumns({ name: 's', path: tmp.write('empty.ndjson', '') })).toBeUndefined();
  });
});
