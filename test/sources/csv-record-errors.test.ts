/**
 * A record of the common dialect with a syntax error is parsed by csv-parse alone (csv-span-parser.ts), which words
 * an error for every later quote of the field too, each quoting the whole field so far: a field full of stray quotes
 * cost time and memory quadratic in its length (10,000 quotes: ~1 s; a 4 MiB record of them: out of memory). The
 * reader reads only a record's first error, so the parse stops there: one skip per record, the same reject.
 * Dialects csv-span-parser.ts does not split itself (`comment`, `trim`, a multi-character delimiter) went through
 * csv-parse as a stream, which cannot stop there: now their records are parsed per span too.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { pipeline, Readable } from 'node:stream';
import type { Options as CsvParseOptions } from 'csv-parse';
import { afterAll, describe, expect, it } from 'vitest';
import { CsvQuoteGuard, plainDialectOf } from '../../src/sources/csv-quote-guard.js';
import { readCsv } from '../../src/sources/csv-source.js';
import { CsvSpanParser, SkippedRecord, type ParsedItem } from '../../src/sources/csv-span-parser.js';
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
  const parser = new CsvSpanParser(guard.parseSpans!, plainDialectOf(OPTIONS)!, OPTIONS, () => guard.nextRecordFrom);
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

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** Reads a file per dialect with a 4 MiB record of stray quotes, in a child whose heap is bounded (the reader from dist/). */
const CHILD = `
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
const { readCsv } = await import(${JSON.stringify(pathToFileURL(join(ROOT, 'dist/sources/csv-source.js')).href)});
const { CSV_MAX_RECORD_CHARS } = await import(${JSON.stringify(pathToFileURL(join(ROOT, 'dist/sources/types.js')).href)});
const out = {};
for (const [name, csv] of Object.entries({ comment: { comment: '#' }, trim: { trim: true }, twoCharDelimiter: { delimiter: ';;' } })) {
  const d = csv.delimiter ?? ',';
  const path = join(process.argv[1], name + '.csv');
  writeFileSync(path, 'id' + d + 'note\\n1' + d + 'a"'.repeat(CSV_MAX_RECORD_CHARS / 2 - 8) + '\\n2' + d + 'b\\n');
  const items = [];
  for await (const it of readCsv({ name: 'notes', path, csv })) {
    items.push(it.ok ? { line: it.origin.line, data: it.data } : { line: it.origin.line, issue: it.issues[0].code + ': ' + it.issues[0].message });
  }
  out[name] = items;
}
console.log(JSON.stringify(out));
`;

describe('the reader on a record full of stray quotes, in the dialects csv-parse parses', () => {
  const dir = mkdtempSync(join(tmpdir(), 'care-etl-record-errors-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('rejects it with the words of the common dialect and reads on, in bounded memory', () => {
    if (!existsSync(join(ROOT, 'dist/sources/csv-source.js'))) throw new Error('dist/ is missing: run `npm run build` first');
    // csv-parse reading the stream ran out of a 48 MB heap on the first of these (a copy of the field per later quote)
    const r = spawnSync(process.execPath, ['--max-old-space-size=48', '--input-type=module', '-e', CHILD, dir], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const expected = [
      { line: 2, issue: 'csv-syntax: quote character inside an unquoted field (column "note")' },
      { line: 3, data: { id: '2', note: 'b' } },
    ];
    expect(JSON.parse(r.stdout)).toEqual({ comment: expected, trim: expected, twoCharDelimiter: expected });
  });
});
