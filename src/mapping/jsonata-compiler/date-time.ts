/**
 * `$fromMillis(millis, picture)` and `$toMillis(timestamp)` for compiled calls, without JSONata's per-call work (its
 * signature check, and the picture analysed again on every call): the common forms answered here with JSONata's
 * exact answers — a picture of literals and zero-padded decimal markers of year, month, day, hour, minute, second
 * and millisecond (`[Y0001]-[M01]-[D01]T[H01]:[m01]:[s01]Z`), analysed once; an ISO 8601 timestamp through JSONata's
 * own check and `Date.parse`. Anything else (other markers or presentations, a time zone, a negative year, an
 * argument of another type, an invalid timestamp and its error) goes to JSONata's implementation, as before.
 * Checked against JSONata on the shipped mappings' pictures and edge values: test/mapping/jsonata-date-time.test.ts.
 */
import type { CallableFunction } from './types.js';

/** JSONata's test of an ISO 8601 timestamp (jsonata.js `iso8601regex`), as it is there. */
const ISO_8601 = /^\d{4}(-[01]\d)?(-[0-3]\d)?(T[0-2]\d:[0-5]\d:[0-5]\d)?(\.\d+)?([+-][0-2]\d:?[0-5]\d|Z)?$/;

interface Marker {
  /** JSONata's `getDateTimeFragment` of the component, in UTC. */
  get: (d: Date) => number;
  /** Mandatory digits (zero-padded to). */
  digits: number;
  /** The year's width limit (JSONata keeps its last `digits` digits when there are 2 or more); 0: none. */
  modulo: number;
}

type Part = string | Marker;

const COMPONENTS: Record<string, (d: Date) => number> = {
  Y: (d) => d.getUTCFullYear(),
  M: (d) => d.getUTCMonth() + 1,
  D: (d) => d.getUTCDate(),
  H: (d) => d.getUTCHours(),
  m: (d) => d.getUTCMinutes(),
  s: (d) => d.getUTCSeconds(),
  f: (d) => d.getUTCMilliseconds(),
};

/** `[C01]`: a component and a decimal presentation of mandatory digits, nothing else (no width, names, whitespace). */
const MARKER = /^([YMDHmsf])(0*1)$/;

/** The picture's parts, or null when it is not of the forms answered here. */
function analyse(picture: string): Part[] | null {
  const parts: Part[] = [];
  let i = 0;
  while (i < picture.length) {
    const open = picture.indexOf('[', i);
    const literal = picture.slice(i, open === -1 ? picture.length : open);
    if (literal.includes(']')) return null; // `]]` and stray brackets: JSONata's rules
    if (literal !== '') parts.push(literal);
    if (open === -1) break;
    const close = picture.indexOf(']', open);
    const m = close === -1 ? null : MARKER.exec(picture.slice(open + 1, close));
    if (m === null) return null;
    const digits = m[2]!.length;
    parts.push({ get: COMPONENTS[m[1]!]!, digits, modulo: m[1] === 'Y' && digits >= 2 ? 10 ** digits : 0 });
    i = close + 1;
  }
  return parts;
}

const MAX_PICTURES = 64;
const pictures = new Map<string, Part[] | null>();

function partsOf(picture: string): Part[] | null {
  let parts = pictures.get(picture);
  if (parts === undefined) {
    if (pictures.size >= MAX_PICTURES) pictures.clear();
    parts = analyse(picture);
    pictures.set(picture, parts);
  }
  return parts;
}

/** The formatted time, or undefined where JSONata's own formatting is needed (a negative year). */
function format(parts: Part[], millis: number): string | undefined {
  const date = new Date(millis);
  let out = '';
  for (const p of parts) {
    if (typeof p === 'string') {
      out += p;
      continue;
    }
    let v = p.get(date);
    if (v < 0) return undefined;
    if (p.modulo !== 0) v %= p.modulo;
    const s = String(v);
    out += s.length < p.digits ? '0'.repeat(p.digits - s.length) + s : s;
  }
  return out;
}

/** JSONata's `$fromMillis` (`native`), with the common picture forms answered here. */
export function fastFromMillis(native: CallableFunction): CallableFunction {
  return {
    ...native,
    call(args, input, env) {
      if (args.length === 2) {
        const [millis, picture] = args;
        if (typeof millis === 'number' && Number.isFinite(millis) && typeof picture === 'string') {
          const parts = partsOf(picture);
          const out = parts === null ? undefined : format(parts, millis);
          if (out !== undefined) return out;
        }
      }
      return native.call(args, input, env);
    },
  };
}

/** JSONata's `$toMillis` without a picture (`native`): a valid ISO 8601 timestamp answered here. */
export function fastToMillis(native: CallableFunction): CallableFunction {
  return {
    ...native,
    call(args, input, env) {
      if (args.length === 1) {
        const ts = args[0];
        if (typeof ts === 'string' && ISO_8601.test(ts)) return Date.parse(ts);
      }
      return native.call(args, input, env);
    },
  };
}
