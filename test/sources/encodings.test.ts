import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { afterAll, describe, expect, test } from 'vitest';
import { CareEtlError } from '../../src/core/issues.js';
import { schemaJson } from '../../src/schemas/schema-files.js';
import { ACCEPTED_ENCODINGS, DecodeToUtf8, resolveEncoding, type InvalidBytes } from '../../src/sources/decode-stream.js';
import { checkSource, readHeader } from '../../src/sources/open-source.js';
import { brief, collect, fixture, tempDir } from './helpers.js';

/*
 * Issue 16 (encodings): `csv.encoding` reads Windows-1252, ISO-8859-x and UTF-16 (LE/BE, byte-order mark) through
 * a UTF-8 transcoding stage (src/sources/decode-stream.ts); bytes not valid in the encoding reject the record
 * holding them with the byte offset and line, never mojibake. Fixtures: test/fixtures/sources/encodings/
 * (written by make-fixtures.mjs there).
 */

const tmp = tempDir();
afterAll(() => tmp.cleanup());

const enc = (name: string) => fixture(`encodings/${name}`);

async function fatal(cfg: Parameters<typeof collect>[0]): Promise<CareEtlError> {
  try {
    await collect(cfg);
  } catch (err) {
    if (err instanceof CareEtlError) return err;
    throw err;
  }
  throw new Error('expected a fatal error');
}

