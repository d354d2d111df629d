// A source that is not text — a file of NUL bytes, or NUL bytes in its first 64 KiB — is a fatal error naming the
// file (exit 2) from `checkSource`, the check every run makes before it writes anything; not "0 rows, exit 0".
// UTF-16 sources (zero bytes in every ASCII character) stay legitimate.
import { afterAll, describe, expect, test } from 'vitest';
import { CareEtlError } from '../../src/core/issues.js';
import { checkSource, type SourceConfig } from '../../src/sources/open-source.js';
import { collect, tempDir } from './helpers.js';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

async function checkError(cfg: SourceConfig): Promise<CareEtlError> {
  try {
    await checkSource(cfg);
  } catch (err) {
    expect(err).toBeInstanceOf(CareEtlError);
    return err as CareEtlError;
  }
  throw new Error('expected a CareEtlError');
}

const HEADER = 'MRN,FIRST,LAST\n';
const utf16le = (s: string) => Buffer.from(s, 'utf16le');

describe('checkSource refuses a source that is not text', () => {
  for (const [format, ext] of [
    ['CSV', 'csv'],
    ['JSON', 'json'],
    ['NDJSON', 'ndjson'],
  ] as const) {
    test(`a ${format} file of NUL bytes: fatal, naming the file, exit 2`, async () => {
      const path = tmp.write(`zeros.${ext}`, Buffer.alloc(4096));
      const err = await checkError({ name: 'patients', path });
      expect(err.exitCode).toBe(2);
      expect(err.message).toBe(`Source \`patients\`: ${path}: not a text file: all its 4096 bytes are NUL bytes (a ${format} export holds none)`);
      expect(err.issues).toEqual([expect.objectContaining({ severity: 'fatal', code: 'source-not-text', location: expect.objectContaining({ file: path }) })]);
      expect(err.hint).toMatch(/export it again/);
    });
  }

  test('good rows, then a zero-filled tail (a copy cut short): fatal, with the length of the NUL run', async () => {
    const path = tmp.write('cut.csv', Buffer.concat([Buffer.from(`${HEADER}000001,Ada,One\n`), Buffer.alloc(100_000)]));
    const err = await checkError({ name: 'patients', path });
    expect(err.message).toContain('not a text file: it ends in 65536 NUL bytes (zero-filled)');
    expect(err.hint).toContain('csv.encoding: utf-16le');
  });

  test('a stray NUL inside a cell is data, not a damaged file (the readers keep it, as any control character)', async () => {
    await expect(checkSource({ name: 'events', path: tmp.write('nul.ndjson', `{"MRN":"1"}\n{"MRN":"2\u0000"}\n`) })).resolves.toBeUndefined();
    await expect(checkSource({ name: 'p', path: tmp.write('nul.csv', `${HEADER}000001,A\u0000da,One\n`) })).resolves.toBeUndefined();
  });

  test('UTF-16 sources are text: with a byte-order mark (CSV, JSON), or declared without one (CSV)', async () => {
    const bomCsv = tmp.write('bom16.csv', Buffer.concat([Buffer.from([0xff, 0xfe]), utf16le(`${HEADER}000001,Ada,One\n`)]));
    await expect(checkSource({ name: 'p', path: bomCsv })).resolves.toBeUndefined();
    const declared = tmp.write('le16.csv', utf16le(`${HEADER}000001,Ada,One\n`));
    await expect(checkSource({ name: 'p', path: declared, csv: { encoding: 'utf-16le' } })).resolves.toBeUndefined();
    const guessed = tmp.write('be16.csv', utf16le(`${HEADER}000001,Ada,One\n`).swap16());
    await expect(checkSource({ name: 'p', path: guessed, csv: { encoding: 'utf-16' } })).resolves.toBeUndefined();
    const json = tmp.write('bom16.json', Buffer.concat([Buffer.from([0xff, 0xfe]), utf16le('[{"MRN":"1"}]')]));
    await expect(checkSource({ name: 'p', path: json })).resolves.toBeUndefined();
    expect(await collect({ name: 'p', path: declared, csv: { encoding: 'utf-16le' } })).toHaveLength(1);
  });

  test('a UTF-16 file of zero code units is not text either; nor UTF-16 without its mark or `csv.encoding`', async () => {
    const zeros = tmp.write('zeros16.csv', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.alloc(64)]));
    expect((await checkError({ name: 'p', path: zeros })).message).toContain('all its 64 bytes are NUL bytes');
    const unmarked = tmp.write('unmarked16.csv', utf16le(`${HEADER}000001,Ada,One\n`));
    expect((await checkError({ name: 'p', path: unmarked })).issues[0]!.code).toBe('source-not-text');
  });

  test('plain text (UTF-8, Windows-1252) passes', async () => {
    await expect(checkSource({ name: 'p', path: tmp.write('ok.csv', `${HEADER}000001,Zoë,Ünal\n`) })).resolves.toBeUndefined();
    await expect(
      checkSource({ name: 'p', path: tmp.write('ok1252.csv', Buffer.from(`${HEADER}000001,Zo\xeb,One\n`, 'latin1')), csv: { encoding: 'windows-1252' } }),
    ).resolves.toBeUndefined();
    await expect(checkSource({ name: 'p', path: tmp.write('ok.ndjson', '{"MRN":"1"}\n') })).resolves.toBeUndefined();
  });
});
