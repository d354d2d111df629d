import { afterAll, describe, expect, test } from 'vitest';
import { CareEtlError } from '../../src/core/issues.js';
import { openSource, readHeader, type SourceConfig } from '../../src/sources/open-source.js';
import { brief, collect, fixture, tempDir } from './helpers.js';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

async function fatal(cfg: SourceConfig): Promise<CareEtlError> {
  try {
    await collect(cfg);
  } catch (err) {
    expect(err).toBeInstanceOf(CareEtlError);
    return err as CareEtlError;
  }
  throw new Error('expected a CareEtlError');
}

describe('CSV: header, quoting, values', () => {
  test('header row gives the keys; quoted commas, newlines and quotes; values stay strings', async () => {
    const items = await collect({ name: 'patients', path: fixture('patients.csv') });
    expect(items.every((i) => i.ok)).toBe(true);
    expect(brief(items)).toEqual([
      {
        ok: true,
        line: 2,
        record: 1,
        data: { MRN: '00123', first_name: 'Ada', last_name: 'Lovelace', address: '12 Main St, Apt 4', notes: '', zip: '02139' },
      },
      {
        ok: true,
        line: 3,
        record: 2,
        data: {
          MRN: '00124',
          first_name: 'Alan',
          last_name: 'Turing',
          address: '1 Bletchley Park',
          notes: 'first line\nsecond line',
          zip: '01234',
        },
      },
      // the record after a two-line record starts on line 5
      {
        ok: true,
        line: 5,
        record: 3,
        data: { MRN: '00125', first_name: 'Grace', last_name: 'Hopper', address: 'Arlington, VA', notes: 'She said "hi"', zip: '22201' },
      },
      // line 6 is empty (skipped)
      {
        ok: true,
        line: 7,
        record: 4,
        data: { MRN: '00126', first_name: 'Edsger', last_name: 'Dijkstra', address: 'Austin', notes: '', zip: '' },
      },
    ]);
    const first = items[0];
    expect(first.ok && first.origin).toEqual({ source: 'patients', file: fixture('patients.csv'), line: 2, record: 1 });
  });

  test('custom delimiter `;`', async () => {
    const items = await collect({ name: 'p', path: fixture('patients-semicolon.csv'), csv: { delimiter: ';' } });
    expect(brief(items)).toEqual([
      { ok: true, line: 2, record: 1, data: { MRN: '00123', first_name: 'Ada', city: 'Paris; France' } },
      { ok: true, line: 3, record: 2, data: { MRN: '00124', first_name: 'Alan', city: 'London' } },
    ]);
  });

  test('.tsv defaults to a tab delimiter; commas are data', async () => {
    const items = await collect({ name: 'staff', path: fixture('staff.tsv') });
    expect(brief(items)).toEqual([
      { ok: true, line: 2, record: 1, data: { MRN: '00123', first_name: 'Ada', city: 'Paris, France' } },
      { ok: true, line: 3, record: 2, data: { MRN: '00124', first_name: 'Alan', city: 'Lon\tdon' } },
    ]);
  });

  test('explicit tab delimiter on a .txt file', async () => {
    const path = tmp.write('tabbed.txt', 'a\tb\n1\t2\n');
    expect(brief(await collect({ name: 't', path, csv: { delimiter: '\t' } }))).toEqual([{ ok: true, line: 2, record: 1, data: { a: '1', b: '2' } }]);
  });

  test('UTF-8 BOM is stripped: the first key is MRN', async () => {
    const path = tmp.write('bom.csv', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('MRN,name\n007,Bond\n')]));
    const items = await collect({ name: 'p', path });
    expect(brief(items)).toEqual([{ ok: true, line: 2, record: 1, data: { MRN: '007', name: 'Bond' } }]);
    expect(Object.keys((items[0] as { data: object }).data)[0]).toBe('MRN');
    expect(await readHeader({ name: 'p', path })).toEqual(['MRN', 'name']);
  });

  test('CRLF line endings with BOM: no stray \\r, correct lines', async () => {
    const path = tmp.write('crlf.csv', '\ufeffMRN,name,zip\r\n00123,Ada,02139\r\n\r\n00124,Alan,01234\r\n00125,Grace,');
    expect(brief(await collect({ name: 'p', path }))).toEqual([
      { ok: true, line: 2, record: 1, data: { MRN: '00123', name: 'Ada', zip: '02139' } },
      { ok: true, line: 4, record: 2, data: { MRN: '00124', name: 'Alan', zip: '01234' } },
      { ok: true, line: 5, record: 3, data: { MRN: '00125', name: 'Grace', zip: '' } },
    ]);
  });

  test('CRLF inside quoted fields: start lines of the following records stay right', async () => {
    // csv-parse's own line counter counts a CRLF inside quotes twice; the reader corrects it.
    const text = [
      'MRN,notes,zip', // 1
      '1,"a\r\nb\r\nc",02139', // 2-4
      '2,plain,01234', // 5
      '', // 6
      '3,"x\ny",1', // 7-8 (LF inside a CRLF file)
      '4,"p\r\nq",2', // 9-10
      '5,end,3', // 11
    ].join('\r\n');
    const path = tmp.write('crlf-multiline.csv', text);
    const items = await collect({ name: 'p', path });
    expect(items.map((i) => [i.origin.line, i.origin.record, i.ok])).toEqual([
      [2, 1, true],
      [5, 2, true],
      [7, 3, true],
      [9, 4, true],
      [11, 5, true],
    ]);
    expect((items[0] as { data: Record<string, unknown> }).data.notes).toBe('a\r\nb\r\nc');
  });

  test('mixed line endings (LF, CRLF, CR) leave no \\r in values', async () => {
    const path = tmp.write('mixed.csv', 'a,b\n1,2\r\n3,4\r5,6\n');
    expect(brief(await collect({ name: 'p', path }))).toEqual([
      { ok: true, line: 2, record: 1, data: { a: '1', b: '2' } },
      { ok: true, line: 3, record: 2, data: { a: '3', b: '4' } },
      { ok: true, line: 4, record: 3, data: { a: '5', b: '6' } },
    ]);
  });

  test('leading zeros, empty cells and look-alike numbers/dates are never cast', async () => {
    const path = tmp.write('values.csv', 'mrn,zip,dob,flag,amount\n00123,02139,1970-01-01,true,1e3\n,,,,\n');
    expect(brief(await collect({ name: 'p', path }))).toEqual([
      { ok: true, line: 2, record: 1, data: { mrn: '00123', zip: '02139', dob: '1970-01-01', flag: 'true', amount: '1e3' } },
      { ok: true, line: 3, record: 2, data: { mrn: '', zip: '', dob: '', flag: '', amount: '' } },
    ]);
  });

  test('quote, escape and trim options', async () => {
    const path = tmp.write('single-quote.csv', "id,name\n1,'O''Brien, Pat'\n2, 'x' \n");
    expect(brief(await collect({ name: 'p', path, csv: { quote: "'", trim: true } }))).toEqual([
      { ok: true, line: 2, record: 1, data: { id: '1', name: "O'Brien, Pat" } },
      { ok: true, line: 3, record: 2, data: { id: '2', name: 'x' } },
    ]);
    const esc = tmp.write('backslash.csv', 'id,name\n1,"say \\"hi\\""\n');
    expect(brief(await collect({ name: 'p', path: esc, csv: { escape: '\\' } }))).toEqual([
      { ok: true, line: 2, record: 1, data: { id: '1', name: 'say "hi"' } },
    ]);
  });

  test('comment lines are skipped and counted; `#` inside a field is data', async () => {
    const path = tmp.write('comments.csv', '# exported 2024-05-01\nid,address\n# a comment\n1,Apt #5\n\n# another\r\n2,Main St\n');
    expect(brief(await collect({ name: 'p', path, csv: { comment: '#' } }))).toEqual([
      { ok: true, line: 4, record: 1, data: { id: '1', address: 'Apt #5' } },
      { ok: true, line: 7, record: 2, data: { id: '2', address: 'Main St' } },
    ]);
  });

  test('skipEmptyLines: false reports an empty line as a one-field record', async () => {
    const path = tmp.write('empty-lines.csv', 'a,b\n1,2\n\n3,4\n');
    const items = await collect({ name: 'p', path, csv: { skipEmptyLines: false } });
    expect(brief(items)).toEqual([
      { ok: true, line: 2, record: 1, data: { a: '1', b: '2' } },
      { ok: false, line: 3, record: 2, code: 'csv-ragged', message: 'expected 2 fields (header, line 1), got 1', raw: '' },
      { ok: true, line: 4, record: 3, data: { a: '3', b: '4' } },
    ]);
  });

  test('`columns` for a file without a header row', async () => {
    const path = tmp.write('no-header.csv', '00123,Ada\n00124,Alan,extra\n');
    const items = await collect({ name: 'p', path, csv: { columns: ['mrn', 'name'] } });
    expect(brief(items)).toEqual([
      { ok: true, line: 1, record: 1, data: { mrn: '00123', name: 'Ada' } },
      { ok: false, line: 2, record: 2, code: 'csv-ragged', message: 'expected 2 fields (`csv.columns`), got 3', raw: '00124,Alan,extra' },
    ]);
    expect(await readHeader({ name: 'p', path, csv: { columns: ['mrn', 'name'] } })).toEqual(['mrn', 'name']);
  });

  test('latin1 encoding', async () => {
    const path = tmp.write('latin1.csv', Buffer.from('id,name\n1,Jos\xe9\n', 'latin1'));
    expect(brief(await collect({ name: 'p', path, csv: { encoding: 'latin1' } }))).toEqual([{ ok: true, line: 2, record: 1, data: { id: '1', name: 'José' } }]);
  });

  test('an empty file and a header-only file yield nothing', async () => {
    expect(await collect({ name: 'p', path: tmp.write('empty.csv', '') })).toEqual([]);
    const headerOnly = tmp.write('header-only.csv', 'a,b\r\n');
    expect(await collect({ name: 'p', path: headerOnly })).toEqual([]);
    expect(await readHeader({ name: 'p', path: headerOnly })).toEqual(['a', 'b']);
    expect(await readHeader({ name: 'p', path: tmp.path('empty.csv') })).toEqual([]);
  });
});

