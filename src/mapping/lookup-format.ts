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
  /** The entry's property the problem is about. */
  at: 'path' | 'records' | 'csv';
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
      at: 'path',
    });
    return { problems };
  }
  const options: FileEntryOptions = { format, formatDeclared: declared };
  if (typeof entry.records === 'string') {
    if (format !== 'json') problems.push({ code: 'invalid', message: `\`records\` only applies to json files (this one is ${format})`, at: 'records' });
    else options.records = entry.records;
  }
  let csv: CsvOptions | undefined = isObj(entry.csv) ? ({ ...entry.csv } as CsvOptions) : undefined;
  if (csv && format !== 'csv') problems.push({ code: 'invalid', message: `\`csv\` options only apply to csv files (this one is ${format})`, at: 'csv' });
  if (format === 'csv' && extname(written).toLowerCase() === '.tsv' && !csv?.delimiter) csv = { ...csv, delimiter: '\t' };
  if (csv && format === 'csv') options.csv = csv;
  return { options, problems };
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
