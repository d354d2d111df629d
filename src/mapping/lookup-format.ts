/**
 * How a file entry of the mapping (`sources:` or `lookups:`) is read: its format (`format:`, else the
 * extension, as src/sources/source-file.ts `detectFormat`), `records` (JSON) and `csv` options — one set of
 * rules for both — and the check that a `.json` / `format: json` file does not hold NDJSON.
 */
import { open } from 'node:fs/promises';
import { extname } from 'node:path';
import type { KnownIssueCode } from '../core/issues.js';
import { isObj, type Obj } from '../core/is-object.js';
import { detectFormat } from '../sources/source-file.js';
import type { CsvOptions, SourceFormat } from '../sources/types.js';

const FILE_FORMATS: readonly SourceFormat[] = ['csv', 'json', 'ndjson'];

/** Bytes `looksLikeNdjson` reads from the start of a file. */
const SNIFF_BYTES = 256 * 1024;

interface FileEntryOptions {
  format: SourceFormat;
  /** True when `format:` is written in the entry. */
  formatDeclared: boolean;
  records?: string;
  csv?: CsvOptions;
}

interface FileEntryProblem {
  code: KnownIssueCode;
  message: string;
  /** The entry's property the problem is about (a csv option: `['csv', 'delimiter']`). */
  at: readonly ['path' | 'records' | 'csv', ...string[]];
}

/**
 * Format, `records` and `csv` of a file entry whose path (after `${VAR}`) is `written`. No options (and no
 * problem) when `format:` is not one of the known formats: the schema check reports it.
 */
export function fileEntryOptions(entry: Obj, written: string): { options?: FileEntryOptions; problems: FileEntryProblem[] } {
  const problems: FileEntryProblem[] = [];
  const declared = typeof entry.format === 'string';
  if (declared && !FILE_FORMATS.includes(entry.format as SourceFormat)) return { problems };
  const format = declared ? (entry.format as SourceFormat) : detectFormat(written);
  if (!format) {
    problems.push({
      code: 'source-format',
      message: `cannot tell the format of \`${written}\` from its extension; add \`format: csv\`, \`json\` or \`ndjson\``,
      at: ['path'],
    });
    return { problems };
  }
  const options: FileEntryOptions = { format, formatDeclared: declared };
  if (typeof entry.records === 'string') {
    if (format !== 'json') problems.push({ code: 'invalid', message: `\`records\` only applies to json files (this one is ${format})`, at: ['records'] });
    else options.records = entry.records;
  }
  let csv: CsvOptions | undefined = isObj(entry.csv) ? ({ ...entry.csv } as CsvOptions) : undefined;
  if (csv && format !== 'csv') problems.push({ code: 'invalid', message: `\`csv\` options only apply to csv files (this one is ${format})`, at: ['csv'] });
  if (format === 'csv' && extname(written).toLowerCase() === '.tsv' && !csv?.delimiter) csv = { ...csv, delimiter: '\t' };
  if (csv && format === 'csv') {
    options.csv = csv;
    problems.push(...csvDialectProblems(csv));
  }
  return { options, problems };
}

const LINE_BREAK = /[\r\n]/;
const shown = (s: string) => JSON.stringify(s);

/**
 * A `delimiter` / `quote` / `escape` the CSV reader cannot work with (issue 25): a line break in one (records end at
 * line breaks), the quote inside the delimiter (a field could never be told from a quoted one) — each at its key.
 * Empty values and a quote of more than one character are the schema's to report.
 */
function csvDialectProblems(csv: CsvOptions): FileEntryProblem[] {
  const problems: FileEntryProblem[] = [];
  const quote = typeof csv.quote === 'string' ? csv.quote : '"';
  const at = (key: 'delimiter' | 'quote' | 'escape', message: string) => problems.push({ code: 'csv-dialect', message, at: ['csv', key] });
  for (const key of ['delimiter', 'quote', 'escape'] as const) {
    const v = csv[key];
    if (typeof v === 'string' && LINE_BREAK.test(v)) at(key, `\`csv.${key}\` cannot hold a line break (${shown(v)}): records end at line breaks`);
  }
  const delimiter = csv.delimiter;
  if (typeof delimiter === 'string' && delimiter !== '' && quote !== '' && delimiter.includes(quote) && !LINE_BREAK.test(delimiter)) {
    const which = csv.quote === undefined ? 'the default quote character' : 'the `csv.quote` character';
    at(
      csv.quote !== undefined && delimiter === quote ? 'quote' : 'delimiter',
      `\`csv.delimiter\` ${shown(delimiter)} ${delimiter === quote ? 'is' : 'holds'} ${which} ${shown(quote)}: fields could not be told from quoted text; pick another delimiter (e.g. ";") or set \`csv.quote\``,
    );
  }
  return problems;
}

/**
 * True when the file starts with at least two lines that are each one whole JSON object or array: NDJSON.
 * Such a file is never valid JSON (two values), so a JSON reader fails on it with a message about position
 * 1209 that does not tell the user what is wrong. Unreadable files are `false` (their reader says why).
 */
export async function looksLikeNdjson(path: string): Promise<boolean> {
  let text: string;
  let cut: boolean;
  try {
    const handle = await open(path, 'r');
    try {
      const buf = Buffer.alloc(SNIFF_BYTES);
      const { bytesRead } = await handle.read(buf, 0, SNIFF_BYTES, 0);
      text = buf.toString('utf8', 0, bytesRead).replace(/^\ufeff/, '');
      cut = bytesRead === SNIFF_BYTES;
    } finally {
      await handle.close();
    }
  } catch {
    return false;
  }
  const lines = text.split(/\r?\n|\r/);
  // the last line may be cut by the sniff window: only whole lines count
  if (cut) lines.pop();
  let values = 0;
  for (const line of lines) {
    const t = line.trim();
    if (t === '') continue;
    if (!(t.startsWith('{') && t.endsWith('}')) && !(t.startsWith('[') && t.endsWith(']'))) return false;
    try {
      JSON.parse(t);
    } catch {
      return false;
    }
    if (++values >= 2) return true;
  }
  return false;
}

/** The message for a `.json` / `format: json` file that holds NDJSON. */
export function ndjsonInJsonMessage(shown: string): string {
  return `\`${shown}\` looks like NDJSON (one JSON value per line), not one JSON document: use \`format: ndjson\`${shown.toLowerCase().endsWith('.json') ? ' (or name it `.ndjson`)' : ''}`;
}
