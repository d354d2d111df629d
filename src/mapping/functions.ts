/**
 * The care-etl function library (docs/mapping-functions.md), registered once per expression; the row's
 * `EvalContext` travels in `evaluate()`'s bindings under CTX_BINDING, never in a mutable slot.
 * Design: docs/design/mapping-evaluation.md.
 */
import type { KnownIssueCode } from '../core/issues.js';
import type jsonata from 'jsonata';
import { DateTime, IANAZone } from 'luxon';
import { MappingFunctionError } from './errors.js';
import { plainDateParser } from './plain-date.js';
import { isIndexedLookup } from './types.js';

export interface EvalContext {
  /** `"<Type>/<id>"` of the resource produced by mapping `name` from source key `key`; throws RefError. */
  resolveRef(name: string, key: string): string;
  /** Source key of the resource behind a reference (`Patient/123` → `00123`), for exports. */
  sourceKey?(reference: string): string | undefined;
  now: Date;
}

/** Binding name of the per-row EvalContext (not a valid name for users: the unknown-variable check flags it). */
export const CTX_BINDING = '__careEtlEvalContext';

/** Functions of the library (names without `$`). */
export const LIBRARY_FUNCTIONS = ['date', 'dateTime', 'name', 'clean', 'phone', 'splitList', 'lookup', 'ref', 'sourceKey', 'now', 'millis'] as const;

/** Functions that need the per-row EvalContext (only allowed where one is passed: map, export columns). */
export const CONTEXT_FUNCTIONS = new Set(['ref', 'sourceKey']);

/** JSONata 2.2 built-in functions (checked against the installed jsonata by test/mapping/functions.test.ts). */
export const JSONATA_BUILTINS = [
  'sum',
  'count',
  'max',
  'min',
  'average',
  'string',
  'substring',
  'substringBefore',
  'substringAfter',
  'lowercase',
  'uppercase',
  'length',
  'trim',
  'pad',
  'match',
  'contains',
  'replace',
  'split',
  'join',
  'formatNumber',
  'formatBase',
  'formatInteger',
  'parseInteger',
  'number',
  'floor',
  'ceil',
  'round',
  'abs',
  'sqrt',
  'power',
  'random',
  'boolean',
  'not',
  'map',
  'zip',
  'filter',
  'single',
  'reduce',
  'sift',
  'keys',
  'lookup',
  'append',
  'exists',
  'spread',
  'merge',
  'reverse',
  'each',
  'error',
  'assert',
  'type',
  'sort',
  'shuffle',
  'distinct',
  'base64encode',
  'base64decode',
  'encodeUrlComponent',
  'encodeUrl',
  'decodeUrlComponent',
  'decodeUrl',
  'eval',
  'toMillis',
  'fromMillis',
  'clone',
  'now',
  'millis',
] as const;

const MAX_SHOWN = 40;
/** Values in messages are truncated (they come from row data). */
export function show(v: unknown): string {
  const s = typeof v === 'string' ? v : (JSON.stringify(v) ?? String(v));
  return s.length > MAX_SHOWN ? `${s.slice(0, MAX_SHOWN)}…` : s;
}

/** What a value looks like without what it says: `3 characters`, `a number`. */
function describeShape(v: unknown): string {
  return typeof v === 'string' ? `${v.length} character${v.length === 1 ? '' : 's'}` : `a ${typeof v}`;
}

function fail(code: KnownIssueCode, message: string): never {
  throw new MappingFunctionError(code, message);
}

/** Applies `f` to a value, or to each element of an array (dropping undefined results). */
function each<T>(v: unknown, f: (x: unknown) => T | undefined): T | T[] | undefined {
  if (Array.isArray(v)) {
    const out: T[] = [];
    for (const x of v) {
      const r = f(x);
      if (r !== undefined) out.push(r);
    }
    return out.length ? out : undefined;
  }
  return f(v);
}

function text(v: unknown, fn: string): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return fail('type-invalid', `$${fn} expects text, got ${Array.isArray(v) ? 'an array' : typeof v}`);
}

// ---------------------------------------------------------------------------------------------- dates

export interface DateFormat {
  source: string;
  luxon: string;
}