describe('CSV: ragged rows', () => {
  test('ragged rows are rejected with their lines; the other rows come through', async () => {
    const items = await collect({ name: 'patients', path: fixture('ragged.csv') });
    expect(brief(items)).toEqual([
      { ok: true, line: 2, record: 1, data: { MRN: '001', first_name: 'Ada', last_name: 'Lovelace', dob: '1815-12-10', zip: '02139' } },
      {
        ok: false,
        line: 3,
        record: 2,
        code: 'csv-ragged',
        message: 'expected 5 fields (header, line 1), got 7',
        raw: '002,Alan,Turing,1912-06-23,01234,extra,more',
      },
      { ok: true, line: 4, record: 3, data: { MRN: '003', first_name: 'Grace', last_name: 'Hopper', dob: '1906-12-09', zip: '22201' } },
      { ok: false, line: 5, record: 4, code: 'csv-ragged', message: 'expected 5 fields (header, line 1), got 2', raw: '004,Edsger' },
      { ok: true, line: 6, record: 5, data: { MRN: '005', first_name: 'Barbara', last_name: 'Liskov', dob: '1939-11-07', zip: '02139' } },
    ]);
    const reject = items[1];
    expect(reject.ok).toBe(false);
    if (!reject.ok) {
      expect(reject.issues[0]).toMatchObject({
        severity: 'error',
        code: 'csv-ragged',
        location: { file: fixture('ragged.csv'), line: 3, record: 2 },
      });
      // the message names no field value
      expect(reject.issues[0].message).not.toContain('Alan');
    }
  });

  test('a ragged multi-line record after empty CRLF lines: raw without the blank lines', async () => {
    const path = tmp.write('ragged-crlf.csv', 'a,b\r\n\r\n\r\n1,"x\r\ny",3\r\n4,5\r\n');
    expect(brief(await collect({ name: 'p', path }))).toEqual([
      { ok: false, line: 4, record: 1, code: 'csv-ragged', message: 'expected 2 fields (header, line 1), got 3', raw: '1,"x\r\ny",3' },
      { ok: true, line: 6, record: 2, data: { a: '4', b: '5' } },
    ]);
  });
});

