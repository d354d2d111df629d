/** A CSV delimiter or quote that cannot work is a validation error at its line:col (issue 25, item 5). */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadMapping } from '../../src/mapping/load-mapping.js';
import { issuesOf } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'care-etl-dialect-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
writeFileSync(join(dir, 'p.csv'), 'MRN\n1\n');
writeFileSync(join(dir, 'codes.csv'), 'CODE,LABEL\nA,a\n');

const RESOURCES =
  'resources:\n  - name: patient\n    type: Patient\n    from: p\n    key: MRN\n    map: \'{ "identifier": [{ "system": "urn:x", "value": MRN }] }\'\n';

function mapping(csv: string, lookupCsv?: string): string {
  const file = join(dir, `m-${Math.random().toString(36).slice(2)}.yaml`);
  const lookups = lookupCsv ? `lookups:\n  codes: { path: codes.csv, key: CODE, value: LABEL, csv: ${lookupCsv} }\n` : '';
  writeFileSync(file, `version: 1\nsources:\n  p:\n    path: p.csv\n    csv: ${csv}\n${lookups}${RESOURCES}`);
  return file;
}

describe('csv dialect checks', () => {
  const cases: [string, string, number, RegExp][] = [
    ['the quote as delimiter', `{ delimiter: '"' }`, 23, /`csv.delimiter` "\\"" is the default quote character "\\""/],
    ['a line break as delimiter', '{ delimiter: "\\n" }', 23, /`csv.delimiter` cannot hold a line break \("\\n"\)/],
    ['delimiter == quote', "{ delimiter: ';', quote: ';' }", 35, /is the `csv.quote` character ";"/],
    ['a delimiter holding the quote', `{ delimiter: '|"' }`, 23, /"\|\\"" holds the default quote/],
    ['a CR as quote', '{ quote: "\\r" }', 19, /`csv.quote` cannot hold a line break/],
  ];
  for (const [what, csv, column, message] of cases) {
    it(`${what}: csv-dialect at line 5, column ${column}`, async () => {
      const { issues } = await issuesOf(() => loadMapping(mapping(csv), { env: {} }));
      expect(issues).toHaveLength(1);
      expect(issues[0]).toMatchObject({ code: 'csv-dialect', location: { line: 5, column } });
      expect(issues[0]!.message).toMatch(message);
    });
  }

  it('a lookup file with an impossible delimiter: the same error, named by the lookup', async () => {
    const { issues } = await issuesOf(() => loadMapping(mapping('{ delimiter: ";" }', `{ delimiter: "\\r\\n" }`), { env: {} }));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ code: 'csv-dialect', location: { line: 7 } });
    expect(issues[0]!.message).toMatch(/^lookup `codes`: `csv.delimiter` cannot hold a line break/);
  });

  it('an empty delimiter or quote is refused by the schema', async () => {
    for (const csv of [`{ delimiter: '' }`, `{ quote: '' }`]) {
      const { issues } = await issuesOf(() => loadMapping(mapping(csv), { env: {} }));
      expect(issues.length).toBeGreaterThan(0);
      expect(issues[0]!.location?.line).toBe(5);
    }
  });

  it('workable dialects pass: tab, multi-character delimiter, a quote other than the default', async () => {
    for (const csv of ['{ delimiter: "\\t" }', "{ delimiter: '||' }", `{ delimiter: '"', quote: "'" }`]) {
      await expect(loadMapping(mapping(csv), { env: {} })).resolves.toBeDefined();
    }
  });
});
