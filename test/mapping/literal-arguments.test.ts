/** Literal arguments that cannot work are load-time errors at their file:line:col, not a reject on every row. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { CareEtlError } from '../../src/core/issues.js';
import { compileMapping } from '../../src/mapping/compile-mapping.js';
import { dateFormatMistake } from '../../src/mapping/functions.js';
import { loadMapping } from '../../src/mapping/load-mapping.js';

const dir = mkdtempSync(join(tmpdir(), 'care-etl-literal-args-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
writeFileSync(join(dir, 'rows.csv'), 'MRN,DOB,TEL\n1,03.04.1980,0221 123456\n');

async function issuesOfMap(map: string) {
  const file = join(dir, 'm.yaml');
  writeFileSync(
    file,
    `version: 1\nsources:\n  rows: { path: rows.csv }\nresources:\n  - name: patient\n    type: Patient\n    from: rows\n    key: MRN\n    map: '${map}'\n`,
  );
  const m = await loadMapping(file, { env: {} });
  try {
    compileMapping(m);
    return [];
  } catch (err) {
    return (err as CareEtlError).issues.map((i) => [i.code, i.message.replace(/^mapping `patient` map: /, ''), i.location?.column]);
  }
}

describe('literal arguments checked when the mapping is loaded', () => {
  it('$date with lower-case day/year tokens, or `mm` (minutes) meant as the month', async () => {
    expect(await issuesOfMap('{ "birthDate": $date(DOB, "dd.mm.yyyy") }')).toEqual([
      [
        'date-format-invalid',
        '`dd` in date format `dd.mm.yyyy` is literal text, not a token: write `DD` (tokens are upper-case but `mm` minutes and `ss` seconds)',
        37,
      ],
    ]);
    expect(dateFormatMistake('DD.mm.YYYY')).toBe(
      '`mm` in date format `DD.mm.YYYY` is minutes, and there is no hour (`HH`) nor month: write `MM` for the month',
    );
    for (const ok of ['DD.MM.YYYY', 'YYYY-MM-DDTHH:mm:ss', 'HH:mm', 'luxon:dd MMM yyyy', 'YYYYMMDD']) expect(dateFormatMistake(ok), ok).toBeUndefined();
  });

  it('$phone with a default country it does not support', async () => {
    expect(await issuesOfMap('{ "telecom": [{ "system": "phone", "value": $phone(TEL, "DE") }] }')).toEqual([
      ['phone-country', '$phone default country `DE` is not supported (use US, CA or a calling code such as +44)', 67],
    ]);
    expect(await issuesOfMap('{ "telecom": [{ "system": "phone", "value": $phone(TEL, "+49") }] }')).toEqual([]);
  });

  it('after `~>` the piped value is the first argument: `X ~> $dateTime(format, zone)` is valid, a mistake still found', async () => {
    expect(await issuesOfMap('{ "extension": [{ "url": "u", "valueString": DOB ~> $dateTime("DD.MM.YYYY", "America/New_York") }] }')).toEqual([]);
    expect(await issuesOfMap('{ "telecom": [{ "system": "phone", "value": TEL ~> $phone("+49") }] }')).toEqual([]);
    expect(await issuesOfMap('{ "birthDate": DOB ~> $date("dd.MM.YYYY") }')).toEqual([
      [
        'date-format-invalid',
        '`dd` in date format `dd.MM.YYYY` is literal text, not a token: write `DD` (tokens are upper-case but `mm` minutes and `ss` seconds)',
        39,
      ],
    ]);
    expect(await issuesOfMap('{ "telecom": [{ "system": "phone", "value": TEL ~> $phone("DE") }] }')).toEqual([
      ['phone-country', '$phone default country `DE` is not supported (use US, CA or a calling code such as +44)', 69],
    ]);
  });
});