const FAMILIAR_TOKENS: Record<string, string> = {
  YYYY: 'yyyy',
  YY: 'yy',
  MM: 'MM',
  M: 'M',
  DD: 'dd',
  D: 'd',
  HH: 'HH',
  mm: 'mm',
  ss: 'ss',
};
const TOKEN_CHARS = new Set(['Y', 'M', 'D', 'H', 'm', 's']);
const formatCache = new Map<string, DateFormat | string>();

/**
 * A literal format that parses but cannot mean what it says (checked when the mapping is loaded): lower-case `dd` or
 * `yyyy` are literal text (the tokens are upper-case), and `mm` without `HH` is minutes where the month was meant.
 */
export function dateFormatMistake(format: string): string | undefined {
  if (format.startsWith('luxon:')) return undefined;
  const lower = /(?<![A-Za-z])(d{1,2}|y{2,4})(?![A-Za-z])/.exec(format)?.[1];
  if (lower)
    return `\`${lower}\` in date format \`${format}\` is literal text, not a token: write \`${lower.toUpperCase()}\` (tokens are upper-case but \`mm\` minutes and \`ss\` seconds)`;
  if (/(?<!m)mm(?!m)/.test(format) && !format.includes('HH') && !format.includes('MM'))
    return `\`mm\` in date format \`${format}\` is minutes, and there is no hour (\`HH\`) nor month: write \`MM\` for the month`;
  return undefined;
}

/**
 * Translates a format (`YYYY-MM-DD`, or `luxon:<luxon format>`) into a luxon format. Only the tokens
 * YYYY YY MM M DD D HH mm ss are recognised (a run of Y/M/D/H/m/s letters must be exactly one of them);
 * every other character is literal. Returns an error message for an unsupported format.
 */
export function translateDateFormat(format: string): DateFormat | string {
  const cached = formatCache.get(format);
  if (cached !== undefined) return cached;
  let result: DateFormat | string;
  if (format.startsWith('luxon:')) {
    const f = format.slice(6);
    result = f ? { source: format, luxon: f } : 'empty luxon: format';
  } else if (format === '') {
    result = 'empty date format';
  } else {
    let out = '';
    let literal = '';
    result = '';
    for (let i = 0; i < format.length;) {
      const ch = format[i]!;
      if (TOKEN_CHARS.has(ch)) {
        let j = i;
        while (format[j] === ch) j++;
        const token = format.slice(i, j);
        const lux = FAMILIAR_TOKENS[token];
        if (!lux) {
          result = `unsupported token \`${token}\` in date format \`${format}\` (use YYYY, YY, MM, M, DD, D, HH, mm, ss, or a \`luxon:\` format)`;
          break;
        }
        if (literal) out += `'${literal}'`;
        literal = '';
        out += lux;
        i = j;
      } else if (ch === "'") {
        result = `single quotes are not supported in date format \`${format}\``; // luxon cannot parse a literal '
        break;
      } else {
        literal += ch;
        i++;
      }
    }
    if (result === '') {
      if (literal) out += `'${literal}'`;
      result = { source: format, luxon: out };
    }
  }
  if (formatCache.size < 1000) formatCache.set(format, result);
  return result;
}

/** Checks a `$dateTime` zone argument; returns an error message or undefined. */
export function checkZone(zone: string): string | undefined {
  if (zone === 'UTC' || zone === 'utc' || /^UTC[+-]\d{1,2}(:\d{2})?$/.test(zone)) return undefined;
  return IANAZone.isValidZone(zone) ? undefined : `unknown time zone \`${zone}\` (use an IANA name such as America/New_York, or UTC)`;
}

function explainInvalid(dt: DateTime): string {
  const expl = dt.invalidExplanation ?? '';
  const unit = /as an? (\w+), which is invalid/.exec(expl);
  if (unit) return `${unit[1]} out of range`;
  if (dt.invalidReason === 'unparsable') return 'does not match the format';
  return dt.invalidReason ?? 'invalid';
}

type FormatParser = ReturnType<typeof DateTime.buildFormatParser>;
const parsers = new Map<string, FormatParser | string>();

/**
 * One luxon parser per format, built once: `fromFormat` re-tokenises the format on every call, which was
 * ~15 % of a re-run of unchanged rows (bench/rerun-unchanged.mjs). Returns the problem text for a bad format.
 */
