/**
 * The schemas/ folder and the configuration defaults written in it. A default of a configuration file (mapping,
 * mapping test) is written once, as the `default` keyword of its property in the file's JSON Schema — which is
 * also what editors show — and code reads it from there (Redpanda Connect's "the spec is the source of defaults").
 * No ajv here: reading a default must not compile validators.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Walks up to the folder holding package.json: the same code runs from src/ (vitest) and dist/ (built). */
function findPackageRoot(start: string): string {
  for (let dir = start; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'schemas'))) return dir;
    if (dirname(dir) === dir) throw new Error(`care-etl: cannot find the schemas/ folder above ${start}`);
  }
}

export const SCHEMA_DIR: string = join(findPackageRoot(dirname(fileURLToPath(import.meta.url))), 'schemas');

const parsed = new Map<string, unknown>();

/** A file of schemas/ (`mapping.schema.json`), parsed once. */
export function schemaJson(file: string): unknown {
  if (!parsed.has(file)) parsed.set(file, JSON.parse(readFileSync(join(SCHEMA_DIR, file), 'utf8')) as unknown);
  return parsed.get(file);
}

/**
 * The `default` of the property at `pointer` (a JSON pointer into the schema, e.g.
 * `/definitions/resource/properties/reconcile`), checked by `accept`. A missing or unacceptable default is a
 * defect of the schema file, not of the user's input: a plain Error naming the file and the pointer.
 */
export function schemaDefault<T>(file: string, pointer: string, accept: (v: unknown) => v is T): T {
  let node: unknown = schemaJson(file);
  for (const seg of pointer.split('/').slice(1)) {
    const key = seg.replace(/~1/g, '/').replace(/~0/g, '~');
    node = node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[key] : undefined;
  }
  const value = node !== null && typeof node === 'object' ? (node as { default?: unknown }).default : undefined;
  if (!accept(value)) throw new Error(`schemas/${file}: ${pointer} has no valid \`default\` (got ${JSON.stringify(value)})`);
  return value;
}
