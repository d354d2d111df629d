import { inspect } from 'node:util';

const REDACTED = '[redacted]';

/**
 * Holds a credential so that it cannot leak by accident: String(), JSON.stringify, util.inspect and
 * console.log all print `[redacted]`; only `reveal()` (called where the header is built) returns it.
 */
export class Secret {
  readonly #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  reveal(): string {
    return this.#value;
  }
  get isEmpty(): boolean {
    return this.#value.length === 0;
  }
  toString(): string {
    return REDACTED;
  }
  toJSON(): string {
    return REDACTED;
  }
  [inspect.custom](): string {
    return REDACTED;
  }
}

/** Last line of defence for text leaving the process (logs, reports, error output). */
export function redact(text: string, secrets: Iterable<Secret | string | undefined>): string {
  let out = text;
  for (const s of secrets) {
    const v = s instanceof Secret ? s.reveal() : s;
    if (v && v.length >= 4) out = out.split(v).join(REDACTED);
  }
  return out;
}

/**
 * Every credential this process has been given (flags, environment, the mapping's `target:`). Output that
 * may echo one — a server's error body, oclif's own error rendering, a reason stored in the ledger — is
 * passed through `redactKnown` before it leaves the process.
 */
const known = new Set<string>();

export function registerSecret(value: Secret | string | undefined): void {
  const v = value instanceof Secret ? value.reveal() : value;
  if (!v || v.length < 4) return;
  // The forms an echo may take: as is, inside a JSON string, in a URL, base64 (a Basic/Bearer header echoed).
  for (const form of [v, JSON.stringify(v).slice(1, -1), encodeURIComponent(v), Buffer.from(v).toString('base64')]) known.add(form);
}

/** @internal The CLI run in a test worker (test/helpers/cli.ts): each run starts with none, as a new process does. */
export function forgetSecrets(): void {
  known.clear();
}

export function redactKnown(text: string): string {
  return known.size ? redact(text, known) : text;
}

const MASK = '…';

/**
 * A message about a cell must name the field and the row, not the value (patient data): every occurrence of
 * the given values (as is and JSON-quoted) is replaced by `…`. Values shorter than 2 characters are left alone.
 */
export function redactValues(text: string, values: Iterable<unknown>): string {
  let out = text;
  for (const v of values) {
    if (typeof v !== 'string' && typeof v !== 'number') continue;
    const s = String(v);
    if (s.length < 2) continue;
    for (const form of [JSON.stringify(s), s]) out = out.split(form).join(MASK);
  }
  return out;
}

/** The key of the state's match digests (src/load/match-digest.ts): beside the credentials, never in the state. */
export const STATE_SECRET_ENV = 'CARE_STATE_SECRET';

/** CARE_STATE_SECRET as a `Secret` (undefined when unset or blank), registered for redaction before anything can print it. */
export function stateSecretFromEnv(env: NodeJS.ProcessEnv = process.env): Secret | undefined {
  const v = env[STATE_SECRET_ENV]?.trim();
  if (!v) return undefined;
  registerSecret(v);
  return new Secret(v);
}

// ---------------------------------------------------------------- issue 25 (settings): proxy credentials
/** The proxy variables undici reads (lower case wins there); their `user:password` is as secret as the API key. */
const PROXY_URL_VARIABLES = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy'] as const;

/**
 * Registers the credentials of a proxy URL (`http://user:pa%40ss@proxy:3128`, with or without scheme, parsable or
 * not) in every form an echo may take: `user:password` as written and percent-decoded — hence also base64 of it, as
 * in `Proxy-Authorization: Basic …` — and the password alone, both ways.
 */
export function registerUrlCredentials(url: string | undefined): void {
  const userinfo = url && /^(?:[a-z][a-z0-9+.-]*:\/\/)?([^@/?#]*)@/i.exec(url.trim())?.[1];
  if (!userinfo) return;
  const colon = userinfo.indexOf(':');
  const password = colon < 0 ? '' : userinfo.slice(colon + 1);
  for (const form of [userinfo, password]) {
    registerSecret(form);
    registerSecret(safeDecode(form));
  }
}

/** `registerUrlCredentials` for every proxy variable of `env`. */
export function registerProxySecrets(env: NodeJS.ProcessEnv = process.env): void {
  for (const name of PROXY_URL_VARIABLES) registerUrlCredentials(env[name]);
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