describe('CSV: malformed quotes', () => {
  test('malformed quotes are rejected with line numbers and the raw record; parsing goes on', async () => {
    const items = await collect({ name: 'patients', path: fixture('bad-quote.csv') });
    expect(brief(items)).toEqual([
      { ok: true, line: 2, record: 1, data: { MRN: '001', name: 'Ada', notes: 'ok' } },
      {
        ok: false,
        line: 3,
        record: 2,
        code: 'csv-syntax',
        message: 'quote character inside an unquoted field (column "name")',
        raw: '002,Alan "The Enigma" Turing,fine',
      },
      { ok: true, line: 4, record: 3, data: { MRN: '003', name: 'Grace', notes: 'multi\nline note' } },
      // csv-parse would stay inside the quote after `"Edsger"x` to the end of the file: the guard cuts that line only
      {
        ok: false,
        line: 6,
        record: 4,
        code: 'csv-quote',
        message:
          'closing quote not followed by a delimiter or the end of the line (column "name"), and the quoted field runs past the end of its line: line 6 rejected, reading resumed at line 7',
        raw: '004,"Edsger"x,bad closing',
      },
      { ok: true, line: 7, record: 5, data: { MRN: '005', name: 'Barbara', notes: 'last' } },
    ]);
    const reject = items[1];
    if (!reject.ok) expect(reject.issues[0].message).not.toContain('Enigma');
  });

  test('consecutive malformed records, CRLF, multi-line records and blank lines around them', async () => {
    const text = [
      'id,name,note', // 1
      '1,ok,"a\r\nb"', // 2-3
      '2,bad "q" one,x', // 4
      '3,bad "q" two,y', // 5
      '', // 6
      '4,"multi\r\nline",z', // 7-8
      '5,"x"y,"p', // 9  (closing quote followed by y, and the field runs past the line: line 9 is cut)
      'q",w', // 10 (then read on its own: a quote inside an unquoted field)
      '6,fine,v', // 11
      '7,last "bad', // 12 (no final newline)
    ].join('\r\n');
    const path = tmp.write('bad-crlf.csv', text);
    expect(brief(await collect({ name: 'p', path }))).toEqual([
      { ok: true, line: 2, record: 1, data: { id: '1', name: 'ok', note: 'a\r\nb' } },
      { ok: false, line: 4, record: 2, code: 'csv-syntax', message: 'quote character inside an unquoted field (column "name")', raw: '2,bad "q" one,x' },
      { ok: false, line: 5, record: 3, code: 'csv-syntax', message: 'quote character inside an unquoted field (column "name")', raw: '3,bad "q" two,y' },
      { ok: true, line: 7, record: 4, data: { id: '4', name: 'multi\r\nline', note: 'z' } },
      {
        ok: false,
        line: 9,
        record: 5,
        code: 'csv-quote',
        message:
          'closing quote not followed by a delimiter or the end of the line (column "name"), and the quoted field runs past the end of its line: line 9 rejected, reading resumed at line 10',
        raw: '5,"x"y,"p',
      },
      { ok: false, line: 10, record: 6, code: 'csv-syntax', message: 'quote character inside an unquoted field (column "id")', raw: 'q",w' },
      { ok: true, line: 11, record: 7, data: { id: '6', name: 'fine', note: 'v' } },
      { ok: false, line: 12, record: 8, code: 'csv-syntax', message: 'quote character inside an unquoted field (column "name")', raw: '7,last "bad' },
    ]);
  });

  test('identical malformed rows one after the other are separate rejects', async () => {
    const path = tmp.write('dup-bad.csv', 'a,b\n1,x "y" z\n1,x "y" z\n2,ok\n');
    expect(brief(await collect({ name: 'p', path })).map((i) => [(i as { line: number }).line, (i as { ok: boolean }).ok])).toEqual([
      [2, false],
      [3, false],
      [4, true],
    ]);
  });

  test('a quote never closed: its line is rejected, the lines after it are read', async () => {
    expect(brief(await collect({ name: 'p', path: fixture('unclosed-quote.csv') }))).toEqual([
      { ok: true, line: 2, record: 1, data: { MRN: '001', name: 'Ada' } },
      {
        ok: false,
        line: 3,
        record: 2,
        code: 'csv-quote',
        message: 'quoted field never closed (column "name"): line 3 rejected, reading resumed at line 4',
        raw: '002,"Alan',
      },
      { ok: true, line: 4, record: 3, data: { MRN: '003', name: 'Grace' } },
    ]);
  });

  test('an unclosed quote over a long file costs its own line (`csv.maxQuotedLines`), not the source', async () => {
    const rows = ['id,note', '1,ok', '2,"never closed'];
    const filler = Array.from({ length: 45_000 }, (_, i) => `${i + 3},${'x'.repeat(95)}\n`).join('');
    const path = tmp.write('runaway.csv', rows.join('\n') + '\n' + filler);
    const items = await collect({ name: 'notes', path });
    expect(items).toHaveLength(45_002);
    expect(brief(items.slice(0, 3))).toEqual([
      { ok: true, line: 2, record: 1, data: { id: '1', note: 'ok' } },
      {
        ok: false,
        line: 3,
        record: 2,
        code: 'csv-quote',
        message: 'quoted field not closed within 100 line(s) (column "note"; `csv.maxQuotedLines`): line 3 rejected, reading resumed at line 4',
        raw: '2,"never closed',
      },
      { ok: true, line: 4, record: 3, data: { id: '3', note: 'x'.repeat(95) } },
    ]);
    expect(items.slice(2).every((i) => i.ok)).toBe(true);
    expect(items.at(-1)?.origin).toMatchObject({ line: 45_003, record: 45_002 });
  });

  test('a malformed header row is fatal', async () => {
    const path = tmp.write('bad-header.csv', 'id,"na"me\n1,2\n');
    const err = await fatal({ name: 'p', path });
    expect(err.message).toContain(`${path}:1: cannot read the header row`);
  });
});

