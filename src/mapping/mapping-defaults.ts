/**
 * Defaults of a mapping file's keys, read from schemas/mapping.schema.json (their `default` keywords): the
 * schema, which editors show, is the one place they are written.
 */
import { schemaDefault } from '../schemas/schema-files.js';
import { RECONCILE_POLICIES, type ReconcilePolicy, type ResourceMapping } from './types.js';

const MAPPING_SCHEMA = 'mapping.schema.json';

/** `resources[].reconcile` when neither the file nor `--reconcile` sets it. */
export function defaultReconcile(): ReconcilePolicy {
  return schemaDefault(MAPPING_SCHEMA, '/definitions/resource/properties/reconcile', (v): v is ReconcilePolicy => RECONCILE_POLICIES.includes(v as ReconcilePolicy));
}

/** `resources[].onMissing` when the file does not set it. */
export function defaultOnMissing(): ResourceMapping['onMissing'] {
  return schemaDefault(MAPPING_SCHEMA, '/definitions/resource/properties/onMissing', (v): v is ResourceMapping['onMissing'] => v === 'ignore' || v === 'end');
}
