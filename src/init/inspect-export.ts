/**
 * What `care-etl init` needs to know about an export file: its format, the CSV delimiter, where the records
 * of a JSON document are, the column names (`readHeader`) and a few facts sampled from the first records
 * (date layouts, sex codes, boolean spellings). Only such derived facts are kept, never values that could
 * identify a person.
 */
import { open, readFile, stat } from 'node:fs/promises';
import { basename, extname } from 'node:path';
import { CareEtlError, ExitCode, issue, type KnownIssueCode } from '../core/issues.js';
import { detectFormat, openSource, readHeader } from '../sources/open-source.js';
import type { SourceConfig, SourceFormat } from '../sources/types.js';
import { fhirFacts, type FhirFacts } from './fhir-facts.js';
import { sniffNotUtf8, type NotUtf8 } from './sniff-encoding.js';
import { valueDates } from './value-dates.js';

export const SAMPLE_RECORDS = 50;
/** JSON documents whose records are not the top-level array are read whole to find them: up to this size. */
export const RECORDS_SEARCH_MAX_BYTES = 64 * 1024 * 1024;

export interface ColumnFacts {
  name: string;
  /** Sampled non-empty values are all JSON booleans / all of these spellings. */
  booleans?: 'json' | { true: string; false: string };
  /** Date layout in `$date` format tokens, when every sampled value has the same one. */
  dateFormat?: string;
  /** A name that says nothing of dates, but every sampled value is one (value-dates.ts): set with `dateFormat` or `dateAmbiguous`. */
  datesFromValues?: true;
  /** Every sampled value reads as a date both day-first and month-first: the two `$date` formats. */
  dateAmbiguous?: [string, string];
  /** Distinct short codes (≤ 12, each ≤ 12 characters) of a sex/gender column. */
  codes?: string[];
  /** Some sampled value is non-empty (not only spaces). */
  seen: boolean;
  /** Some sampled value is a JSON object or array: not a text column (no string function applies to it). */
  structured?: boolean;
  /** Sampled texts in the "FAMILY, Given" form (one comma, text on both sides): all of them, or only some. */
  commaNames?: 'all' | 'some';
}

export interface ExportFacts {
  path: string;
  format: SourceFormat;
  /** CSV delimiter when not `,` (and not a tab in a `.tsv`). */
  delimiter?: string;
  /** CSV whose bytes are not valid UTF-8 (sniff-encoding.ts): the facts were sampled in the proposed encoding (or Latin-1). */
  notUtf8?: NotUtf8;
  /** JSON: the path of the records array; `null` when it could not be found. */
  records?: string | null;
  columns: ColumnFacts[];
  /** Records read for the facts (at most SAMPLE_RECORDS): with none, `seen` says nothing about a column. */
  sampled: number;
  /** The records are FHIR resources (they have a `resourceType`). */
  fhir?: FhirFacts;
}

const DELIMITERS = [',', ';', '\t', '|'];

/** The delimiter occurring most often outside quotes in the first line. */
export function sniffDelimiter(firstLine: string): string {
  const counts = new Map<string, number>(DELIMITERS.map((d) => [d, 0]));
  let quoted = false;
  for (const ch of firstLine) {
    if (ch === '"') quoted = !quoted;
    else if (!quoted && counts.has(ch)) counts.set(ch, counts.get(ch)! + 1);
  }
  let best = ',';
  for (const d of DELIMITERS) if (counts.get(d)! > counts.get(best)!) best = d;
  return best;
}

async function firstLine(path: string): Promise<string> {
  const fh = await open(path, 'r');
  try {
    const buf = Buffer.alloc(64 * 1024);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    let text = buf.subarray(0, bytesRead).toString('utf8');
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    const nl = text.search(/\r?\n/);
    return nl < 0 ? text : text.slice(0, nl);
  } finally {
    await fh.close();
  }
}

/** Path (`a.b`) of the first array of objects in the document, breadth first, at most 3 levels deep. */
export function findRecordsPath(doc: unknown): string | undefined {
  const isPlainKey = (k: string) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(k);
  let level: { value: unknown; path: string[] }[] = [{ value: doc, path: [] }];
  for (let depth = 0; depth < 3 && level.length; depth++) {
    const next: typeof level = [];
    for (const { value, path } of level) {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) continue;
      for (const [k, v] of Object.entries(value)) {
        if (!isPlainKey(k)) continue;
        if (Array.isArray(v) && v.length > 0 && v.every((x) => x !== null && typeof x === 'object' && !Array.isArray(x))) return [...path, k].join('.');
        next.push({ value: v, path: [...path, k] });
      }
    }
    level = next;
  }
  return undefined;
}