describe('Windows exports read with their exact characters', () => {
  test('Windows-1252 (`csv.encoding: windows-1252`): accents, curly quotes 0x93/0x94, ’ 0x92 and € 0x80', async () => {
    expect(brief(await collect({ name: 'p', path: enc('patients-windows-1252.csv'), csv: { encoding: 'windows-1252' } }))).toEqual([
      { ok: true, line: 2, record: 1, data: { MRN: '000101', FIRST: 'José', LAST: 'Muñoz', NICK: '', ADDRESS: 'Calle Año Nuevo 7' } },
      { ok: true, line: 3, record: 2, data: { MRN: '000102', FIRST: 'Jürgen', LAST: 'Müller-Lüdenscheidt', NICK: '', ADDRESS: 'Königstraße 12' } },
      { ok: true, line: 4, record: 3, data: { MRN: '000103', FIRST: 'Beatriz', LAST: 'O’Neil', NICK: '“Bea”', ADDRESS: '1 €uro Plaza' } },
      { ok: true, line: 5, record: 4, data: { MRN: '000104', FIRST: 'Renée', LAST: 'Ångström', NICK: '', ADDRESS: 'Île-de-France, 2' } },
    ]);
  });

  test('`cp1252` is the same code page', async () => {
    const a = await collect({ name: 'p', path: enc('patients-windows-1252.csv'), csv: { encoding: 'cp1252' } });
    const b = await collect({ name: 'p', path: enc('patients-windows-1252.csv'), csv: { encoding: 'windows-1252' } });
    expect(a).toEqual(b);
  });

  test('UTF-16LE with a byte-order mark and no `csv.encoding`: bytes that look like a line feed or a quote across two characters stay text', async () => {
    expect(brief(await collect({ name: 'p', path: enc('patients-utf-16le.csv') }))).toEqual([
      { ok: true, line: 2, record: 1, data: { MRN: '000201', FIRST: 'Thị', LAST: 'Nguyễn', NICK: '', ADDRESS: 'Phố Huế 12' } },
      { ok: true, line: 3, record: 2, data: { MRN: '000202', FIRST: 'Łukasz', LAST: 'Żółć', NICK: '', ADDRESS: 'ul. Długa 5, m. 3' } },
      { ok: true, line: 4, record: 3, data: { MRN: '000203', FIRST: 'Sigríður', LAST: 'Ólafsdóttir', NICK: '“Sigga”', ADDRESS: 'Laugavegur 1 😀' } },
      { ok: true, line: 5, record: 4, data: { MRN: '000204', FIRST: 'Tamil', LAST: 'ਅĀ Jones', NICK: '∀Ā', ADDRESS: 'multi\r\nline' } },
    ]);
    expect(await readHeader({ name: 'p', path: enc('patients-utf-16le.csv') })).toEqual(['MRN', 'FIRST', 'LAST', 'NICK', 'ADDRESS']);
  });

  test('UTF-16BE: by its byte-order mark, by `csv.encoding: utf-16be`, and guessed for `utf-16` without a mark', async () => {
    const text = 'MRN,NAME\r\n1,Zoë 😀\r\n2,"a\r\nb"\r\n';
    const be = Buffer.from(text, 'utf16le').swap16();
    const expected = [
      { ok: true, line: 2, record: 1, data: { MRN: '1', NAME: 'Zoë 😀' } },
      { ok: true, line: 3, record: 2, data: { MRN: '2', NAME: 'a\r\nb' } },
    ];
    expect(brief(await collect({ name: 'p', path: tmp.write('be-bom.csv', Buffer.concat([Buffer.from([0xfe, 0xff]), be])) }))).toEqual(expected);
    expect(brief(await collect({ name: 'p', path: tmp.write('be.csv', be), csv: { encoding: 'utf-16be' } }))).toEqual(expected);
    expect(brief(await collect({ name: 'p', path: tmp.write('be-guess.csv', be), csv: { encoding: 'utf-16' } }))).toEqual(expected);
    expect(brief(await collect({ name: 'p', path: tmp.write('le-guess.csv', Buffer.from(text, 'utf16le')), csv: { encoding: 'utf-16' } }))).toEqual(expected);
  });

  test('ISO-8859-15 has € at 0xA4 where ISO-8859-1 (`latin1`) has ¤', async () => {
    const path = tmp.write('iso15.csv', Buffer.from([...Buffer.from('id,v\n1,'), 0xa4, 0xbd, 0x0a]));
    expect((await collect({ name: 'p', path, csv: { encoding: 'iso-8859-15' } }))[0]).toMatchObject({ ok: true, data: { v: '€œ' } });
    expect((await collect({ name: 'p', path, csv: { encoding: 'latin1' } }))[0]).toMatchObject({ ok: true, data: { v: '¤½' } });
  });

  test('a UTF-8 byte-order mark decides over `csv.encoding`', async () => {
    const path = tmp.write('bom8.csv', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('id,v\n1,José\n')]));
    expect(brief(await collect({ name: 'p', path, csv: { encoding: 'windows-1252' } }))).toEqual([
      { ok: true, line: 2, record: 1, data: { id: '1', v: 'José' } },
    ]);
  });

  test('a UTF-16 byte-order mark decides over `csv.encoding` too, and an invalid byte then names the mark', async () => {
    const body = Buffer.from('id,v\r\n1,Zoë\r\n2,a\ud800\r\n', 'utf16le');
    const items = brief(
      await collect({ name: 'p', path: tmp.write('bom16.csv', Buffer.concat([Buffer.from([0xff, 0xfe]), body])), csv: { encoding: 'windows-1252' } }),
    );
    expect(items).toEqual([
      { ok: true, line: 2, record: 1, data: { id: '1', v: 'Zoë' } },
      {
        ok: false,
        line: 3,
        record: 2,
        code: 'encoding-invalid',
        message:
          'bytes 0x00 0xD8 at offset 34 (line 3): a lone UTF-16LE surrogate (half of a character); the file starts with a UTF-16LE byte-order mark, which decides over `csv.encoding` `windows-1252`: it is damaged, or not UTF-16LE throughout',
        raw: '2,a\ufffd',
      },
    ]);
  });

  test('without `csv.encoding` a file is UTF-8: the same bytes as before, a BOM dropped', async () => {
    const path = tmp.write('utf8.csv', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('id,v\r\n1,Zoë 😀\r\n')]));
    expect(brief(await collect({ name: 'p', path }))).toEqual([{ ok: true, line: 2, record: 1, data: { id: '1', v: 'Zoë 😀' } }]);
  });
});

