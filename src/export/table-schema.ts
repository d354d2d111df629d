/**
 * A Frictionless Table Schema (https://specs.frictionlessdata.io/table-schema/) beside a CSV export, as a Tabular
 * Data Package `<name>.datapackage.json`: pandas, R and frictionless tools read the file with its types (scores
 * stay integers). Built from the data dictionary's entries; it holds no patient data.
 * Design: docs/export.md ("Table Schema").
 */
import { basename, dirname, extname, join } from 'node:path';
import { writeOutputFile } from '../core/secure-fs.js';
import { snakeName } from './column-names.js';
import type { DataDictionary, DictionaryEntry } from './dictionary.js';

type FieldType = 'string' | 'integer' | 'number' | 'boolean' | 'date' | 'datetime';

/** `obs.csv` → `obs.datapackage.json` in the same folder. */
function tablePackagePathFor(csvPath: string): string {
  const name = basename(csvPath);
  const stem = extname(name).toLowerCase() === '.csv' ? name.slice(0, -4) : name;
  return join(dirname(csvPath), `${stem}.datapackage.json`);
}

/** The Table Schema type of a column: its observed JSON type, narrowed to a date or a date-time when every value was one. */
function fieldTypeOf(e: DictionaryEntry): FieldType {
  if (e.type === 'integer' || e.type === 'number' || e.type === 'boolean') return e.type;
  if (e.valueFormat) return e.valueFormat;
  return 'string'; // text, mixed (integer|string), JSON, or nothing seen
}

/** The Tabular Data Package describing one CSV export (`path` relative to the package file). */
function tablePackage(csvPath: string, dict: DataDictionary, bom: boolean): Record<string, unknown> {
  const file = basename(csvPath);
  const id = snakeName(file.replace(/\.csv$/i, '')).replace(/_/g, '-'); // Frictionless names: lower case, digits, `-`
  return {
    profile: 'tabular-data-package',
    name: id,
    created: dict.generatedAt,
    resources: [
      {
        name: id,
        path: file,
        profile: 'tabular-data-resource',
        format: 'csv',
        mediatype: 'text/csv',
        encoding: bom ? 'utf-8-sig' : 'utf-8',
        dialect: { delimiter: ',', lineTerminator: '\r\n', quoteChar: '"', doubleQuote: true, header: true },
        schema: {
          fields: dict.columns.map((c) => ({ name: c.name, type: fieldTypeOf(c), description: c.description })),
          missingValues: [''],
        },
        // Not in the spec (tools ignore unknown properties): how the text cells were written.
        'care-etl': { layout: dict.layout, escapeFormulas: dict.escapeFormulas, columnNames: dict.columnNames, pseudonymized: dict.pseudonymized },
      },
    ],
  };
}

/** Writes `<name>.datapackage.json` beside the CSV (through a temporary sibling and a rename). */
export async function writeTablePackage(csvPath: string, dict: DataDictionary, bom: boolean): Promise<string> {
  const path = tablePackagePathFor(csvPath);
  await writeOutputFile(path, `${JSON.stringify(tablePackage(csvPath, dict, bom), null, 2)}\n`);
  return path;
}