/** resourceType → entries of that type in a whole Bundle, in order of first appearance. */
function bundleTypesOf(doc: unknown): Record<string, number> {
  const types: Record<string, number> = {};
  for (const e of (doc as { entry: unknown[] }).entry) {
    const t = (e as { resource?: { resourceType?: unknown } } | null)?.resource?.resourceType;
    if (typeof t === 'string') types[t] = (types[t] ?? 0) + 1;
  }
  return types;
}

/**
 * Where the records of a JSON document are: a FHIR Bundle's `entry` (its `link` array comes first), a single
 * FHIR resource as one record (`$`), else the first array of objects.
 */
function recordsOf(doc: unknown): string | undefined {
  const type = doc !== null && typeof doc === 'object' ? (doc as { resourceType?: unknown }).resourceType : undefined;
  if (type === 'Bundle' && Array.isArray((doc as { entry?: unknown }).entry)) return 'entry';
  if (typeof type === 'string' && type !== 'Bundle') return '$';
  return findRecordsPath(doc);
}

const DATE_LAYOUTS: { re: RegExp; format: (samples: string[]) => string }[] = [
  { re: /^\d{4}-\d{2}-\d{2}$/, format: () => 'YYYY-MM-DD' },
  { re: /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/, format: () => 'YYYY-MM-DDTHH:mm:ssZ' },
  { re: /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/, format: () => 'YYYY-MM-DD HH:mm:ss' },
  { re: /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}$/, format: () => 'YYYY-MM-DD HH:mm' },
  { re: /^\d{2}\/\d{2}\/\d{4}$/, format: (s) => (s.some((v) => Number(v.slice(0, 2)) > 12) ? 'DD/MM/YYYY' : 'MM/DD/YYYY') },
  { re: /^\d{1,2}\/\d{1,2}\/\d{4}$/, format: (s) => (s.some((v) => Number(v.split('/')[0]) > 12) ? 'D/M/YYYY' : 'M/D/YYYY') },
  { re: /^\d{2}\.\d{2}\.\d{4}$/, format: () => 'DD.MM.YYYY' },
  { re: /^\d{8}$/, format: () => 'YYYYMMDD' },
];

function dateLayout(values: string[]): string | undefined {
  if (!values.length) return undefined;
  // The first layout every value fits: mixed padding (1/5/2020 and 12/25/2020) fits M/D/YYYY.
  for (const l of DATE_LAYOUTS) if (values.every((v) => l.re.test(v))) return l.format(values);
  return undefined;
}

/**
 * A column named as dates (DOB, VISIT_DATE): its layout from the values. `03/04/1980` is day- or month-first: a day
 * above 12 decides, and when every sampled value reads both ways the author is asked (a `$TODO`), never a guess —
 * a wrong one swaps day and month of every date that also reads the other way, without a single reject.
 */
function namedDates(col: ColumnFacts, texts: string[]): void {
  const byValues = texts.length && texts.every((v) => v.includes('/')) ? valueDates(texts) : undefined;
  if (byValues && 'ambiguous' in byValues) col.dateAmbiguous = byValues.ambiguous;
  else col.dateFormat = byValues?.format ?? dateLayout(texts);
}

function datesFromValues(col: ColumnFacts, texts: string[]): void {
  const found = valueDates(texts);
  if (!found) return;
  col.datesFromValues = true;
  if ('format' in found) col.dateFormat = found.format;
  else col.dateAmbiguous = found.ambiguous;
}

const BOOLEAN_SPELLINGS: [string, string][] = [
  ['Y', 'N'],
  ['y', 'n'],
  ['Yes', 'No'],
  ['YES', 'NO'],
  ['true', 'false'],
  ['TRUE', 'FALSE'],
  ['True', 'False'],
  ['1', '0'],
  ['T', 'F'],
];

/** "DOE, John", "van der Berg, Anna Maria": one comma, a family name before it and given names after it. */
function isFamilyCommaGiven(v: string): boolean {
  const parts = v.split(',');
  return parts.length === 2 && parts.every((p) => p.trim() !== '');
}

export const normalizeColumn = (name: string) => name.toLowerCase().replace(/[^a-z0-9]/g, '');
export const isSexColumn = (name: string) => ['sex', 'gender', 'administrativegender', 'sexcode', 'gendercode'].includes(normalizeColumn(name));
/** Coded gender columns of OMOP CDM tables: their distinct codes are sampled like a sex column's. */
const isOmopGenderColumn = (name: string) => ['genderconceptid', 'gendersourcevalue'].includes(normalizeColumn(name));
export const isDateColumn = (name: string) =>
  /(dob|date|birth|start|end|stop|_dt$|dt$|since|until|from$|to$)/i.test(name) && !/update|created|modified/i.test(name);

