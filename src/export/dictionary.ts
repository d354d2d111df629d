/**
 * `--dictionary FILE`: what every column of an export means (name, source, type, description), as JSON or CSV;
 * it holds no patient data.
 * Design: docs/design/export.md.
 */
import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { stringify } from 'csv-stringify/sync';
import { ensureDir, outputKindOf, tempPathFor } from '../core/secure-fs.js';
import type { Instrument } from './wide-layout.js';

export interface DictionaryEntry {
  name: string;
  source: string;
  type: string;
  description: string;
}

export interface DataDictionary {
  export: string;
  layout: 'long' | 'wide';
  format: 'csv' | 'ndjson' | 'parquet';
  pseudonymized: boolean;
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
export class ColumnTypes {
  readonly #seen = new Map<string, Set<string>>();

  see(row: Record<string, unknown>, columns: readonly string[]): void {
    for (const c of columns) {
      const v = row[c];
      if (v === undefined || v === null || (typeof v === 'number' && !Number.isFinite(v))) continue;
      const t =
        typeof v === 'number' ? (Number.isInteger(v) ? 'integer' : 'number') : typeof v === 'string' ? 'string' : typeof v === 'boolean' ? 'boolean' : 'json';
      let s = this.#seen.get(c);
      if (!s) this.#seen.set(c, (s = new Set()));
      s.add(t);
    }
  }

  typeOf(column: string): string {
    const s = this.#seen.get(column);
    if (!s?.size) return 'empty';
    // integer ⊂ number: both seen → number
    if (s.has('integer') && s.has('number')) s.delete('integer');
    return [...s].sort().join('|');
  }
}

export function wideInstrumentEntry(i: Instrument, type: string): DictionaryEntry {
  return {
    name: i.name,
    source: `value[x] of the observation with code.coding ${i.system ?? '(no system)'}|${i.code} (the latest that day)`,
    type,
    description: i.display ? `${i.display}` : `instrument ${i.code}`,
  };
}

/** Writes the dictionary (CSV, or JSON for a `.json` path) through a temporary sibling and a rename; a pipe or a device in place. */
export async function writeDictionary(path: string, dict: DataDictionary): Promise<void> {
  const text = /\.json$/i.test(path)
    ? `${JSON.stringify(dict, null, 2)}\n`
    : stringify(
        dict.columns.map((c) => [c.name, c.source, c.type, c.description]),
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
    writeFileSync(tmp, text);
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}