function formatParser(format: string): FormatParser | string {
  let p = parsers.get(format);
  if (p === undefined) {
    const f = translateDateFormat(format);
    p = typeof f === 'string' ? f : DateTime.buildFormatParser(f.luxon, { locale: 'en-US' });
    parsers.set(format, p);
  }
  return p;
}

function parseDate(fn: 'date' | 'dateTime', value: unknown, format: unknown, zone: string): DateTime | undefined {
  const raw = text(value, fn);
  if (raw === undefined) return undefined;
  const s = raw.trim();
  if (s === '') return undefined;
  if (typeof format !== 'string') return fail('date-format-invalid', `$${fn} needs a format as second argument, e.g. "YYYY-MM-DD"`);
  const parser = formatParser(format);
  if (typeof parser === 'string') return fail('date-format-invalid', parser);
  const dt = DateTime.fromFormatParser(s, parser, { zone, locale: 'en-US' });
  if (!dt.isValid) {
    if (dt.invalidReason === 'unsupported zone') return fail('date-zone-invalid', checkZone(zone) ?? `unknown time zone \`${zone}\``);
    const what = fn === 'date' ? 'date' : 'date-time';
    // Never the value itself (a birth date is patient data): the row and the expression's position say where.
    return fail('date-invalid', `the value is not a valid ${what} in format \`${format}\` (${explainInvalid(dt)})`);
  }
  return dt;
}

/** `$date(value, format)` → `yyyy-MM-dd`. */
export function fnDate(value: unknown, format: unknown): string | string[] | undefined {
  if (!Array.isArray(value)) return dateOf(value, format);
  return each(value, (v) => dateOf(v, format));
}

function dateOf(v: unknown, format: unknown): string | undefined {
  return plainDate(v, format) ?? parseDate('date', v, format, 'UTC')?.toFormat('yyyy-MM-dd');
}

/** A valid date in a plain format without luxon (plain-date.ts); undefined: luxon decides (and words any error). */
function plainDate(v: unknown, format: unknown): string | undefined {
  if (typeof v !== 'string' || typeof format !== 'string') return undefined;
  const s = v.trim();
  return s === '' ? undefined : plainDateParser(format)?.(s);
}

/** `$dateTime(value, format, zone = "UTC")` → ISO 8601 with offset (`Z` for UTC). */
export function fnDateTime(value: unknown, format: unknown, zone?: unknown): string | string[] | undefined {
  const z = zone === undefined || zone === null || zone === '' ? 'UTC' : String(zone);
  if (z !== 'UTC') {
    const bad = checkZone(z);
    if (bad) fail('date-zone-invalid', bad);
  }
  return each(value, (v) => parseDate('dateTime', v, format, z)?.toISO({ suppressMilliseconds: true }) ?? undefined);
}

// ---------------------------------------------------------------------------------------------- text

/** `$clean(s)`: trimmed text; empty → undefined (the field is dropped). */
export function fnClean(value: unknown): string | string[] | undefined {
  return Array.isArray(value) ? each(value, cleanOf) : cleanOf(value);
}

function cleanOf(v: unknown): string | undefined {
  if (v !== null && typeof v === 'object') return fail('type-invalid', '$clean expects text');
  const s = text(v, 'clean')?.trim();
  return s ? s : undefined;
}

// A word starts after anything that is not a letter, digit or combining mark: a space, `-`, `'`, and a quote or parenthesis
// (`"DOE"` → `"Doe"`); a mark belongs to its letter (decomposed `JOSE\u0301PHINE` → `Joséphine`, not `JoséPhine`).
const NAME_SEPARATOR = /(^|[^\p{L}\p{M}\p{N}])(\p{Ll})/gu;

/**
 * `$name(s)`: collapse whitespace; names written in ALL CAPS are title-cased per word, hyphen and
 * apostrophe part (`O'BRIEN` → `O'Brien`, `SMITH-JONES` → `Smith-Jones`, `MCDONALD` → `McDonald`);
 * names with any lowercase letter are kept as written (`McDonald`, `van der Berg`).
 */
