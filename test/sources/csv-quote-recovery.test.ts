import { afterAll, describe, expect, test } from 'vitest';
import { CareEtlError } from '../../src/core/issues.js';
import { CSV_MAX_RECORD_CHARS, openSource, readHeader, type SourceConfig, type SourceItem } from '../../src/sources/open-source.js';
import { brief, collect, tempDir } from './helpers.js';

/*
 * Issue 12: a broken quote costs at most the records it really spans (csv-quote-guard.ts). The rule: a quoted
 * field still open after `csv.maxQuotedLines` lines (default 100) or at the end of the file, or one that runs
 * past its line after a closing quote followed by other text (`"ab" ,2`), or that crosses a line break and then
 * meets such a quote, is broken: its record is rejected (`csv-quote`) up to the end of the line where the quote
 * opened, and reading resumes on the next line. A record over 4 MiB without an open quote is a
 * `value-too-large` reject; both are fatal only in the header row.
 */

const tmp = tempDir();
afterAll(() => tmp.cleanup());

async function fatal(cfg: SourceConfig): Promise<CareEtlError> {
  const err = await collect(cfg).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(CareEtlError);
  return err as CareEtlError;
}

const rejects = (items: SourceItem[]) => brief(items.filter((i) => !i.ok));

describe('CSV: a stray quote no longer swallows the file', () => {
  test('`"ab" ,2` on line 3 of a 200,000-row CSV: one reject, the 199,999 other rows are read', async () => {
    const rows = ['id,v'];
    for (let i = 1; i <= 200_000; i++) rows.push(i === 2 ? '"ab" ,2' : `${i},v${i}`);
    const path = tmp.write('stray-200k.csv', rows.join('\n') + '\n');
    let read = 0;
    const bad: SourceItem[] = [];
    let last: SourceItem | undefined;
    for await (const item of openSource({ name: 'p', path })) {
      read++;
      if (!item.ok) bad.push(item);
      last = item;
    }
    expect(read).toBe(200_000);
    expect(brief(bad)).toEqual([
      {
        ok: false,
        line: 3,
        record: 2,
        code: 'csv-quote',
        message:
          'closing quote not followed by a delimiter or the end of the line (column "id"), and the quoted field runs past the end of its line: line 3 rejected, reading resumed at line 4',
        raw: '"ab" ,2',
      },
    ]);
    expect(last).toMatchObject({ ok: true, data: { id: '200000', v: 'v200000' }, origin: { line: 200_001, record: 200_000 } });
  });

  test('an opening quote never closed on a long file: cut after `maxQuotedLines` lines, every later row read', async () => {
    const rows = ['id,v', '1,a', '"ab ,2'];
    for (let i = 3; i <= 50_000; i++) rows.push(`${i},v${i}`);
    const path = tmp.write('open-50k.csv', rows.join('\r\n') + '\r\n');
    const items = await collect({ name: 'p', path });
    expect(items).toHaveLength(50_000);
    expect(rejects(items)).toEqual([
      {
        ok: false,
        line: 3,
        record: 2,
        code: 'csv-quote',
        message: 'quoted field not closed within 100 line(s) (column "id"; `csv.maxQuotedLines`): line 3 rejected, reading resumed at line 4',
        raw: '"ab ,2',
      },
    ]);
    expect(items[2]).toMatchObject({ ok: true, data: { id: '3', v: 'v3' }, origin: { line: 4, record: 3 } });
  });

  test('a runaway quote that meets a later quoted field is cut at its own line, before the bound', async () => {
    const path = tmp.write('runaway.csv', 'id,v\n1,a\n2,"ab\n3,c\n4,"d, e"\n5,f\n');
    expect(brief(await collect({ name: 'p', path }))).toEqual([
      { ok: true, line: 2, record: 1, data: { id: '1', v: 'a' } },
      {
        ok: false,
        line: 3,
        record: 2,
        code: 'csv-quote',
        message:
          'quoted field not closed on its line (column "v"): it runs on to line 5, where a quote is followed by other text: line 3 rejected, reading resumed at line 4',
        raw: '2,"ab',
      },
      { ok: true, line: 4, record: 3, data: { id: '3', v: 'c' } },
      { ok: true, line: 5, record: 4, data: { id: '4', v: 'd, e' } },
      { ok: true, line: 6, record: 5, data: { id: '5', v: 'f' } },
    ]);
  });

  test('`csv.maxQuotedLines`: fields up to the bound load, a longer one is cut (its other lines are read as rows)', async () => {
    const text = 'id,v\n1,"a\nb\nc"\n2,"a\nb\nc\nd"\n3,z\n';
    const items = await collect({ name: 'p', path: tmp.write('bound.csv', text), csv: { maxQuotedLines: 3 } });
    expect(brief(items)).toEqual([
      { ok: true, line: 2, record: 1, data: { id: '1', v: 'a\nb\nc' } },
      {
        ok: false,
        line: 5,
        record: 2,
        code: 'csv-quote',
        message: 'quoted field not closed within 3 line(s) (column "v"; `csv.maxQuotedLines`): line 5 rejected, reading resumed at line 6',
        raw: '2,"a',
      },
      { ok: false, line: 6, record: 3, code: 'csv-ragged', message: 'expected 2 fields (header, line 1), got 1', raw: 'b' },
      { ok: false, line: 7, record: 4, code: 'csv-ragged', message: 'expected 2 fields (header, line 1), got 1', raw: 'c' },
      { ok: false, line: 8, record: 5, code: 'csv-syntax', message: 'quote character inside an unquoted field (column "id")', raw: 'd"' },
      { ok: true, line: 9, record: 6, data: { id: '3', v: 'z' } },
    ]);
    // the default bound is wide enough for ordinary multi-line notes
    expect((await collect({ name: 'p', path: tmp.write('bound2.csv', text) })).every((i) => i.ok)).toBe(true);
  });

  test('an invalid `csv.maxQuotedLines` is a configuration error', async () => {
    const path = tmp.write('opts.csv', 'a\n1\n');
    const err = await fatal({ name: 'p', path, csv: { maxQuotedLines: 0 } });
    expect(err.message).toContain('`maxQuotedLines` must be an integer ≥ 1');
    expect(err.issues[0]?.code).toBe('source-config');
  });

  test('a quote never closed on the last line, CRLF and a BOM: lines stay exact', async () => {
    const path = tmp.write('last.csv', '\ufeffid,v\r\n\r\n1,"a\r\nb"\r\n"x"y,2\r\n3,c\r\n4,"tail');
    expect(brief(await collect({ name: 'p', path }))).toEqual([
      { ok: true, line: 3, record: 1, data: { id: '1', v: 'a\r\nb' } },
      {
        ok: false,
        line: 5,
        record: 2,
        code: 'csv-quote',
        message:
          'closing quote not followed by a delimiter or the end of the line (column "id"), and the quoted field runs past the end of its line: line 5 rejected, reading resumed at line 6',
        raw: '"x"y,2',
      },
      { ok: true, line: 6, record: 3, data: { id: '3', v: 'c' } },
      { ok: false, line: 7, record: 4, code: 'csv-quote', message: 'quoted field never closed (column "v"): line 7 rejected', raw: '4,"tail' },
    ]);
  });

  test('skipEmptyLines: false — a cut leaves no phantom empty records; real empty lines still count', async () => {
    const path = tmp.write('noskip.csv', 'id,v\n1,"ab\n\n3,4\n');
    expect(brief(await collect({ name: 'p', path, csv: { skipEmptyLines: false } }))).toEqual([
      {
        ok: false,
        line: 2,
        record: 1,
        code: 'csv-quote',
        message: 'quoted field never closed (column "v"): line 2 rejected, reading resumed at line 3',
        raw: '1,"ab',
      },
      { ok: false, line: 3, record: 2, code: 'csv-ragged', message: 'expected 2 fields (header, line 1), got 1', raw: '' },
      { ok: true, line: 4, record: 3, data: { id: '3', v: '4' } },
    ]);
  });

  test('with `trim`, text after a closing quote costs its line (csv-parse alone dropped the rest of its buffer)', async () => {
    const path = tmp.write('trim.csv', 'id,v\n"x" y,1\n3,4\n5,6\n');
    expect(brief(await collect({ name: 'p', path, csv: { trim: true } }))).toEqual([
      {
        ok: false,
        line: 2,
        record: 1,
        code: 'csv-syntax',
        message: 'unexpected character after a closing quote (column "id"): line 2 rejected, reading resumed at line 3',
        raw: '"x" y,1',
      },
      { ok: true, line: 3, record: 2, data: { id: '3', v: '4' } },
      { ok: true, line: 4, record: 3, data: { id: '5', v: '6' } },
    ]);
  });

  test('with `trim`, a quote reopened after a closed one (`"" "a, b"`) costs its line, not the rows after it', async () => {
    // csv-parse keeps the first quote's `wasQuoting` in the second: its first byte is an error that dropped the rest of
    // csv-parse's buffer, and the quote it left open swallowed the rest of the file (0 of 999 rows were read)
    const rows = ['id,v', '1,"" "a, b"'];
    for (let i = 2; i <= 1000; i++) rows.push(`${i},x`);
    const path = tmp.write('trim-reopened.csv', rows.join('\n') + '\n');
    const items = await collect({ name: 'p', path, csv: { trim: true } });
    expect(rejects(items)).toEqual([
      {
        ok: false,
        line: 2,
        record: 1,
        code: 'csv-syntax',
        message: 'unexpected character after a closing quote (column "v"): line 2 rejected, reading resumed at line 3',
        raw: '1,"" "a, b"',
      },
    ]);
    expect(items.filter((i) => i.ok)).toHaveLength(999);
  });

  test('UTF-16LE with a BOM: the same rule', async () => {
    const path = tmp.write('u16.csv', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('id,v\r\n1,"ab\r\n2,b\r\n', 'utf16le')]));
    expect(brief(await collect({ name: 'p', path }))).toEqual([
      {
        ok: false,
        line: 2,
        record: 1,
        code: 'csv-quote',
        message: 'quoted field never closed (column "v"): line 2 rejected, reading resumed at line 3',
        raw: '1,"ab',
      },
      { ok: true, line: 3, record: 2, data: { id: '2', v: 'b' } },
    ]);
  });
});

