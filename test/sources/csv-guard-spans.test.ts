import { Readable } from 'node:stream';
import { parse as parseSync } from 'csv-parse/sync';
import { CsvError, type Options as CsvParseOptions } from 'csv-parse';
import { describe, expect, test } from 'vitest';
import { CSV_TRIM_CODE_POINTS, CsvQuoteGuard, type CsvSpan } from '../../src/sources/csv-quote-guard.js';

/*
 * Issue 23, item 4: the quote guard mirrors csv-parse's lexer without reading csv-parse's private state, and
 * hands the reader each record's span. These tests are the oracle: csv-parse's public output (records, their
 * `info.bytes`, its errors) against what the guard says.
 */

/** The options csv-source.ts gives csv-parse (and the guard). */
const OPTIONS: CsvParseOptions = {
  bom: true,
  delimiter: ',',
  quote: '"',
  escape: '"',
  encoding: 'utf8',
  skip_empty_lines: true,
  info: true,
  relax_column_count: true,
  skip_records_with_error: true,
  record_delimiter: ['\r\n', '\n', '\r'],
  comment: '#',
  comment_no_infix: true,
};
const LIMITS = { maxQuotedLines: 100, maxRecordBytes: 4 * 1024 * 1024, rawExcerptBytes: 64 * 1024 };

/** The guard's output bytes and spans for `text`, fed in chunks of `chunk` bytes. */
async function guard(text: string, options: CsvParseOptions = OPTIONS, chunk = 7): Promise<{ out: Buffer; spans: CsvSpan[] }> {
  const input = Buffer.from(text);
  const parts: Buffer[] = [];
  for (let i = 0; i < input.length; i += chunk) parts.push(input.subarray(i, i + chunk));
  const g = new CsvQuoteGuard(options, LIMITS);
  const outParts: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    Readable.from(parts)
      .pipe(g)
      .on('data', (b: Buffer) => outParts.push(b))
      .on('end', resolve)
      .on('error', reject);
  });
  const spans: CsvSpan[] = [];
  for (let s = g.spans.shift(); s !== undefined; s = g.spans.shift()) spans.push(s);
  return { out: Buffer.concat(outParts), spans };
}

/** csv-parse on the guard's output: each record's end offset, each error's offset and code. */
function parseOut(out: Buffer, options: CsvParseOptions = OPTIONS): { ends: number[]; errors: { bytes: number; code: string }[] } {
  const errors: { bytes: number; code: string }[] = [];
  const rows = parseSync(out, {
    ...options,
    on_skip: (err: CsvError | undefined) => {
      if (err !== undefined) errors.push({ bytes: Number(err.bytes), code: err.code });
    },
  }) as unknown as { info: { bytes: number } }[];
  return { ends: rows.map((r) => r.info.bytes), errors };
}

const at = (text: string, marker: string): number => Buffer.byteLength(text.slice(0, text.indexOf(marker)));

describe('CsvQuoteGuard spans', () => {
  test('each record csv-parse yields or drops has its span: true lines (CRLF in a quote counted once), bytes, first error line', async () => {
    const text = '\uFEFFid,note\r\n1,"a\r\nb"\r\n\r\n# a comment\r\n2,x"y\n3,"ok"';
    const { out, spans } = await guard(text);
    expect(out.equals(Buffer.from(text))).toBe(true);
    expect(spans.map(({ startLine, endLine, start, end, errorLine }) => ({ startLine, endLine, start, end, errorLine }))).toEqual([
      { startLine: 1, endLine: 1, start: 3, end: at(text, '1,"a'), errorLine: undefined },
      { startLine: 2, endLine: 3, start: at(text, '1,"a'), end: at(text, '\r\n# a'), errorLine: undefined },
      { startLine: 6, endLine: 6, start: at(text, '2,x'), end: at(text, '3,"ok'), errorLine: 6 },
      { startLine: 7, endLine: 7, start: at(text, '3,"ok'), end: Buffer.byteLength(text), errorLine: undefined },
    ]);
    const { ends, errors } = parseOut(out);
    expect(ends).toEqual([spans[0]!.end, spans[1]!.end, spans[3]!.end]);
    expect(errors.map((e) => e.code)).toEqual(['INVALID_OPENING_QUOTE']);
    // the error's offset falls after the previous record's end and before its own record's end
    expect(errors[0]!.bytes).toBeGreaterThanOrEqual(spans[1]!.end);
    expect(errors[0]!.bytes).toBeLessThan(spans[2]!.end);
  });

  test('with skipEmptyLines off an empty line is a record with a span; a cut is a span over the empty lines put in its place', async () => {
    const options = { ...OPTIONS, skip_empty_lines: false };
    const text = 'id,v\n\n"ab" ,2\nx,"never\n3,z\n';
    const { out, spans } = await guard(text, options);
    expect(spans.map((s) => [s.startLine, s.endLine, s.cut?.reason])).toEqual([
      [1, 1, undefined],
      [2, 2, undefined],
      [3, 3, 'stray'],
      [4, 4, 'unclosed'],
      [5, 5, undefined],
    ]);
    const { ends } = parseOut(out, options);
    // csv-parse reads one empty line per cut line (CRLF put in its place): each ends inside its cut's span
    expect(ends).toEqual([spans[0]!.end, spans[1]!.end, spans[2]!.end, spans[3]!.end, spans[4]!.end]);
  });
});

/** Code points around every Unicode space and line terminator (csv-parse 7 trims ECMAScript whitespace). */
const CANDIDATES: number[] = [];
for (const [from, to] of [
  [0x00, 0x3ff],
  [0x1680, 0x1680],
  [0x180e, 0x180e],
  [0x2000, 0x206f],
  [0x3000, 0x3000],
  [0xfeff, 0xfeff],
] as const) {
  for (let c = from; c <= to; c++) if (![0x0a, 0x0d, 0x22, 0x23, 0x2c].includes(c)) CANDIDATES.push(c);
}

/** csv-parse's errors for one line of text. */
function csvParseErrors(line: string, options: CsvParseOptions): string[] {
  const errors: string[] = [];
  parseSync(line, {
    ...options,
    on_skip: (err: CsvError | undefined) => {
      if (err !== undefined) errors.push(err.code);
    },
  });
  return errors;
}

describe('CsvQuoteGuard mirrors csv-parse without its private state', () => {
  const TRIM = { ...OPTIONS, trim: true };

  test('the guard trims exactly the characters csv-parse trims (fails when csv-parse changes its set)', () => {
    // before an opening quote, a trimmed character is skipped whole; any other makes the quote invalid
    const trimmedByCsvParse = CANDIDATES.filter((c) => csvParseErrors(`${String.fromCodePoint(c)}"a",b\n`, TRIM).length === 0);
    expect(trimmedByCsvParse).toEqual(CANDIDATES.filter((c) => CSV_TRIM_CODE_POINTS.includes(c)));
  });

  test('after a closing quote, the guard cuts a line exactly when csv-parse reports an error for it', async () => {
    const lines = CANDIDATES.map((c) => `"a"${String.fromCodePoint(c)},b`);
    const { spans } = await guard(['id,v', ...lines].join('\n') + '\n', TRIM, 4096);
    const cutLines = new Set(spans.filter((s) => s.cut !== undefined).map((s) => s.startLine));
    const guardCuts = lines.filter((_, i) => cutLines.has(i + 2));
    const csvParseErrs = lines.filter((line) => csvParseErrors(`${line}\n`, TRIM).length > 0);
    expect(guardCuts).toEqual(csvParseErrs);
    expect(csvParseErrs.length).toBeGreaterThan(0);
  });
});
