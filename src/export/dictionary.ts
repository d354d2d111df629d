/**
 * `--dictionary FILE`: what every column of an export means (name, source, type, description), as JSON or CSV;
 * it holds no row of patient data, but a wide layout's column names are the server's code texts: 0600 all the same.
 * Design: docs/design/export.md.
 */
import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { stringify } from 'csv-stringify/sync';
import { ensureDir, outputKindOf, PHI_FILE_MODE, tempPathFor } from '../core/secure-fs.js';
import type { Instrument } from './wide-layout.js';

export interface DictionaryEntry {
  name: string;
  source: string;
  type: string;
  description: string;
  /** Every value written was a full date (`YYYY-MM-DD`) or a date-time with a zone: the Table Schema types it so. */
  valueFormat?: 'date' | 'datetime';
  /** The header before `--column-names` renamed it (JSON dictionary only). */
  label?: string;
  /** Wide instrument columns: the questionnaire's text (spellings merged into the column) and coding (JSON only). */
  questionnaire?: { texts?: string[]; system?: string; code?: string };
}

export interface DataDictionary {
  export: string;
  layout: 'long' | 'wide';
  format: string;
  pseudonymized: boolean;
  /** Whether formula-like text cells were prefixed with `'` (CSV for spreadsheets; never NDJSON or Parquet). */
  escapeFormulas: boolean;
  columnNames: 'original' | 'snake';
  keepFreeText: boolean;
  rows: number;
  generatedAt: string;
  columns: DictionaryEntry[];
}

const PSEUDO = 'pseudonym: HMAC-SHA-256 under the export key, 32 hex characters; same key → same pseudonym in every export';

/** Built-in long-layout columns: equivalent expression, fixed type (undefined: observed), meaning. */
export const DEFAULT_COLUMN_DOCS: Record<string, { source: string; type?: string; description: string; pseudonymized?: string }> = {
  id: { source: 'id', type: 'string', description: 'Observation server id (dedupe key with `version`)', pseudonymized: `Observation server id as a ${PSEUDO}` },
  patient_id: {
    source: 'subject.reference (its id, when a Patient)',
    type: 'string',
    description: "patient's server id",
    pseudonymized: `patient's server id as a ${PSEUDO}`,
  },
  patient_source_key: {
    source: '$sourceKey(subject.reference)',
    type: 'string',
    description: "patient's source key recorded by the loader (e.g. the MRN); empty when the patient was not loaded with this state ledger",
    pseudonymized: `patient's source key (e.g. MRN) as a ${PSEUDO}`,
  },
  questionnaire: {
    source: 'code.text (else the first coding display, else its code)',
    type: 'string',
    description: 'questionnaire / instrument name as the server labels it',
  },
  loinc: { source: 'code.coding[system = "http://loinc.org"].code', type: 'string', description: 'LOINC code of the instrument' },
  category: { source: 'category.text (else coding display or code), joined with |', type: 'string', description: 'observation category (e.g. Survey)' },
  status: { source: 'status', type: 'string', description: 'FHIR status code (final, amended, …)' },
  effective: {
    source: 'effectiveDateTime (or effectiveInstant, effectivePeriod.start)',
    type: 'string (ISO 8601 date-time as recorded)',
    description: 'when the questionnaire was answered',
  },
  value: {
    source: 'value[x]: valueInteger, valueQuantity.value, valueString, valueCodeableConcept.text, valueBoolean, …',
    description: 'the result (score)',
    pseudonymized: 'the result (score); free text (valueString, unknown value[x]) removed unless --keep-free-text',
  },
  unit: { source: 'valueQuantity.unit (else .code)', type: 'string', description: 'unit of a quantity value' },
  performer: {
    source: 'performer.reference (else performer.display), joined with |',
    type: 'string',
    description: 'who performed it (references, or display names)',
    pseudonymized: 'performer references as Type/<pseudonym>; display names removed unless --keep-free-text',
  },
  last_updated: { source: 'meta.lastUpdated', type: 'string (ISO 8601 instant)', description: 'last change on the server (the --since filter)' },
  version: { source: 'meta.versionId', type: 'string', description: 'server version (dedupe key with `id`)' },
};

export const WIDE_COLUMN_DOCS: Record<string, { source: string; type: string; description: string; pseudonymized?: string }> = {
  patient_id: {
    source: 'subject.reference (its id; a Patient)',
    type: 'string',
    description: "patient's server id (row key with `date`)",
    pseudonymized: `patient's server id as a ${PSEUDO} (row key with \`date\`)`,
  },
  patient_source_key: DEFAULT_COLUMN_DOCS.patient_source_key as { source: string; type: string; description: string; pseudonymized: string },
  date: {
    source: 'effectiveDateTime (or effectiveInstant, effectivePeriod.start) → UTC day',
    type: 'string (YYYY-MM-DD)',
    description: 'UTC day of the results (a date without a time as written; empty when no effective date)',
  },
  observations: { source: 'count', type: 'integer', description: 'observations merged into this row' },
  superseded: { source: 'count', type: 'integer', description: 'results not shown: an instrument answered more than once that day shows the latest' },
  last_updated: { source: 'max(meta.lastUpdated)', type: 'string (ISO 8601 instant)', description: 'latest server change among the merged observations' },
};