export function fnName(value: unknown): string | string[] | undefined {
  return Array.isArray(value) ? each(value, nameOf) : nameOf(value);
}

function nameOf(v: unknown): string | undefined {
  const t = text(v, 'name');
  if (t === undefined) return undefined;
  const plain = plainAsciiName(t);
  if (plain === MIXED_CASE) return t;
  if (plain === ALL_CAPS) return titleCaseAscii(t);
  const s = t.replace(/\s+/g, ' ').trim();
  if (!s) return undefined;
  if (!/\p{Lu}/u.test(s) || /\p{Ll}/u.test(s)) return s;
  return s
    .toLowerCase()
    .replace(NAME_SEPARATOR, (_m, sep: string, ch: string) => sep + ch.toUpperCase())
    .replace(/(^|[^\p{L}\p{M}\p{N}])Mc(\p{Ll})/gu, (_m, sep: string, ch: string) => `${sep}Mc${ch.toUpperCase()}`);
}

/**
 * `$name`'s two replacements on a plain-ASCII ALL-CAPS name, in one pass over its lower case: a letter first or
 * after anything but a letter or digit (a space, `-`, `'`, a quote) is upper-cased, and so is the letter after such a word's `Mc` (`MCDONALD` → `McDonald`).
 */
function titleCaseAscii(t: string): string {
  const s = t.toLowerCase();
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const wordStart = i === 0 || isNameSeparator(s.charCodeAt(i - 1));
    if (wordStart && c >= 97 && c <= 122) {
      out += String.fromCharCode(c - 32);
      // `Mc` + a letter: that letter too (`(^|sep)Mc(\p{Ll})` on the title-cased text)
      if (c === 109 && s.charCodeAt(i + 1) === 99 && isLowerAscii(s.charCodeAt(i + 2))) {
        out += `c${String.fromCharCode(s.charCodeAt(i + 2) - 32)}`;
        i += 2;
      }
    } else out += s[i];
  }
  return out;
}

/** Not an ASCII letter or digit (the text is plain ASCII here). */
function isNameSeparator(c: number): boolean {
  return !(isLowerAscii(c) || (c >= 48 && c <= 57));
}

function isLowerAscii(c: number): boolean {
  return c >= 97 && c <= 122;
}

const MIXED_CASE = 1;
const ALL_CAPS = 2;
const OTHER = 0;

/**
 * One pass over a name in printable ASCII with single inner spaces (the usual cell), telling what `$name`'s
 * regexes would: MIXED_CASE — a lowercase letter (or no letter at all): kept as written; ALL_CAPS — uppercase
 * letters only: title-cased. OTHER (anything else: whitespace to collapse or trim, non-ASCII): the regexes decide.
 */
function plainAsciiName(s: string): number {
  const n = s.length;
  if (n === 0) return OTHER;
  let upper = false;
  let lower = false;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c === 32) {
      if (i === 0 || i === n - 1 || s.charCodeAt(i - 1) === 32) return OTHER;
    } else if (c < 33 || c > 126) return OTHER;
    else if (c >= 97 && c <= 122) lower = true;
    else if (c >= 65 && c <= 90) upper = true;
  }
  return upper && !lower ? ALL_CAPS : MIXED_CASE;
}

/** Why `$phone` cannot use `country` (upper-cased) as its default country; undefined when it can. Also checked at load for a literal. */
export function phoneCountryProblem(country: string): string | undefined {
  if (NANP.has(country) || /^\+[1-9]\d{0,2}$/.test(country)) return undefined;
  return `$phone default country \`${show(country)}\` is not supported (use US, CA or a calling code such as +44)`;
}

/** `$splitList(s, separator = ",")`: multi-value cell → trimmed, non-empty parts; none → undefined. */
export function fnSplitList(value: unknown, separator?: unknown): string[] | undefined {
  const sep = separator === undefined || separator === null ? ',' : separator;
  if (typeof sep !== 'string' || sep === '') fail('type-invalid', '$splitList separator must be non-empty text');
  const out: string[] = [];
  const add = (v: unknown) => {
    const s = text(v, 'splitList');
    if (s === undefined) return;
    for (const part of s.split(sep)) {
      const t = part.trim();
      if (t) out.push(t);
    }
  };
  if (Array.isArray(value)) value.forEach(add);
  else add(value);
  return out.length ? out : undefined;
}