export async function inspectExport(path: string, shown = basename(path)): Promise<ExportFacts> {
  const format = detectFormat(path);
  const fail = (message: string, code: KnownIssueCode) =>
    new CareEtlError(`${shown}: ${message}`, { issues: [issue.error(code, message, { location: { file: shown } })], exitCode: ExitCode.config });
  if (!format)
    throw fail(`cannot tell the format from the extension \`${extname(path) || '(none)'}\`; use .csv, .tsv, .txt, .json, .ndjson or .jsonl`, 'source-format');
  try {
    const st = await stat(path);
    if (!st.isFile()) throw fail('not a regular file', 'source-read');
  } catch (err) {
    if (err instanceof CareEtlError) throw err;
    throw fail(`file not found (${(err as NodeJS.ErrnoException).code ?? 'error'})`, 'source-not-found');
  }

  const facts: ExportFacts = { path, format, columns: [], sampled: 0 };
  const cfg: SourceConfig = { name: 'export', path, format };
  if (format === 'csv') {
    const d = sniffDelimiter(await firstLine(path));
    const tsv = extname(path).toLowerCase() === '.tsv';
    cfg.csv = { delimiter: d };
    if (d !== ',' && !(tsv && d === '\t')) facts.delimiter = d;
    const notUtf8 = await sniffNotUtf8(path);
    if (notUtf8) {
      facts.notUtf8 = notUtf8;
      // sampled in the encoding proposed, else in Latin-1 (every byte is a character): the header row stays readable
      cfg.csv.encoding = notUtf8.proposed ?? 'latin1';
    }
  }

  let columns: string[];
  let bundleTypes: Record<string, number> | undefined;
  try {
    columns = await readHeader(cfg);
  } catch (err) {
    const code = err instanceof CareEtlError ? err.issues[0]?.code : undefined;
    if (format !== 'json' || code !== 'json-records') throw err;
    // Not a top-level array: look for the records inside the document.
    const size = (await stat(path)).size;
    let found: string | undefined;
    if (size <= RECORDS_SEARCH_MAX_BYTES) {
      try {
        const doc = JSON.parse(await readFile(path, 'utf8')) as unknown;
        found = recordsOf(doc);
        bundleTypes = found === 'entry' ? bundleTypesOf(doc) : undefined;
      } catch {
        found = undefined;
      }
    }
    facts.records = found ?? null;
    if (!found) return facts;
    cfg.records = found;
    columns = await readHeader(cfg);
  }

  const samples = new Map<string, unknown[]>(columns.map((c) => [c, []]));
  const records: unknown[] = [];
  let n = 0;
  for await (const item of openSource(cfg)) {
    if (item.ok) {
      records.push(item.data);
      for (const c of columns) {
        const v = item.data[c];
        if (v !== undefined && v !== null && !(typeof v === 'string' && v.trim() === '')) samples.get(c)!.push(v);
      }
    }
    if (++n >= SAMPLE_RECORDS) break;
  }
  facts.sampled = records.length;
  const fhir = fhirFacts(records);
  // A Bundle is read whole anyway: its types are counted over every entry, not only the sampled ones.
  if (fhir) facts.fhir = fhir.bundle && bundleTypes ? { ...fhir, types: bundleTypes } : fhir;

  for (const name of columns) {
    const values = samples.get(name)!;
    const col: ColumnFacts = { name, seen: values.length > 0 };
    if (values.some((v) => typeof v === 'object')) col.structured = true;
    const texts = values.filter((v): v is string => typeof v === 'string').map((v) => v.trim());
    if (values.length && values.every((v) => typeof v === 'boolean')) col.booleans = 'json';
    else if (texts.length === values.length && texts.length) {
      const distinct = new Set(texts);
      const pair = BOOLEAN_SPELLINGS.find(([t, f]) => [...distinct].every((v) => v === t || v === f));
      if (pair && !isSexColumn(name)) col.booleans = { true: pair[0], false: pair[1] };
      if (isDateColumn(name)) namedDates(col, texts);
      else datesFromValues(col, texts);
      const commas = texts.filter(isFamilyCommaGiven).length;
      if (commas) col.commaNames = commas === texts.length ? 'all' : 'some';
      if ((isSexColumn(name) || isOmopGenderColumn(name)) && distinct.size <= 12 && [...distinct].every((v) => v.length <= 12))
        col.codes = [...distinct].sort();
    }
    facts.columns.push(col);
  }
  return facts;
}
