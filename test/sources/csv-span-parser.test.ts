/**
 * The CSV reader's split of the common dialect (src/sources/csv-span-parser.ts) against csv-parse as oracle:
 *   - one record: whatever `splitRecord` splits, csv-parse reads as that one record, without an error; every
 *     well-formed record is split (none left to csv-parse);
 *   - whole files (clean and malformed lines, quoted line breaks, LF / CRLF / CR, empty lines, comment-like lines, a
 *     BOM, a last line without its break, `skipEmptyLines` on and off, a small `maxQuotedLines`), in the common
 *     dialect and in those csv-parse parses span by span (`comment`, `trim`, a two-character or non-ASCII delimiter,
 *     an escape other than the quote): the reader gives the very same items — rows, lines, record numbers, rejects
 *     with their words and raw text — as csv-parse reading the file as a stream (`readCsv`'s `stream` path).
 * Seed: CARE_PROPERTY_SEED (default fixed).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { parse } from 'csv-parse/sync';
import { afterAll, describe, expect, it } from 'vitest';
import { readCsv, type CsvParsePath } from '../../src/sources/csv-source.js';
import { plainDialectOf } from '../../src/sources/csv-quote-guard.js';
import { splitRecord } from '../../src/sources/csv-span-parser.js';
import type { SourceConfig, SourceItem } from '../../src/sources/types.js';

const SEED = Number(process.env.CARE_PROPERTY_SEED ?? 20_251_126);
const DIALECT = { delimiter: ',', quote: '"' };

const plainChar = fc.constantFrom('a', 'b', 'Z', '0', ' ', 'é', '€', '😀', '\t', ';', "'");
const anyChar = fc.constantFrom('a', 'b', ' ', 'é', '😀', ',', '"', '\r', '\n', '\r\n', ';');
const plainField = fc.array(plainChar, { maxLength: 6 }).map((cs) => ({ text: cs.join(''), value: cs.join('') }));
const quotedField = fc.array(anyChar, { maxLength: 6 }).map((cs) => ({ text: `"${cs.join('').replaceAll('"', '""')}"`, value: cs.join('') }));
const field = fc.oneof(plainField, quotedField);
/** A record's text (no final break) and its fields. */
const record = fc.array(field, { minLength: 1, maxLength: 5 }).map((fs) => ({ text: fs.map((f) => f.text).join(','), fields: fs.map((f) => f.value) }));
/** Broken quotes, as exports have them. */
const malformed = fc.constantFrom('"ab" ,x', '"ab,x', 'ab"c,x', '"ab"x,y', 'a,"b""', '"a"b"', 'x,""y', '"', 'a,"', '""""a');

/** csv-parse on the record's line (its break included, as the reader hands it a span). */
function csvParse(text: string): { records: string[][]; errors: string[] } {
  const errors: string[] = [];
  const records = parse(Buffer.from(`${text}\n`), {
    bom: false,
    relax_column_count: true,
    skip_records_with_error: true,
    skip_empty_lines: false,
    record_delimiter: ['\r\n', '\n', '\r'],
    on_skip: (err) => {
      if (err) errors.push(err.code);
    },
  }) as string[][];
  return { records, errors };
}

describe('splitRecord', () => {
  it('splits every well-formed record as csv-parse reads it', () => {
    fc.assert(
      fc.property(record, ({ text, fields }) => {
        expect(splitRecord(text, DIALECT)).toEqual(fields);
        expect(csvParse(text)).toEqual({ records: [fields], errors: [] });
      }),
      { seed: SEED, numRuns: 500 },
    );
  });

  it('what it splits of a malformed record is what csv-parse reads, without an error; the rest is left to csv-parse', () => {
    const mixed = fc.tuple(record, malformed, record).map(([a, m, b]) => `${a.text},${m},${b.text}`);
    fc.assert(
      fc.property(mixed, (text) => {
        const fields = splitRecord(text, DIALECT);
        if (fields !== undefined) expect(csvParse(text)).toEqual({ records: [fields], errors: [] });
      }),
      { seed: SEED, numRuns: 500 },
    );
    for (const m of ['"ab" ,x', '"ab,x', 'ab"c,x', '"ab"x,y', '"a"b"']) expect(splitRecord(m, DIALECT), m).toBeUndefined();
  });
});