describe('bytes not valid in the encoding: the record holding them is rejected with the offset and line', () => {
  test('0x81 in a Windows-1252 file: that row only', async () => {
    const items = brief(await collect({ name: 'p', path: enc('invalid-windows-1252.csv'), csv: { encoding: 'windows-1252' } }));
    expect(items).toEqual([
      { ok: true, line: 2, record: 1, data: { MRN: '000301', FIRST: 'José', LAST: 'Muñoz' } },
      {
        ok: false,
        line: 3,
        record: 2,
        code: 'encoding-invalid',
        message:
          'byte 0x81 at offset 47 (line 3): not defined in Windows-1252; the file is damaged or not Windows-1252 throughout: set `csv.encoding` to the encoding the export was written in (e.g. `utf-8`)',
        raw: '000302,Ana,M\ufffdller',
      },
      { ok: true, line: 4, record: 3, data: { MRN: '000303', FIRST: 'Zoë', LAST: 'Brontë' } },
    ]);
    expect(readFileSync(enc('invalid-windows-1252.csv'))[47]).toBe(0x81);
  });

  test('each byte Windows-1252 leaves undefined is one', async () => {
    for (const b of [0x81, 0x8d, 0x8f, 0x90, 0x9d]) {
      const path = tmp.write(`undef-${b}.csv`, Buffer.from([...Buffer.from('id,v\n1,a'), b, 0x0a, ...Buffer.from('2,b\n')]));
      const items = await collect({ name: 'p', path, csv: { encoding: 'windows-1252' } });
      expect(items.map((i) => (i.ok ? 'ok' : i.issues[0].message.split(';')[0]))).toEqual([
        `byte 0x${b.toString(16).toUpperCase()} at offset 8 (line 2): not defined in Windows-1252`,
        'ok',
      ]);
    }
  });

  test('a Windows-1252 byte in a UTF-8 file (no `csv.encoding`): the line of the byte inside a multi-line record', async () => {
    const items = brief(await collect({ name: 'p', path: enc('invalid-utf-8.csv') }));
    expect(items).toEqual([
      { ok: true, line: 2, record: 1, data: { MRN: '000401', FIRST: 'José', LAST: 'Muñoz', ADDRESS: 'Calle 1' } },
      { ok: true, line: 3, record: 2, data: { MRN: '000402', FIRST: 'Zoë', LAST: 'Brontë', ADDRESS: 'Haworth' } },
      {
        ok: false,
        line: 4,
        record: 3,
        code: 'encoding-invalid',
        message:
          'byte 0xE9 at offset 107 (line 5): not valid UTF-8; UTF-8 is the default: if the export was written in another encoding, set `csv.encoding` (e.g. `windows-1252`)',
        raw: '000403,Ana,Ruiz,"Calle 2\nCaf\ufffd"',
      },
      { ok: true, line: 6, record: 4, data: { MRN: '000404', FIRST: 'Jürgen', LAST: 'Müller', ADDRESS: 'Berlin' } },
    ]);
    expect(readFileSync(enc('invalid-utf-8.csv'))[107]).toBe(0xe9);
  });

  test('declared `utf-8`: the advice does not tell to set what is set', async () => {
    const [item] = await collect({
      name: 'p',
      path: tmp.write('u8.csv', Buffer.from([...Buffer.from('id,v\n1,'), 0xc3, 0x28, 0x0a])),
      csv: { encoding: 'utf-8' },
    });
    expect(item.ok ? '' : item.issues[0].message).toBe(
      'byte 0xC3 at offset 7 (line 2): not valid UTF-8; the file is damaged or not UTF-8 throughout: set `csv.encoding` to the encoding the export was written in (e.g. `windows-1252`)',
    );
  });

  test('UTF-16: a lone surrogate and an odd last byte', async () => {
    const body = Buffer.from('id,v\n1,a\ud800b\n2,c\n', 'utf16le');
    const items = brief(await collect({ name: 'p', path: tmp.write('lone.csv', Buffer.concat([Buffer.from([0xff, 0xfe]), body, Buffer.from([0x33])])) }));
    expect(items).toEqual([
      {
        ok: false,
        line: 2,
        record: 1,
        code: 'encoding-invalid',
        message: expect.stringMatching(/^bytes 0x00 0xD8 at offset 18 \(line 2\): a lone UTF-16LE surrogate/),
        raw: '1,a\ufffdb',
      },
      { ok: true, line: 3, record: 2, data: { id: '2', v: 'c' } },
      {
        ok: false,
        line: 4,
        record: 3,
        code: 'encoding-invalid',
        message: expect.stringMatching(/^byte 0x33 at offset 32 \(line 4\): an odd last byte/),
        raw: '\ufffd',
      },
    ]);
  });

  test('an undefined byte of an ISO code page (0xA5 in ISO-8859-3)', async () => {
    const [item] = await collect({
      name: 'p',
      path: tmp.write('iso3.csv', Buffer.from([...Buffer.from('id,v\n1,'), 0xa5, 0x0a])),
      csv: { encoding: 'iso-8859-3' },
    });
    expect(item.ok ? '' : item.issues[0].message).toMatch(/^byte 0xA5 at offset 7 \(line 2\): not defined in ISO-8859-3;/);
  });

  test('several in one record: the first is named, the others counted', async () => {
    const [item] = await collect({ name: 'p', path: tmp.write('many.csv', Buffer.from([...Buffer.from('id,v\n1,'), 0xff, 0x41, 0xfe, 0x0a])) });
    expect(item.ok ? '' : item.issues[0].message).toMatch(/^byte 0xFF at offset 7 \(line 2\): not valid UTF-8 \(and 1 more in this record\); /);
  });

  test('a UTF-8 character cut by the end of the file', async () => {
    const items = brief(await collect({ name: 'p', path: tmp.write('cut.csv', Buffer.from([...Buffer.from('id,v\n1,a\n2,'), 0xe2, 0x82])) }));
    expect(items[1]).toMatchObject({
      ok: false,
      line: 3,
      record: 2,
      code: 'encoding-invalid',
      message: expect.stringMatching(/^bytes 0xE2 0x82 at offset 11 \(line 3\): the file ends inside a UTF-8 character; /),
    });
  });

  test('in the header row: fatal, before any record (also for `checkSource`)', async () => {
    const cfg = {
      name: 'patients',
      path: tmp.write('head.csv', Buffer.from([...Buffer.from('id,n'), 0x81, 0x0a, ...Buffer.from('1,a\n')])),
      csv: { encoding: 'windows-1252' },
    };
    const err = await fatal(cfg);
    expect(err.message).toBe(
      `Source \`patients\`: ${cfg.path}:1: cannot read the header row: byte 0x81 at offset 4 (line 1): not defined in Windows-1252; the file is damaged or not Windows-1252 throughout: set \`csv.encoding\` to the encoding the export was written in (e.g. \`utf-8\`)`,
    );
    expect(err.issues[0]).toMatchObject({ code: 'encoding-invalid', location: { line: 1 } });
    await expect(checkSource(cfg)).rejects.toThrow(/byte 0x81 at offset 4 \(line 1\)/);
  });

  test('in a comment line: no record holds it, nothing is rejected', async () => {
    const path = tmp.write('comment.csv', Buffer.from([...Buffer.from('id,v\n# caf'), 0xe9, 0x0a, ...Buffer.from('1,a\n')]));
    expect(brief(await collect({ name: 'p', path, csv: { comment: '#' } }))).toEqual([{ ok: true, line: 3, record: 1, data: { id: '1', v: 'a' } }]);
  });

  test('a Windows-1252 export read as UTF-8: every row rejected, each with its own line (one chunk holds thousands)', async () => {
    // every third record is quoted over two lines, the byte on its second
    const rows = Array.from({ length: 3000 }, (_, i) => Buffer.from(i % 3 === 0 ? `${i},"a\r\nJos\xe9"\r\n` : `${i},Jos\xe9\r\n`, 'latin1'));
    const items = await collect({ name: 'p', path: tmp.write('cp1252-as-utf8.csv', Buffer.concat([Buffer.from('id,v\r\n'), ...rows])) });
    let line = 2;
    let offset = 6;
    const expected = rows.map((row, i) => {
      const lines = i % 3 === 0 ? 2 : 1;
      const at = `${line}: byte 0xE9 at offset ${offset + row.indexOf(0xe9)} (line ${line + lines - 1}): not valid UTF-8;`;
      offset += row.length;
      line += lines;
      return at;
    });
    expect(items.map((i) => (i.ok ? 'ok' : `${i.origin.line}: ${i.issues[0].message.split(' UTF-8 is')[0]}`))).toEqual(expected);
  });

  test('an unknown encoding name is a configuration error naming the source and the accepted names', async () => {
    const err = await fatal({ name: 'patients', path: enc('patients-windows-1252.csv'), csv: { encoding: 'ebcdic' } });
    expect(err.message).toContain('Source `patients`');
    expect(err.message).toContain(
      '`encoding` "ebcdic" is not a Node.js encoding or code page care-etl reads (expected one of utf-8, utf8, utf-16, utf-16le, utf-16be, windows-1252, cp1252, latin1, iso-8859-1,',
    );
    expect(err.issues[0]?.code).toBe('source-config');
  });
});