// ---------------------------------------------------------------------------------------------- phone

const NANP = new Set(['US', 'CA']);
// No leading `\s*`: unanchored, it made the search quadratic in a run of spaces (50,000 spaces: 3 s). The
// space before the extension is trimmed off the rest instead (`withoutExtension`).
const EXTENSION = /(?:ext\.?|extension|x|#)\s*\d{1,6}$/i;

/** A trimmed number without its trailing extension (`x12`, `ext. 12`, `#12`). */
function withoutExtension(raw: string): string {
  const m = EXTENSION.exec(raw);
  return m ? raw.slice(0, m.index).trimEnd() : raw;
}

/**
 * `$phone(s, defaultCountry = "US")`: normalise to E.164 (`+15551234567`).
 * - `+` prefix: international, kept as `+` and 8–15 digits;
 * - defaultCountry `US`/`CA` (NANP): 10 digits, or 11 starting with 1;
 * - defaultCountry `+<calling code>` (e.g. `+44`): one leading trunk `0` is dropped, 8–15 digits in total.
 * Separators `( ) - . /` and spaces are allowed; a trailing extension (`x12`, `ext. 12`, `#12`) is
 * dropped. Letters or a wrong digit count → `phone-invalid` (the record is rejected: a wrong number must
 * not be stored silently). Empty → undefined. The number itself is never put in the message.
 */
export function fnPhone(value: unknown, defaultCountry?: unknown): string | string[] | undefined {
  const country = defaultCountry === undefined || defaultCountry === null || defaultCountry === '' ? 'US' : String(defaultCountry).toUpperCase();
  const bad = phoneCountryProblem(country);
  if (bad) fail('phone-country', bad);
  return Array.isArray(value) ? each(value, (v) => phoneOf(v, country)) : phoneOf(value, country);
}

function phoneOf(v: unknown, country: string): string | undefined {
  const raw = text(v, 'phone')?.trim();
  if (!raw) return undefined;
  let s = raw;
  if (!isPlainPhone(raw)) {
    s = withoutExtension(raw);
    if (!/^\+?[\d\s().\-/]+$/.test(s)) return fail('phone-invalid', 'not a valid phone number (contains letters or symbols)');
  }
  const digits = s.replace(/\D/g, '');
  if (s.startsWith('+')) {
    if (digits.length < 8 || digits.length > 15 || digits.startsWith('0'))
      return fail('phone-invalid', `not a valid international phone number (${digits.length} digits, 8 to 15 expected)`);
    return `+${digits}`;
  }
  if (NANP.has(country)) {
    if (digits.length === 10) return `+1${digits}`;
    if (digits.length === 11 && digits.startsWith('1')) return `+${digits}`;
    return fail('phone-invalid', `not a valid ${country} phone number (${digits.length} digits, 10 expected)`);
  }
  const national = digits.startsWith('0') ? digits.slice(1) : digits;
  const e164 = country.slice(1) + national;
  if (e164.length < 8 || e164.length > 15) return fail('phone-invalid', `not a valid ${country} phone number (${digits.length} digits)`);
  return `+${e164}`;
}

/**
 * Whether a trimmed number is only digits, spaces and `( ) . - /` after an optional leading `+` — what the
 * validity regex accepts, with no room for an extension (`x`, `ext`, `#`): both regexes can be skipped.
 */
function isPlainPhone(s: string): boolean {
  const from = s.charCodeAt(0) === 43 ? 1 : 0;
  if (from >= s.length) return false; // `+` alone: the regex's error
  for (let i = from; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (!((c >= 48 && c <= 57) || c === 32 || c === 40 || c === 41 || c === 46 || c === 45 || c === 47)) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------- lookup

/** JSONata's built-in `$lookup` semantics, for objects that are not lookup tables. */
function builtinLookup(input: unknown, key: string): unknown {
  if (Array.isArray(input)) {
    const out: unknown[] = [];
    for (const item of input) {
      const r = builtinLookup(item, key);
      if (r === undefined) continue;
      if (Array.isArray(r)) out.push(...r);
      else out.push(r);
    }
    return out.length === 0 ? undefined : out.length === 1 ? out[0] : out;
  }
  if (input !== null && typeof input === 'object' && Object.prototype.hasOwnProperty.call(input, key)) {
    return (input as Record<string, unknown>)[key];
  }
  return undefined;
}

/** A table from `lookups:` as `$lookup` reads it: in memory (a null-prototype object) or indexed on disk. */
interface TableView {
  /** The value of a code (a copy the row may change), undefined when absent: no table holds `undefined`. */
  get(code: string): unknown;
  size(): number;
  sample(n: number): string[];
}

const views = new WeakMap<object, TableView>();

function viewOf(table: object): TableView {
  let view = views.get(table);
  if (!view) {
    view = makeView(table);
    views.set(table, view);
  }
  return view;
}

function makeView(table: object): TableView {
  if (isIndexedLookup(table)) return { get: (c) => table.get(c), size: () => table.size, sample: (n) => table.sampleCodes(n) };
  const t = table as Record<string, unknown>;
  // a loaded table does not change: its codes are listed once, not on every miss (a file table has up to ~10⁶)
  let codes: string[] | undefined;
  const all = () => (codes ??= Object.keys(t));
  return {
    // records and `many` lists are shared by every row: each call gets its own copy to shape
    get: (c) => (Object.prototype.hasOwnProperty.call(t, c) ? copyJson(t[c]) : undefined),
    size: () => all().length,
    sample: (n) => all().slice(0, n),
  };
}

/**
 * A deep copy of parsed JSON (what a file table holds): ~10× faster than `structuredClone` on a FHIR record,
 * which matters on the per-row path of a map doing several lookups.
 */
function copyJson(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) {
    const out = new Array<unknown>(v.length);
    for (let i = 0; i < v.length; i++) out[i] = copyJson(v[i]);
    return out;
  }
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v)) {
    const c = copyJson((v as Record<string, unknown>)[k]);
    // JSON.parse makes `__proto__` an own property; an assignment would set the prototype instead
    if (k === '__proto__') Object.defineProperty(out, k, { value: c, enumerable: true, writable: true, configurable: true });
    else out[k] = c;
  }
  return out;
}