describe("plainDialectOf (the one definition of the common dialect: the guard's fast path, the split)", () => {
  const base = { delimiter: ',', quote: '"', escape: '"', encoding: 'utf8' as const };
  it('takes one ASCII delimiter, one ASCII quote doubled inside, no trim, no comments', () => {
    expect(plainDialectOf(base)).toEqual({ delimiter: ',', quote: '"' });
    expect(plainDialectOf({ ...base, delimiter: '\t' })).toEqual({ delimiter: '\t', quote: '"' });
    expect(plainDialectOf({ ...base, quote: "'", escape: "'" })).toEqual({ delimiter: ',', quote: "'" });
  });
  it('leaves every other dialect to csv-parse', () => {
    for (const o of [
      { trim: true },
      { ltrim: true },
      { rtrim: true },
      { comment: '#' },
      { delimiter: ';;' },
      { delimiter: '§' },
      { delimiter: [',', ';'] },
      { delimiter: '"' },
      { escape: '\\' },
      { quote: '', escape: '' },
      { quote: '‘', escape: '‘' },
      { quote: "'" },
    ]) {
      expect(plainDialectOf({ ...base, ...o }), JSON.stringify(o)).toBeUndefined();
    }
  });
});

const dir = mkdtempSync(join(tmpdir(), 'care-etl-span-parser-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function readAll(cfg: SourceConfig, path?: CsvParsePath): Promise<SourceItem[] | string> {
  const out: SourceItem[] = [];
  try {
    for await (const item of readCsv(cfg, undefined, undefined, path)) out.push(item);
  } catch (err) {
    return `fatal: ${(err as Error).message}`;
  }
  return out;
}

describe('the reader on whole files', () => {
  const comment = fc.constantFrom('# a "note, here', '#', ' # not a comment');
  const line = fc.oneof(
    { weight: 6, arbitrary: record.map((r) => r.text) },
    { weight: 2, arbitrary: malformed },
    { weight: 1, arbitrary: fc.constant('') },
    { weight: 1, arbitrary: comment },
  );
  const file = fc.record({
    lines: fc.array(line, { minLength: 1, maxLength: 12 }),
    breaks: fc.array(fc.constantFrom('\n', '\r\n', '\r'), { minLength: 12, maxLength: 12 }),
    lastBreak: fc.boolean(),
    bom: fc.boolean(),
    skipEmptyLines: fc.boolean(),
    maxQuotedLines: fc.constantFrom(1, 2, 100),
  });
  /** Dialects: their options, and the delimiter the generated text's commas become. */
  const dialects = [
    { name: 'common', csv: {}, delimiter: ',' },
    { name: 'comment', csv: { comment: '#' }, delimiter: ',' },
    { name: 'trim', csv: { trim: true }, delimiter: ',' },
    { name: 'two-character delimiter', csv: { delimiter: ';;' }, delimiter: ';;' },
    { name: 'non-ASCII delimiter', csv: { delimiter: '§' }, delimiter: '§' },
    { name: 'backslash escape', csv: { escape: '\\' }, delimiter: ',' },
  ];

  for (const d of dialects) {
    it(`gives the items csv-parse gives reading the file as a stream (${d.name})`, async () => {
      let n = 0;
      await fc.assert(
        fc.asyncProperty(file, async (f) => {
          const body = ['id,name,note', ...f.lines].map((l, i) => l + (i < f.lines.length || f.lastBreak ? f.breaks[i % 12] : '')).join('');
          const path = join(dir, `f${n++}.csv`);
          writeFileSync(path, (f.bom ? '\uFEFF' : '') + body.replaceAll(',', d.delimiter));
          const cfg = { name: 's', path, csv: { ...d.csv, skipEmptyLines: f.skipEmptyLines, maxQuotedLines: f.maxQuotedLines } };
          expect(await readAll(cfg)).toEqual(await readAll(cfg, 'stream'));
        }),
        { seed: SEED, numRuns: d.name === 'common' ? 300 : 150 },
      );
    });
  }
});
