/**
 * `--pseudonymize`: ids and patient source keys replaced by a keyed hash (HMAC-SHA-256), columns evaluated on an
 * allowlisted copy of the observation (no identifier, no free text unless `keepFreeText`).
 * Design: docs/design/export.md.
 */
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { configError } from '../core/issues.js';
import { registerSecret } from '../core/secret.js';
import { isObj, type Obj } from '../core/is-object.js';
import { parseReference } from './references.js';

export const PSEUDONYM_KEY_ENV = 'CARE_PSEUDONYM_KEY';
export const PSEUDONYM_LENGTH = 32;
export const MIN_PSEUDONYM_KEY_LENGTH = 16;

/**
 * The key of `--pseudonymize`: the file's content when a file is given, else the environment variable.
 * Registered as a secret before anything can print it. A CareEtlError (exit 2) when it is missing or short.
 */
export function resolvePseudonymKey(opts: { keyFile?: string; env?: NodeJS.ProcessEnv }): string {
  let key: string | undefined;
  if (opts.keyFile !== undefined) {
    let raw: string;
    try {
      raw = readFileSync(opts.keyFile, 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw configError(
        `Cannot read the pseudonym key file ${opts.keyFile}${code ? ` (${code})` : ''}`,
        'Give a readable file holding the key (one line, at least 16 characters).',
      );
    }
    key = raw.replace(/^\uFEFF/, '').trim();
    registerSecret(key);
    if (key === '')
      throw configError(`The pseudonym key file ${opts.keyFile} is empty`, 'Put the key (at least 16 characters, e.g. `openssl rand -hex 32`) in it.');
  } else {
    key = (opts.env ?? process.env)[PSEUDONYM_KEY_ENV]?.trim();
    registerSecret(key);
    if (!key) {
      throw configError(
        `\`--pseudonymize\` needs a key: set ${PSEUDONYM_KEY_ENV} or give \`--pseudonym-key-file FILE\``,
        `Create one once (e.g. \`openssl rand -hex 32 > pseudonym.key\`, mode 0600) and keep it: the same key gives the same pseudonyms in every export.`,
      );
    }
  }
  if (key.length < MIN_PSEUDONYM_KEY_LENGTH) {
    throw configError(
      `The pseudonym key is too short (${key.length} characters; at least ${MIN_PSEUDONYM_KEY_LENGTH})`,
      'Use a random key, e.g. `openssl rand -hex 32`.',
    );
  }
  return key;
}

/** Keyed pseudonyms (HMAC-SHA-256, hex, 32 characters), with a bounded cache. */
export class Pseudonymizer {
  readonly #key: Buffer;
  readonly #cache = new Map<string, string>();
  readonly #max: number;

  constructor(key: string, maxCached = 50_000) {
    this.#key = Buffer.from(key, 'utf8');
    this.#max = maxCached;
  }

  #of(domain: string, value: string): string {
    const k = `${domain}\u0000${value}`;
    let p = this.#cache.get(k);
    if (p === undefined) {
      p = createHmac('sha256', this.#key).update(`care-etl/v1\u0000${k}`, 'utf8').digest('hex').slice(0, PSEUDONYM_LENGTH);
      if (this.#cache.size >= this.#max) this.#cache.clear();
      this.#cache.set(k, p);
    }
    return p;
  }

  /** A server id of a resource type (the type is part of the input: Patient/1 and Practitioner/1 differ). */
  serverId(type: string, id: string): string {
    return this.#of('server-id', `${type}/${id}`);
  }

  /** A source key (e.g. MRN) as the loader recorded it. */
  sourceKey(key: string): string {
    return this.#of('source-key', key);
  }

  /** `Patient/123` (relative, absolute or versioned) → `Patient/<pseudonym>`; undefined when unparseable. */
  reference(reference: unknown): string | undefined {
    const ref = parseReference(reference);
    return ref ? `${ref.type}/${this.serverId(ref.type, ref.id)}` : undefined;
  }

  toString(): string {
    return 'Pseudonymizer([redacted])';
  }

  toJSON(): string {
    return 'Pseudonymizer([redacted])';
  }
}

/** value[x] kept by a pseudonymised export: coded, numeric, boolean, dates, ranges, ratios, periods. */
const SAFE_VALUES = new Set([
  'valueQuantity',
  'valueCodeableConcept',
  'valueCoding',
  'valueBoolean',
  'valueInteger',
  'valueDecimal',
  'valueRange',
  'valueRatio',
  'valueSampledData',
  'valueTime',
  'valueDateTime',
  'valueInstant',
  'valueDate',
  'valuePeriod',
]);
/** Kept as they are (codes, numbers, dates: no identifier, no free text beyond a concept's label). */
const SAFE_FIELDS = [
  'status',
  'category',
  'code',
  'effectiveDateTime',
  'effectiveInstant',
  'effectivePeriod',
  'effectiveTiming',
  'issued',
  'interpretation',
  'method',
  'bodySite',
  'dataAbsentReason',
  'referenceRange',
];
const REFERENCE_FIELDS = ['subject', 'encounter', 'focus', 'basedOn', 'partOf', 'performer', 'specimen', 'device', 'hasMember', 'derivedFrom'];

export interface PseudonymizedObservation {
  observation: Obj;
  /** Pseudonymised reference → the real one (so `$sourceKey` can look the real one up in the ledger). */
  real: Map<string, string>;
}

function copyValues(from: Obj, to: Obj, keepFreeText: boolean): void {
  for (const k of Object.keys(from)) {
    if (!k.startsWith('value') || from[k] === undefined || from[k] === null) continue;
    if (SAFE_VALUES.has(k) || (keepFreeText && k === 'valueString')) to[k] = structuredClone(from[k]);
  }
}

/** The allowlisted copy described in the header, references pseudonymised. */
export function pseudonymizeObservation(input: unknown, p: Pseudonymizer, keepFreeText = false): PseudonymizedObservation {
  const o: Obj = isObj(input) ? input : {};
  const real = new Map<string, string>();
  const out: Obj = { resourceType: 'Observation' };
  if (typeof o.id === 'string' && o.id !== '') out.id = p.serverId('Observation', o.id);
  if (isObj(o.meta)) {
    const meta: Obj = {};
    if (o.meta.versionId !== undefined) meta.versionId = o.meta.versionId;
    if (o.meta.lastUpdated !== undefined) meta.lastUpdated = o.meta.lastUpdated;
    out.meta = meta;
  }
  for (const k of SAFE_FIELDS) if (o[k] !== undefined) out[k] = structuredClone(o[k]);
  copyValues(o, out, keepFreeText);
  if (Array.isArray(o.component)) {
    out.component = o.component.filter(isObj).map((c) => {
      const comp: Obj = {};
      for (const k of ['code', 'interpretation', 'dataAbsentReason', 'referenceRange']) if (c[k] !== undefined) comp[k] = structuredClone(c[k]);
      copyValues(c, comp, keepFreeText);
      return comp;
    });
  }
  const ref = (r: unknown): Obj | undefined => {
    if (!isObj(r)) return undefined;
    const out: Obj = {};
    const pseudo = p.reference(r.reference);
    if (pseudo) {
      out.reference = pseudo;
      real.set(pseudo, r.reference as string);
    }
    if (typeof r.type === 'string') out.type = r.type;
    if (keepFreeText && typeof r.display === 'string') out.display = r.display;
    return out.reference !== undefined || out.display !== undefined ? out : undefined;
  };
  for (const k of REFERENCE_FIELDS) {
    const v = o[k];
    if (Array.isArray(v)) {
      const refs = v.map(ref).filter((x): x is Obj => x !== undefined);
      if (refs.length) out[k] = refs;
    } else if (v !== undefined) {
      const r = ref(v);
      if (r) out[k] = r;
    }
  }
  if (keepFreeText && o.note !== undefined) out.note = structuredClone(o.note);
  return { observation: out, real };
}
