/**
 * Text from outside (a server's answers) as the state records it: SQLite cannot bind an object (it reads it as
 * named parameters) and PostgreSQL cannot store a NUL character — either failed the run, and every run after it.
 */
import { isWellFormed } from './well-formed.js';

/** Longest id or version recorded (FHIR's id syntax allows 64 characters). */
const MAX_STORED_TEXT = 256;

/**
 * A server's `meta.versionId` as the state records it, or undefined. FHIR gives it the id syntax, but a server or a
 * gateway may send a number (kept, as text), an object, a NUL character or a megabyte: SQLite refused to bind an
 * object (it reads as named parameters) and PostgreSQL to store a NUL, so the run failed — and every run after it.
 * The state keeps the version for people (`state` commands), never to decide anything: what it cannot hold is left out.
 */
export function versionIdOf(v: unknown): string | undefined {
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  return isStorableText(v) ? v : undefined;
}

/** Text of 1 to MAX_STORED_TEXT characters, well-formed, without control characters: what an id or a version may be. */
export function isStorableText(v: unknown): v is string {
  return typeof v === 'string' && v.length > 0 && v.length <= MAX_STORED_TEXT && !/[\u0000-\u001f\u007f]/.test(v) && isWellFormed(v);
}

/** Longest rejection reason recorded: the message names the problem; a server's echo of the whole body is not kept. */
const MAX_REASON = 2000;

/** A rejection's reason as the state records it: control characters but tab, LF and CR (NUL included) shown as U+FFFD, at most MAX_REASON characters. */
export function reasonText(reason: string): string {
  const clean = reason.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, '\ufffd');
  return clean.length > MAX_REASON ? `${clean.slice(0, MAX_REASON - 1)}…` : clean;
}