function lookupOne(table: TableView, name: string, code: unknown, hasDefault: boolean, dflt: unknown): unknown {
  if (code === undefined || code === null) return hasDefault ? dflt : undefined;
  if (typeof code === 'object') return fail('type-invalid', `$lookup code must be text, got ${typeof code}`);
  const k = String(code);
  const v = table.get(k);
  if (v !== undefined) return v;
  const t = k.trim();
  const trimmed = t !== k ? table.get(t) : undefined;
  if (trimmed !== undefined) return trimmed;
  if (hasDefault) return dflt;
  if (t === '') return undefined;
  const size = table.size();
  const list = table.sample(10).join(', ') + (size > 10 ? `, … (${size} codes)` : '');
  // The code itself stays in the rejects file's row; messages (terminal, ledger) carry no cell values.
  return fail(
    'lookup-miss',
    `the code (${describeShape(k)}) is not in lookup table \`${name}\` (known: ${list}); add it or pass a default: $lookup($${name}, code, "default")`,
  );
}

// ---------------------------------------------------------------------------------------------- registration

export interface FunctionLibraryOptions {
  /** Lookup table object → its name (tables from `lookups:`; other objects get the built-in semantics). */
  tableNames: WeakMap<object, string>;
}

type Focus = jsonata.Focus;

function contextOf(focus: Focus): EvalContext | undefined {
  return focus.environment.lookup(CTX_BINDING) as EvalContext | undefined;
}

/** Registers the library on one compiled expression (once, at compile time). */
/** Longest string `$pad` may build: JSONata's own allocates `width` array slots at once (V8 aborts the process near 2^28). */
export const MAX_PAD_WIDTH = 100_000;

