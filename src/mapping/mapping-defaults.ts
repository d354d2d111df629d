/**
 * Defaults of a mapping file's keys, read from schemas/mapping.schema.json (their `default` keywords): the
 * schema, which editors show, is the one place they are written.
 */
import { schemaDefault } from '../schemas/schema-files.js';
import { RECONCILE_POLICIES, type MappingLimits, type ReconcilePolicy, type ResourceMapping } from './types.js';

const MAPPING_SCHEMA = 'mapping.schema.json';

/** `resources[].reconcile` when neither the file nor `--reconcile` sets it. */
export function defaultReconcile(): ReconcilePolicy {
  return schemaDefault(MAPPING_SCHEMA, '/definitions/resource/properties/reconcile', (v): v is ReconcilePolicy =>
    RECONCILE_POLICIES.includes(v as ReconcilePolicy),
  );
}

/** `resources[].onMissing` when the file does not set it. */
export function defaultOnMissing(): ResourceMapping['onMissing'] {
  return schemaDefault(MAPPING_SCHEMA, '/definitions/resource/properties/onMissing', (v): v is ResourceMapping['onMissing'] => v === 'ignore' || v === 'end');
}

/** `resources[].allowEnding` when neither the file nor `--allow-ending` sets it (a count or `P%`). */
export function defaultAllowEnding(): string | number {
  return schemaDefault(
    MAPPING_SCHEMA,
    '/definitions/resource/properties/allowEnding',
    (v): v is string | number => typeof v === 'string' || typeof v === 'number',
  );
}

let limits: MappingLimits | undefined;
/** `limits:` when the file does not set them (a copy each call: the loader overrides its properties). */
export function defaultLimits(): MappingLimits {
  limits ??= {
    expressionTimeoutMs: schemaDefault(
      MAPPING_SCHEMA,
      '/definitions/limits/properties/expressionTimeoutMs',
      (v): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 1,
    ),
  };
  return { ...limits };
}
