/**
 * The two JSON-Schema validators every start needs — resource bodies (resource-schemas.ts) and mapping files
 * (mapping/load-mapping.ts) — set up once for both ways they are made:
 * - compiled by ajv in the process (running from src/, under vitest, or when the built ones are stale);
 * - compiled at build time into standalone code (scripts/build-validators.mjs writes `*.generated.cjs` beside the
 *   built copy of this file), which a built CLI loads instead: ajv is then never loaded and nothing is compiled at
 *   start-up (~110 ms of CPU at every command: issue 28 item 3).
 * Each generated module carries a digest of what it was made from (schema files, ajv options and versions); a file
 * changed since the build makes the process compile again rather than run an old schema.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Ajv, CodeOptions, Format, ValidateFunction } from 'ajv';
import { CALENDAR_DATE_FORMAT, isCalendarDate } from './calendar-date.js';
import { SCHEMA_DIR, schemaJson } from './schema-files.js';
import type { ResourceType } from './resource-types.js';

const requireHere = createRequire(import.meta.url);

export type SchemaName = ResourceType | 'Bundle';

/** The resource schemas' files; each `$ref`s common.schema.json. */
export const RESOURCE_SCHEMA_FILES: Record<SchemaName, string> = {
  Patient: 'patient.schema.json',
  Practitioner: 'practitioner.schema.json',
  CareTeam: 'careteam.schema.json',
  Observation: 'observation.schema.json',
  Bundle: 'bundle.schema.json',
};
export const COMMON_SCHEMA_FILE = 'common.schema.json';
export const MAPPING_SCHEMA_FILE = 'mapping.schema.json';

export const schemaId = (file: string): string => `https://care-etl.dev/schemas/${file}`;

/** The formats the resource schemas use, as ajv holds them (the generated code calls these same objects). */
export function resourceFormats(): Record<string, Format> {
  const { fullFormats } = requireHere('ajv-formats/dist/formats.js') as typeof import('ajv-formats/dist/formats.js');
  return { 'date-time': fullFormats['date-time'], [CALENDAR_DATE_FORMAT]: { type: 'string', validate: isCalendarDate } };
}

/** ajv, loaded only when something is compiled in the process. */
function newAjv(opts: import('ajv').Options): Ajv {
  const { Ajv: AjvClass } = requireHere('ajv') as typeof import('ajv');
  return new AjvClass(opts);
}

/** allowUnionTypes: participant role codings are ["string","null"] (strict mode forbids unions otherwise). */
const RESOURCE_OPTIONS = { allErrors: true, strict: true, allowUnionTypes: true } as const;
/** verbose: the mapping's messages read the failing schema and value. */
const MAPPING_OPTIONS = { allErrors: true, verbose: true, strict: true, validateSchema: false } as const;

/** Every resource schema added, none compiled yet. */
export function resourceAjv(code?: CodeOptions): Ajv {
  const ajv = newAjv({ ...RESOURCE_OPTIONS, formats: resourceFormats(), code });
  ajv.addSchema(schemaJson(COMMON_SCHEMA_FILE) as object);
  for (const file of Object.values(RESOURCE_SCHEMA_FILES)) ajv.addSchema(schemaJson(file) as object);
  return ajv;
}

/**
 * The mapping file's schema added. The shipped schema is checked against JSON Schema's meta-schema by
 * test/mapping/mapping-schema.test.ts: no meta-schema check here.
 */
export function mappingAjv(code?: CodeOptions): Ajv {
  const ajv = newAjv({ ...MAPPING_OPTIONS, code });
  ajv.addSchema(schemaJson(MAPPING_SCHEMA_FILE) as object, MAPPING_SCHEMA_FILE);
  return ajv;
}

/** What each generated module is made from: its schema files and ajv options. */
export const GENERATED = {
  resources: { module: 'resource-validators.generated.cjs', files: [COMMON_SCHEMA_FILE, ...Object.values(RESOURCE_SCHEMA_FILES)], options: RESOURCE_OPTIONS },
  mapping: { module: 'mapping-validator.generated.cjs', files: [MAPPING_SCHEMA_FILE], options: MAPPING_OPTIONS },
} as const;

/**
 * The digest of what a generated module is made from, as it is now: its schema files, its ajv options and the
 * installed ajv and ajv-formats versions (a generated module records the one it was made from).
 */
export function generatedDigest(which: keyof typeof GENERATED): string {
  const { files, options } = GENERATED[which];
  const version = (pkg: string) => (requireHere(`${pkg}/package.json`) as { version: string }).version;
  const h = createHash('sha256').update(JSON.stringify({ options, ajv: version('ajv'), formats: version('ajv-formats') }));
  for (const f of files) h.update(`\0${f}\0`).update(readFileSync(join(SCHEMA_DIR, f)));
  return h.digest('hex');
}

/** A generated module: its digest, and its validators made with the given formats. */
interface GeneratedModule {
  digest: string;
  validators(formats: Record<string, Format>): Record<string, ValidateFunction>;
}

/**
 * The validators built with this copy of care-etl, or undefined: none beside this file (running from src/), or made
 * from schema files, options or ajv versions that have changed since.
 */
export function generatedValidators(which: keyof typeof GENERATED, formats: Record<string, Format> = {}): Record<string, ValidateFunction> | undefined {
  const { module } = GENERATED[which];
  let mod: GeneratedModule;
  try {
    mod = requireHere(`./${module}`) as GeneratedModule;
  } catch (err) {
    const e = err as { code?: string; message?: string };
    if (e.code === 'MODULE_NOT_FOUND' && e.message?.includes(module)) return undefined;
    throw err;
  }
  return mod.digest === generatedDigest(which) ? mod.validators(formats) : undefined;
}
