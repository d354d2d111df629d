/**
 * The columns exported when the mapping declares no `exports:` (and no `--columns` file is given).
 * Plain TypeScript rather than JSONata: ~100× cheaper per row. The README lists the equivalent JSONata
 * for users who want to start from it in their own `exports:` section.
 */
import type { CompiledExport, ExportContext } from '../mapping/compile-mapping.js';
import { isObj, type Obj } from '../core/is-object.js';
import type { ColumnType } from './parquet-sink.js';
import { parseReference } from './references.js';

export const DEFAULT_EXPORT_NAME = 'default';

export const DEFAULT_COLUMNS = [
  'id',
  'patient_id',
  'patient_source_key',
  'questionnaire',
  'loinc',
  'category',
  'status',
  'effective',
  'value',
  'unit',
  'performer',
  'last_updated',
  'version',
] as const;

/** Types of the default columns in a typed output (Parquet); `value` holds scores (an integer, or nothing). */
export const DEFAULT_COLUMN_TYPES: ReadonlyMap<string, ColumnType> = new Map<string, ColumnType>([
  ['effective', 'timestamp'],
  ['value', 'integer'],
  ['last_updated', 'timestamp'],
]);

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** Text of a CodeableConcept: its `text`, else the first coding's display, else its code. */
function conceptText(c: unknown): string | undefined {
  if (!isObj(c)) return undefined;
  const t = str(c.text);
  if (t) return t;
  for (const coding of arr(c.coding)) {
    if (!isObj(coding)) continue;
    const d = str(coding.display) ?? str(coding.code);
    if (d) return d;
  }
  return undefined;
}

const joined = (values: (string | undefined)[]): string | undefined => {
  const v = values.filter((x): x is string => x !== undefined);
  return v.length ? v.join('|') : undefined;
};

/** Observation `value[x]`: whatever the observation carries, as a number when it is one. */
export function observationValue(o: Obj): { value?: string | number | boolean; unit?: string } {
  const q = o.valueQuantity;
  if (isObj(q)) return { value: typeof q.value === 'number' ? q.value : undefined, unit: str(q.unit) ?? str(q.code) };
  if (typeof o.valueInteger === 'number') return { value: o.valueInteger };
  if (typeof o.valueDecimal === 'number') return { value: o.valueDecimal };
  if (typeof o.valueString === 'string') return { value: o.valueString };
  if (typeof o.valueBoolean === 'boolean') return { value: o.valueBoolean };
  if (o.valueCodeableConcept !== undefined) return { value: conceptText(o.valueCodeableConcept) };
  for (const k of ['valueDateTime', 'valueTime', 'valueInstant', 'valueDate']) if (typeof o[k] === 'string') return { value: o[k] as string };
  if (isObj(o.valueRange)) {
    const lo = isObj(o.valueRange.low) ? o.valueRange.low.value : undefined;
    const hi = isObj(o.valueRange.high) ? o.valueRange.high.value : undefined;
    if (lo !== undefined || hi !== undefined) return { value: `${lo ?? ''}..${hi ?? ''}` };
  }
  if (isObj(o.valueRatio)) {
    const n = isObj(o.valueRatio.numerator) ? o.valueRatio.numerator.value : undefined;
    const d = isObj(o.valueRatio.denominator) ? o.valueRatio.denominator.value : undefined;
    if (n !== undefined || d !== undefined) return { value: `${n ?? ''}/${d ?? ''}` };
  }
  if (isObj(o.valuePeriod)) return { value: `${str(o.valuePeriod.start) ?? ''}/${str(o.valuePeriod.end) ?? ''}` };
  // Any other value[x] (SampledData, a server extension…): its JSON, rather than dropping it silently.
  for (const k of Object.keys(o)) if (k.startsWith('value') && o[k] !== undefined && o[k] !== null) return { value: JSON.stringify(o[k]) };
  return {};
}

/** One row of the default columns. */
function defaultRow(input: unknown, ctx: ExportContext): Record<string, unknown> {
  const o: Obj = isObj(input) ? input : {};
  const subject = isObj(o.subject) ? str(o.subject.reference) : undefined;
  const ref = parseReference(subject);
  const code = isObj(o.code) ? o.code : {};
  const loinc = arr(code.coding).find((c) => isObj(c) && c.system === 'http://loinc.org' && str(c.code)) as Obj | undefined;
  const meta = isObj(o.meta) ? o.meta : {};
  const { value, unit } = observationValue(o);
  return {
    id: str(o.id),
    patient_id: ref?.type === 'Patient' ? ref.id : undefined,
    patient_source_key: subject ? ctx.sourceKey?.(subject) : undefined,
    questionnaire: str(code.text) ?? conceptText(code),
    loinc: loinc ? str(loinc.code) : undefined,
    category: joined(arr(o.category).map(conceptText)),
    status: str(o.status),
    effective: str(o.effectiveDateTime) ?? str(o.effectiveInstant) ?? (isObj(o.effectivePeriod) ? str(o.effectivePeriod.start) : undefined),
    value,
    unit,
    performer: joined(arr(o.performer).map((p) => (isObj(p) ? (str(p.reference) ?? str(p.display)) : undefined))),
    last_updated: str(meta.lastUpdated),
    version: str(meta.versionId),
  };
}

export function defaultExport(): CompiledExport {
  return {
    name: DEFAULT_EXPORT_NAME,
    columns: [...DEFAULT_COLUMNS],
    evalRow: async (input, ctx) => defaultRow(input, ctx),
  };
}