describe('CSV: header problems are fatal', () => {
  test('duplicate and empty header names → CareEtlError naming file, line and names', async () => {
    const path = fixture('duplicate-header.csv');
    const err = await fatal({ name: 'patients', path });
    expect(err.exitCode).toBe(2);
    expect(err.message).toContain(`Source \`patients\`: ${path}:1: invalid column names`);
    expect(err.issues.map((i) => i.message)).toEqual([
      'duplicate column name "name" in the header row (columns 2 and 3)',
      'column 4 has an empty name in the header row',
    ]);
    expect(err.issues[0].location).toEqual({ file: path, line: 1 });
    expect(err.describe()).toContain('duplicate column name "name"');
    await expect(readHeader({ name: 'patients', path })).rejects.toThrow(/invalid column names/);
  });

  test('duplicate `csv.columns` are a configuration error', async () => {
    const path = tmp.write('cols.csv', '1,2\n');
    const err = await fatal({ name: 'p', path, csv: { columns: ['a', 'a'] } });
    expect(err.message).toContain('duplicate column name "a" in `csv.columns`');
  });

  test('invalid options are a configuration error', async () => {
    const path = tmp.write('opts.csv', 'a\n1\n');
    await expect(collect({ name: 'p', path, csv: { delimiter: '' } })).rejects.toThrow(/invalid csv options: `delimiter`/);
    await expect(collect({ name: 'p', path, csv: { encoding: 'klingon' as BufferEncoding } })).rejects.toThrow(/not a Node.js encoding/);
  });
});

