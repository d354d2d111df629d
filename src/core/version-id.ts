import { isWellFormed } from './well-formed.js';

/** Longest `meta.versionId` recorded (FHIR's id syntax allows 64 characters). */
const MAX_VERSION_ID = 256;

/**
 * A server's `meta.versionId` as the state records it, or undefined. FHIR gives it the id syntax, but a server or a
 * gateway may send a number (kept, as text), an object, a NUL character or a megabyte: SQLite refused to bind an
 * object (it reads as named parameters) and PostgreSQL to store a NUL, so the run failed — and every run after it.
 * The state keeps the version for people (`state` commands), never to decide anything: what it cannot hold is left out.
 */
export function versionIdOf(v: unknown): string | undefined {
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  if (typeof v !== 'string' || v.length === 0 || v.length > MAX_VERSION_ID) return undefined;
  return /[\u0000-\u001f\u007f]/.test(v) || !isWellFormed(v) ? undefined : v;
}