/** JSONata's `$pad` (same semantics: code points, negative width pads on the left), bounded. */
function fnPad(str: unknown, width: unknown, char?: unknown): string | undefined {
  if (str === undefined) return undefined;
  const w = Number(width);
  if (!Number.isFinite(w)) return fail('type-invalid', '$pad width must be a number');
  if (Math.abs(w) > MAX_PAD_WIDTH)
    return fail('value-too-large', `$pad width ${Math.abs(w)} exceeds the limit of ${MAX_PAD_WIDTH.toLocaleString('en-US')} characters`);
  const s = String(str);
  const c = typeof char === 'string' && char.length > 0 ? char : ' ';
  const missing = Math.abs(Math.trunc(w)) - [...s].length;
  if (missing <= 0) return s;
  const padding = [...c.repeat(Math.ceil(missing / [...c].length))].slice(0, missing).join('');
  return w > 0 ? s + padding : padding + s;
}

export function registerFunctions(expr: jsonata.Expression, opts: FunctionLibraryOptions): void {
  expr.registerFunction('pad', (s: unknown, w: unknown, c: unknown) => fnPad(s, w, c), '<s-ns?:s>');
  expr.registerFunction('date', (v: unknown, f: unknown) => fnDate(v, f));
  expr.registerFunction('dateTime', (v: unknown, f: unknown, z: unknown) => fnDateTime(v, f, z));
  expr.registerFunction('clean', (v: unknown) => fnClean(v));
  expr.registerFunction('name', (v: unknown) => fnName(v));
  expr.registerFunction('splitList', (v: unknown, s: unknown) => fnSplitList(v, s));
  expr.registerFunction('phone', (v: unknown, c: unknown) => fnPhone(v, c));

  expr.registerFunction('lookup', function lookup(this: Focus, table: unknown, code: unknown, ...rest: unknown[]) {
    const name = table !== null && typeof table === 'object' ? opts.tableNames.get(table) : undefined;
    if (name === undefined) return builtinLookup(table, String(code));
    const hasDefault = rest.length > 0;
    const t = viewOf(table as object);
    if (Array.isArray(code)) return each(code, (c) => lookupOne(t, name, c, hasDefault, rest[0]));
    return lookupOne(t, name, code, hasDefault, rest[0]);
  });

  expr.registerFunction('ref', function ref(this: Focus, name: unknown, key: unknown) {
    const ctx = contextOf(this);
    if (!ctx) return fail('ref-context', '$ref is only available in `map`');
    if (typeof name !== 'string') return fail('ref-invalid', '$ref needs a resource name (text) as first argument');
    if (Array.isArray(key))
      return fail('ref-key-invalid', `$ref("${name}", …) got several keys; call it once per key, e.g. $.{ "reference": $ref("${name}", KEY) }`);
    if (key !== null && typeof key === 'object') return fail('ref-key-invalid', `$ref("${name}", …) key must be text`);
    const k = key === undefined || key === null ? '' : String(key).trim();
    if (k === '') return fail('ref-key-missing', `$ref("${name}", …) has an empty key; guard optional references: KEY ? $ref("${name}", KEY)`);
    // No key holds one (the keys refuse it), and a PostgreSQL state cannot be asked for it.
    if (k.includes('\u0000'))
      return fail('ref-key-invalid', `$ref("${name}", …) key holds a NUL character (U+0000): no ${name} key does; fix it in the export`);
    return ctx.resolveRef(name, k);
  });

  expr.registerFunction('sourceKey', function sourceKey(this: Focus, reference: unknown) {
    const ctx = contextOf(this);
    if (!ctx) return fail('ref-context', '$sourceKey is only available in `map` and export columns');
    if (reference === undefined || reference === null || reference === '') return undefined;
    if (typeof reference !== 'string') return fail('type-invalid', '$sourceKey expects a reference such as "Patient/123"');
    return ctx.sourceKey?.(reference);
  });

  expr.registerFunction('now', function now(this: Focus, picture?: unknown, timezone?: unknown) {
    const when = contextOf(this)?.now ?? new Date();
    if (picture === undefined && timezone === undefined) return when.toISOString();
    const fromMillis = this.environment.lookup('fromMillis') as { implementation: (...a: unknown[]) => unknown } | undefined;
    if (!fromMillis) return when.toISOString();
    return fromMillis.implementation.call(this, when.getTime(), picture, timezone);
  });

  expr.registerFunction('millis', function millis(this: Focus) {
    return (contextOf(this)?.now ?? new Date()).getTime();
  });
}