test('the mapping schema lists the encodings the reader accepts', () => {
  type Props = { properties: Record<string, { enum?: string[]; properties?: Props['properties'] }> };
  const find = (node: unknown): string[] | undefined => {
    if (node === null || typeof node !== 'object') return undefined;
    const csv = (node as Props).properties?.csv?.properties?.encoding?.enum;
    return (
      csv ??
      Object.values(node)
        .map(find)
        .find((e) => e !== undefined)
    );
  };
  const listed = find(schemaJson('mapping.schema.json'))!;
  // the lower-case names exactly, then usual upper-case spellings of some of them (the reader ignores case)
  expect(listed.slice(0, ACCEPTED_ENCODINGS.length)).toEqual([...ACCEPTED_ENCODINGS]);
  for (const extra of listed.slice(ACCEPTED_ENCODINGS.length)) expect(ACCEPTED_ENCODINGS).toContain(extra.toLowerCase());
});

describe('NDJSON and JSON: UTF-8, or UTF-16 with a byte-order mark', () => {
  test('NDJSON: a line holding an invalid byte is a reject with its line; UTF-16LE with a BOM is read', async () => {
    const bad = tmp.write('bad.ndjson', Buffer.from([...Buffer.from('{"n":"José"}\r\n{"n":"Jos'), 0xe9, ...Buffer.from('"}\r\n{"n":"ok"}\r\n')]));
    expect(brief(await collect({ name: 'p', path: bad }))).toEqual([
      { ok: true, line: 1, record: 1, data: { n: 'José' } },
      {
        ok: false,
        line: 2,
        record: 2,
        code: 'encoding-invalid',
        message: 'byte 0xE9 at offset 24 (line 2): not valid UTF-8; this format is read as UTF-8 (or UTF-16 with a byte-order mark): convert the file to UTF-8',
        raw: '{"n":"Jos\ufffd"}',
      },
      { ok: true, line: 3, record: 3, data: { n: 'ok' } },
    ]);
    const u16 = tmp.write('u16.ndjson', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('{"n":"ਅĀ"}\n{"n":"Żółć"}\n', 'utf16le')]));
    expect(brief(await collect({ name: 'p', path: u16 }))).toEqual([
      { ok: true, line: 1, record: 1, data: { n: 'ਅĀ' } },
      { ok: true, line: 2, record: 2, data: { n: 'Żółć' } },
    ]);
  });

  test('JSON: an invalid byte is fatal with its offset and line (streamed and whole-file readers, and checkSource)', async () => {
    const path = tmp.write('bad.json', Buffer.from([...Buffer.from('[\n{"n":"a"},\n{"n":"Jos'), 0xe9, ...Buffer.from('"}\n]\n')]));
    for (const records of [undefined, '$[n != "x"]']) {
      const err = await fatal({ name: 'staff', path, records });
      expect(err.message).toMatch(/^Source `staff`: .*bad\.json:3: byte 0xE9 at offset 22 \(line 3\): not valid UTF-8; /);
      expect(err.issues[0]?.code).toBe('encoding-invalid');
    }
    await expect(checkSource({ name: 'staff', path })).rejects.toThrow(/offset 22 \(line 3\)/);
    const u16 = tmp.write('u16.json', Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from('[{"n":"Ólafsdóttir"}]', 'utf16le').swap16()]));
    expect(brief(await collect({ name: 'p', path: u16 }))).toEqual([{ ok: true, line: undefined, record: 1, data: { n: 'Ólafsdóttir' } }]);
    await checkSource({ name: 'p', path: u16 });
  });
});

