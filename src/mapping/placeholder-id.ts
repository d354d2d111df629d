import { createHash } from 'node:crypto';

/** FHIR ids: `[A-Za-z0-9\-.]{1,64}`. */
const MAX_ID = 64;

/**
 * The id a reference resolves to when no server assigned one: dry runs (`dryrun`), `validate --sample`
 * (`sample`) and `care-etl test` stubs (`auto`: the key itself). Deterministic (golden files), always a valid
 * FHIR id whatever the key's length or characters; a key that has to be cut keeps a hash of the whole key, so
 * two long keys with a common start stay distinct.
 */
export function placeholderId(key: string, prefix?: string): string {
  const id = `${prefix ? `${prefix}-` : ''}${key.replace(/[^A-Za-z0-9\-.]/g, '-')}` || '-';
  if (id.length <= MAX_ID) return id;
  const hash = createHash('sha256').update(key).digest('hex').slice(0, 12);
  return `${id.slice(0, MAX_ID - hash.length - 1)}-${hash}`;
}