describe('CSV: files', () => {
  test('a missing file is fatal', async () => {
    const path = tmp.path('nope.csv');
    const err = await fatal({ name: 'patients', path });
    expect(err.message).toBe(`Source \`patients\`: ${path}: file not found: ${path}`);
    expect(err.exitCode).toBe(2);
    expect(err.issues[0]).toMatchObject({ code: 'source-not-found', location: { file: path } });
  });

  test('a directory is fatal', async () => {
    const err = await fatal({ name: 'p', path: tmp.path(''), format: 'csv' });
    expect(err.message).toContain('not a regular file');
  });

  test('breaking out early closes the file; iterating again starts over', async () => {
    const source = openSource({ name: 'p', path: fixture('patients.csv') });
    for await (const item of source) {
      expect(item.origin.record).toBe(1);
      break;
    }
    let n = 0;
    for await (const _ of source) n++;
    expect(n).toBe(4);
  });

  test('an aborted signal stops the iteration', async () => {
    const ac = new AbortController();
    const source = openSource({ name: 'p', path: fixture('patients.csv') }, { signal: ac.signal });
    const seen: number[] = [];
    await expect(
      (async () => {
        for await (const item of source) {
          seen.push(item.origin.record);
          ac.abort();
        }
      })(),
    ).rejects.toMatchObject({ name: 'AbortError' });
    expect(seen.length).toBeLessThan(4);
    // already aborted: iteration does not start
    await expect(
      (async () => {
        for await (const _ of source) expect.unreachable();
      })(),
    ).rejects.toMatchObject({ name: 'AbortError' });
  });
});