/** What was written in each column: JSON types seen, for columns whose type is not fixed. */
const FULL_DATE = /^\d{4}-\d{2}-\d{2}$/;
const DATE_TIME_ZONED = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

export class ColumnTypes {
  readonly #seen = new Map<string, Set<string>>();
  /** Per text column: every value so far a full date / a zoned date-time. */
  readonly #shapes = new Map<string, { date: boolean; datetime: boolean }>();

  see(row: Record<string, unknown>, columns: readonly string[]): void {
    for (const c of columns) {
      const v = row[c];
      if (v === undefined || v === null || (typeof v === 'number' && !Number.isFinite(v))) continue;
      const t =
        typeof v === 'number' ? (Number.isInteger(v) ? 'integer' : 'number') : typeof v === 'string' ? 'string' : typeof v === 'boolean' ? 'boolean' : 'json';
      let s = this.#seen.get(c);
      if (!s) this.#seen.set(c, (s = new Set()));
      s.add(t);
      if (t === 'string') this.#seeShape(c, v as string);
    }
  }

  #seeShape(column: string, v: string): void {
    let shape = this.#shapes.get(column);
    if (!shape) this.#shapes.set(column, (shape = { date: true, datetime: true }));
    if (shape.date && !FULL_DATE.test(v)) shape.date = false;
    if (shape.datetime && !DATE_TIME_ZONED.test(v)) shape.datetime = false;
  }

  /** `date` / `datetime` when every value of a text column had that shape. */
  formatOf(column: string): DictionaryEntry['valueFormat'] {
    const s = this.#seen.get(column);
    const shape = this.#shapes.get(column);
    if (!shape || s?.size !== 1) return undefined;
    return shape.date ? 'date' : shape.datetime ? 'datetime' : undefined;
  }

  typeOf(column: string): string {
    const s = this.#seen.get(column);
    if (!s?.size) return 'empty';
    // integer ⊂ number: both seen → number
    if (s.has('integer') && s.has('number')) s.delete('integer');
    return [...s].sort().join('|');
  }
}

/** The entries with the date / date-time shape their values had (the Table Schema's types). */
export function withValueFormats(entries: DictionaryEntry[], types: ColumnTypes): DictionaryEntry[] {
  return entries.map((e) => {
    const valueFormat = types.formatOf(e.name);
    return valueFormat ? { ...e, valueFormat } : e;
  });
}

export function wideInstrumentEntry(i: Instrument, type: string): DictionaryEntry {
  const label = i.label === undefined ? {} : { label: i.label };
  if (i.code === undefined) {
    const texts = i.texts ?? [];
    const merged = texts.length > 1 ? ` (${texts.length} spellings merged, same text up to case and spaces: ${texts.join(' | ')})` : '';
    return {
      name: i.name,
      source: `value[x] of the observation without a coding whose code.text normalises to "${i.key.slice('text|'.length)}" (the latest that day)`,
      type,
      description: `${texts[0] ?? ''}${merged}`,
      ...label,
      questionnaire: { texts },
    };
  }
  return {
    name: i.name,
    source: `value[x] of the observation with code.coding ${i.system ?? '(no system)'}|${i.code} (the latest that day)`,
    type,
    description: i.display ? `${i.display}` : `instrument ${i.code}`,
    ...label,
    questionnaire: { ...(i.display ? { texts: [i.display] } : {}), ...(i.system ? { system: i.system } : {}), code: i.code },
  };
}

const FORMULA_NOTE = " (text cells starting with = + - @ tab or CR prefixed with ')";

/** Writes the dictionary (CSV, or JSON for a `.json` path) through a temporary sibling and a rename; a pipe or a device in place. */
export async function writeDictionary(path: string, dict: DataDictionary): Promise<void> {
  const text = /\.json$/i.test(path)
    ? `${JSON.stringify(dict, null, 2)}\n`
    : stringify(
        dict.columns.map((c) => [
          c.name,
          c.source,
          c.type,
          dict.escapeFormulas && c.type.includes('string') ? `${c.description}${FORMULA_NOTE}` : c.description,
        ]),
        {
          header: true,
          columns: ['name', 'source', 'type', 'description'],
          record_delimiter: 'windows',
          escape_formulas: true,
          quoted_match: /[\u0000-\u001f\u007f]/,
        },
      );
  if (outputKindOf(path) === 'stream') return writeFile(path, text);
  ensureDir(dirname(path));
  const tmp = tempPathFor(path);
  try {
    // 0600 like every file an export writes (docs/output-files.md): a wide layout's column names are the server's
    // code texts. A fresh temporary file, so that the mode applies.
    rmSync(tmp, { force: true });
    writeFileSync(tmp, text, { mode: PHI_FILE_MODE });
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}
