/**
 * A record of the common dialect with a syntax error is parsed by csv-parse alone (csv-span-parser.ts), which words
 * an error for every later quote of the field too, each quoting the whole field so far: a field full of stray quotes
 * cost time and memory quadratic in its length (10,000 quotes: ~1 s; a 4 MiB record of them: out of memory). The
 * reader reads only a record's first error, so the parse stops there: one skip per record, the same reject.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline, Readable } from 'node:stream';
import type { Options as CsvParseOptions } from 'csv-parse';
import { afterAll, describe, expect, it } from 'vitest';
import { CsvQuoteGuard } from '../../src/sources/csv-quote-guard.js';
import { readCsv } from '../../src/sources/csv-source.js';
import { CsvSpanParser, plainDialectOf, SkippedRecord, type ParsedItem } from '../../src/sources/csv-span-parser.js';
import { CSV_MAX_RECORD_CHARS, type SourceItem } from '../../src/sources/types.js';

/** The options csv-source.ts gives csv-parse for a plain `.csv` source. */
const OPTIONS: CsvParseOptions = {
  bom: true,
  delimiter: ',',
  quote: '"',
  escape: '"',
  encoding: 'utf8',
  trim: false,
  skip_empty_lines: true,
  relax_column_count: true,
  skip_records_with_error: true,
  record_delimiter: ['\r\n', '\n', '\r'],
  max_record_size: CSV_MAX_RECORD_CHARS,
};
const LIMITS = { maxQuotedLines: 100, maxRecordBytes: CSV_MAX_RECORD_CHARS, rawExcerptBytes: 64 * 1024 };

/** What the span parser gives for `text`. */
async function parsed(text: string): Promise<ParsedItem[]> {
  const guard = new CsvQuoteGuard(OPTIONS, LIMITS, true);
  const parser = new CsvSpanParser(guard.parseSpans!, plainDialectOf(OPTIONS)!, OPTIONS);
  pipeline(Readable.from([Buffer.from(text)]), guard, parser, () => undefined);
  const items: ParsedItem[] = [];
  for await (const batch of parser as AsyncIterable<ParsedItem[]>) items.push(...batch);
  return items;
}

describe('a record with several stray quotes', () => {
  it('is one skip, its first error, with the records around it', async () => {
    const items = await parsed('id,note\n1,5\'10" and 6\'2" tall"\n2,"a ""b"""x",y"\n3,ok\n');
    const skips = items.filter((i): i is SkippedRecord => i instanceof SkippedRecord);
    expect(skips.map((s) => [s.error.code, s.error.column])).toEqual([
      ['INVALID_OPENING_QUOTE', 1],
      ['CSV_INVALID_CLOSING_QUOTE', 1],
    ]);
    expect(items.filter((i) => !(i instanceof SkippedRecord)).map((i) => (i as { record: string[] }).record)).toEqual([
      ['id', 'note'],
      ['3', 'ok'],
    ]);
  });
});

describe('the reader on a record full of stray quotes', () => {
  const dir = mkdtempSync(join(tmpdir(), 'care-etl-record-errors-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('rejects it, quoting its first error, and reads on', async () => {
    const path = join(dir, 'quotes.csv');
    // just under the record size limit: the guard lets it through to csv-parse
    writeFileSync(path, `id,note\n1,${'a"'.repeat(CSV_MAX_RECORD_CHARS / 2 - 8)}\n2,b\n`);
    const items: SourceItem[] = [];
    for await (const item of readCsv({ name: 'notes', path })) items.push(item);
    expect(items).toHaveLength(2);
    const [reject, row] = items;
    expect(reject).toMatchObject({
      ok: false,
      origin: { line: 2, record: 1 },
      issues: [{ code: 'csv-syntax', message: 'quote character inside an unquoted field (column "note")' }],
    });
    expect(row).toMatchObject({ ok: true, data: { id: '2', note: 'b' }, origin: { line: 3, record: 2 } });
  });
});