/** Feeds `bytes` to a decoder in pieces of `size` bytes (the last may be shorter). */
async function decodeInPieces(encoding: string | undefined, bytes: Buffer, size: number): Promise<{ text: string; invalid: InvalidBytes[] }> {
  const pieces: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += size) pieces.push(bytes.subarray(i, i + size));
  const decoder = new DecodeToUtf8(resolveEncoding(encoding)!);
  const out: Buffer[] = [];
  for await (const chunk of Readable.from(pieces, { objectMode: false }).pipe(decoder)) out.push(chunk as Buffer);
  return { text: Buffer.concat(out).toString('utf8'), invalid: decoder.invalid };
}

describe('the decoder does not depend on where chunks end', () => {
  // 2-, 3- and 4-byte UTF-8 characters, surrogate pairs in UTF-16, CRLF split across chunks.
  const text = 'id,v\r\nJosé Ñ “x” €\r\n大塚 😀𝄞\rZoë\n';
  const invalidCases: [string, Buffer][] = [
    [
      'utf-8',
      Buffer.concat([
        Buffer.from('ab\r\n'),
        Buffer.from([0xe2, 0x82]),
        Buffer.from('c\n'),
        Buffer.from([0xf0, 0x9f, 0x98]),
        Buffer.from('\r\nd'),
        Buffer.from([0xc0, 0xaf, 0xed, 0xa0, 0x80, 0xe2]),
      ]),
    ],
    [
      'utf-16le',
      Buffer.concat([Buffer.from('a\r\nb', 'utf16le'), Buffer.from([0x00, 0xdc, 0x00, 0xd8]), Buffer.from('\nc', 'utf16le'), Buffer.from([0x00, 0xd8, 0x41])]),
    ],
    ['windows-1252', Buffer.from([0x61, 0x0d, 0x81, 0x0a, 0x8d, 0x80, 0x0d, 0x0d, 0x90])],
  ];

  test('valid text comes out the same for every piece size', async () => {
    const inputs: [string, Buffer][] = [
      ['utf-8', Buffer.from(text)],
      ['utf-16le', Buffer.from(text, 'utf16le')],
      ['utf-16be', Buffer.from(text, 'utf16le').swap16()],
    ];
    for (const [encoding, bytes] of inputs) {
      for (let size = 1; size <= 7; size++) {
        const r = await decodeInPieces(encoding, bytes, size);
        expect({ encoding, size, text: r.text, invalid: r.invalid }).toEqual({ encoding, size, text, invalid: [] });
      }
    }
  });

  test('real files over many 64 KiB chunks: multi-byte characters across chunk ends are not invalid', async () => {
    const rows = Array.from({ length: 20_000 }, (_, i) => `${i},Zoë 😀 大塚${'é'.repeat(i % 7)}`);
    const text = `id,v\r\n${rows.join('\r\n')}\r\n`;
    for (const [name, bytes, encoding] of [
      ['big8.csv', Buffer.from(text), undefined],
      ['big16.csv', Buffer.from(text, 'utf16le'), 'utf-16le'],
    ] as const) {
      const items = await collect({ name: 'p', path: tmp.write(name, bytes), csv: { encoding } });
      expect(items.filter((i) => !i.ok)).toEqual([]);
      expect(items.map((i) => (i.ok ? `${i.data.id},${i.data.v as string}` : ''))).toEqual(rows);
      expect(items[19_999]?.origin.line).toBe(20_001);
    }
  });

  test('invalid bytes are found at the same offsets and lines for every piece size', async () => {
    for (const [encoding, bytes] of invalidCases) {
      const whole = await decodeInPieces(encoding, bytes, bytes.length);
      expect(whole.invalid.length).toBeGreaterThan(1);
      for (let size = 1; size <= 7; size++) {
        const r = await decodeInPieces(encoding, bytes, size);
        expect({ encoding, size, ...r }).toEqual({ encoding, size, ...whole });
      }
    }
  });

  test('offsets and lines of the invalid bytes, and U+FFFD in their place', async () => {
    const where = async (encoding: string) => {
      const r = await decodeInPieces(encoding, invalidCases.find((c) => c[0] === encoding)![1], 3);
      return { text: r.text, at: r.invalid.map((i) => `${i.offset}:${i.line}:${i.bytes.toString('hex')}`) };
    };
    // Node's own decoder agrees on where the U+FFFDs go (one per maximal malformed subpart).
    expect(await where('utf-8')).toEqual({
      text: invalidCases[0][1].toString('utf8'),
      at: ['4:2:e282', '8:3:f09f98', '14:4:c0', '15:4:af', '16:4:ed', '17:4:a0', '18:4:80', '19:4:e2'],
    });
    expect(await where('utf-16le')).toEqual({ text: 'a\r\nb\ufffd\ufffd\nc\ufffd\ufffd', at: ['8:2:00dc', '10:2:00d8', '16:3:00d8', '18:3:41'] });
    expect(await where('windows-1252')).toEqual({ text: 'a\r\ufffd\n\ufffd€\r\r\ufffd', at: ['2:2:81', '4:3:8d', '8:5:90'] });
  });
});