describe('CSV: huge records are rejects, and say whether a quote is open', () => {
  const big = 'x'.repeat(CSV_MAX_RECORD_CHARS + 1024);

  test('a 4 MiB+ unquoted field: `value-too-large`, not "unclosed quote"; the next line is read; raw is an excerpt', async () => {
    const path = tmp.write('huge-unquoted.csv', `id,v\n1,${big}\n2,b\n`);
    const items = await collect({ name: 'p', path });
    expect(items.map((i) => [i.ok, i.origin.line, i.origin.record])).toEqual([
      [false, 2, 1],
      [true, 3, 2],
    ]);
    const r = items[0]!;
    if (r.ok) throw new Error('expected a reject');
    expect(r.issues[0]).toMatchObject({ code: 'value-too-large', location: { line: 2, record: 1 } });
    expect(r.issues[0]!.message).toBe(
      `record longer than ${CSV_MAX_RECORD_CHARS} bytes without a line break (column "v"; no open quote: a huge unquoted field, or not CSV): line 2 rejected, reading resumed at line 3 (raw: its first 65536 bytes)`,
    );
    expect(r.issues[0]!.message).not.toContain('quote is');
    expect(r.raw).toHaveLength(65_536);
  });

  test('a quote left open over 4 MiB on one line: `csv-quote`, naming the bound', async () => {
    const path = tmp.write('huge-quoted.csv', `id,v\n1,"${big}\n2,b\n`);
    const items = await collect({ name: 'p', path });
    expect(items.map((i) => [i.ok, i.origin.line])).toEqual([
      [false, 2],
      [true, 3],
    ]);
    const r = items[0]!;
    if (r.ok) throw new Error('expected a reject');
    expect(r.issues[0]).toMatchObject({ code: 'csv-quote' });
    expect(r.issues[0]!.message).toContain(`quoted field not closed within ${CSV_MAX_RECORD_CHARS} bytes (column "v")`);
  });

  test('in the header row both are fatal, with different messages', async () => {
    const unquoted = await fatal({ name: 'p', path: tmp.write('huge-header.csv', `${big}\n1\n`) });
    expect(unquoted.message).toContain(':1: cannot read the header row: record longer than');
    expect(unquoted.message).toContain('no open quote');
    expect(unquoted.issues[0]).toMatchObject({ severity: 'fatal', code: 'value-too-large', location: { line: 1 } });

    const quoted = await fatal({ name: 'p', path: tmp.write('open-header.csv', 'id,"v\n1,2\n3,4\n') });
    expect(quoted.message).toContain(':1: cannot read the header row: quoted field never closed (field 2)');
    expect(quoted.issues[0]).toMatchObject({ severity: 'fatal', code: 'csv-quote' });
    await expect(readHeader({ name: 'p', path: tmp.path('open-header.csv') })).rejects.toThrow(/cannot read the header row/);
  });
});

describe('CSV: source text in messages is escaped', () => {
  test('ANSI escapes in header names never reach a message raw', async () => {
    const path = tmp.write('ansi.csv', 'id,\u001b[31mv\u009b,\u001b[31mv\u009b\n1,2,3\n');
    const err = await fatal({ name: 'p', path });
    const text = `${err.message}\n${err.describe()}\n${err.issues.map((i) => i.message).join('\n')}`;
    expect(text).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
    expect(err.issues[0]!.message).toBe('duplicate column name "\\u001b[31mv\\u{9b}" in the header row (columns 2 and 3)');
  });

  test('a reject naming a column with control characters escapes it', async () => {
    const path = tmp.write('ansi-col.csv', 'id,\u001b]0;title\u0007\n1,"x"y\n');
    const [item] = await collect({ name: 'p', path });
    if (!item || item.ok) throw new Error('expected a reject');
    expect(item.issues[0]!.message).toContain('column "\\u001b]0;title\\u0007"');
    expect(item.issues[0]!.message).not.toMatch(/[\u0000-\u001f]/);
  });
});
