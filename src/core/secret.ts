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
  if (v && v.length >= 4) known.add(v);
}

export function redactKnown(text: string): string {
  return known.size ? redact(text, known) : text;
}
