/**
 * What the state keeps of a match value (issue 24 item 5). The ledger only needs equality of it — an interrupted
 * create is found again on the server by it — so it is stored as a digest, never in clear (`Quixotely|1980-01-02`
 * of a `name|birthDate` rule is patient data):
 * - `h1:<key id>:<hex>`: HMAC-SHA-256 keyed by CARE_STATE_SECRET, which lives beside the credentials, never in the
 *   state. The key id (an HMAC of a constant) tells a digest made under another secret: it cannot be matched.
 * - `s1:<hex>`: without a secret (a local state only), a plain SHA-256: guessable for small domains (docs/scale-out.md).
 * A value of neither form is a clear value an older state recorded: looked up as it is.
 */
import { createHmac, hash } from 'node:crypto';
import { CareEtlError, ExitCode, issue } from '../core/issues.js';
import { STATE_SECRET_ENV, type Secret } from '../core/secret.js';

/** Shortest CARE_STATE_SECRET accepted (as the export's pseudonym key). */
const MIN_STATE_SECRET_LENGTH = 16;

const KEYED = /^h1:([0-9a-f]{8}):[0-9a-f]{64}$/;
const UNKEYED = /^s1:[0-9a-f]{64}$/;
/** Domain separation: a match digest is never equal to another HMAC made with the same secret. */
const DOMAIN = 'care-etl/match/v1\u0000';

/** One way of digesting match values: `id` names it (`h1:<key id>` or `s1`), the same for every value it digests. */
export interface DigestScheme {
  readonly id: string;
  of(value: string): string;
}

/** How a match value read from the state is looked up: as it is (clear), by a scheme this run can compute, or not at all. */
type StoredMatch = { kind: 'clear' } | { kind: 'digest'; scheme: DigestScheme } | { kind: 'foreign' };

/** The hex digest of `value`: HMAC-SHA-256 under `key`, or plain SHA-256 without one; the same domain either way. */
function digestHex(value: string, key: Buffer | undefined): string {
  return key
    ? createHmac('sha256', key)
        .update(DOMAIN + value, 'utf8')
        .digest('hex')
    : hash('sha256', DOMAIN + value, 'hex');
}

const UNKEYED_SCHEME: DigestScheme = { id: 's1', of: (value) => `s1:${digestHex(value, undefined)}` };

/** The run's digest of match values: keyed when CARE_STATE_SECRET is set, else unkeyed. */
export class MatchDigest implements DigestScheme {
  /** `h1:<key id>`, or `s1` when unkeyed: every digest is `<id>:<hex>`. */
  readonly id: string;
  readonly #key?: Buffer;

  constructor(secret?: Secret) {
    if (!secret) {
      this.id = UNKEYED_SCHEME.id;
      return;
    }
    this.#key = Buffer.from(secret.reveal(), 'utf8');
    const keyId = createHmac('sha256', this.#key).update('care-etl/state-secret-id', 'utf8').digest('hex').slice(0, 8);
    this.id = `h1:${keyId}`;
  }

  get keyed(): boolean {
    return this.#key !== undefined;
  }

  /** What the state records for `value`. */
  of(value: string): string {
    return `${this.id}:${digestHex(value, this.#key)}`;
  }

  /** How `stored` (a match value read from the state) is looked up by this run. */
  reading(stored: string): StoredMatch {
    if (UNKEYED.test(stored)) return { kind: 'digest', scheme: UNKEYED_SCHEME };
    const keyed = KEYED.exec(stored);
    if (!keyed) return { kind: 'clear' };
    return this.#key && `h1:${keyed[1]}` === this.id ? { kind: 'digest', scheme: this } : { kind: 'foreign' };
  }
}

/** A value the state recorded as a digest (for messages: never shown, it tells nothing). */
export function isMatchDigest(value: string): boolean {
  return KEYED.test(value) || UNKEYED.test(value);
}

/**
 * The run's match digest, from CARE_STATE_SECRET. A shared state (PostgreSQL: several teams read it) without a
 * secret, or any too short secret, is a configuration error (exit 2) raised before anything is sent.
 */
export function matchDigestFor(opts: { secret?: Secret; sharedState: boolean }): MatchDigest {
  const generate = `Generate one once (\`openssl rand -hex 32\`), keep it beside the API key (a CI or Kubernetes secret, or the .env file) and give every runner of this state the same ${STATE_SECRET_ENV}.`;
  if (opts.secret && opts.secret.reveal().length < MIN_STATE_SECRET_LENGTH) {
    const message = `${STATE_SECRET_ENV} is too short (${opts.secret.reveal().length} characters; at least ${MIN_STATE_SECRET_LENGTH})`;
    throw new CareEtlError(message, { issues: [issue.error('state-secret-missing', message)], hint: generate, exitCode: ExitCode.config });
  }
  if (!opts.secret && opts.sharedState) {
    const message = `A shared (PostgreSQL) state needs ${STATE_SECRET_ENV}: the key its match values are kept under, so that no patient's name or birth date is readable in it`;
    throw new CareEtlError(message, { issues: [issue.error('state-secret-missing', message)], hint: generate, exitCode: ExitCode.config });
  }
  return new MatchDigest(opts.secret);
}

/** The message of a recorded intent whose digest this run cannot compute (another secret, or none now). */
export function foreignDigestMessage(current: MatchDigest): string {
  return `this key's interrupted create was recorded under another ${STATE_SECRET_ENV}${current.keyed ? '' : ' (none is set now)'}, so its server copy cannot be found by its match value; it stays pending (never created twice) — run again with the ${STATE_SECRET_ENV} of the run that recorded it`;
}
