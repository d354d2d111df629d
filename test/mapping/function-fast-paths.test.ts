/**
 * `$name` and `$phone` answer the usual cell without their regexes (issue 28: a plain-ASCII name read in one pass,
 * a number of digits and separators only): on random cells built from the characters that decide between the fast
 * path and the regexes, both give what the regex-only implementations (copied below; a word of `$name` starts after any non-letter, non-digit since session 31) give — the same
 * value, or the same error code and message.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MappingFunctionError } from '../../src/mapping/errors.js';
import { fnName, fnPhone } from '../../src/mapping/functions.js';

const RUNS = Number(process.env.CARE_PROPERTY_RUNS ?? 2000);
const SEED = Number(process.env.CARE_PROPERTY_SEED ?? 20_261_126);

/** `$name` of one text before the fast path. */
function nameByRegex(t: string): string | undefined {
  const s = t.replace(/\s+/g, ' ').trim();
  if (!s) return undefined;
  if (!/\p{Lu}/u.test(s) || /\p{Ll}/u.test(s)) return s;
  return s
    .toLowerCase()
    .replace(/(^|[^\p{L}\p{N}])(\p{Ll})/gu, (_m, sep: string, ch: string) => sep + ch.toUpperCase())
    .replace(/(^|[^\p{L}\p{N}])Mc(\p{Ll})/gu, (_m, sep: string, ch: string) => `${sep}Mc${ch.toUpperCase()}`);
}

/** `$phone` of one text (US default) before the fast path: its value, or `error: <message>`. */
function phoneByRegex(t: string): string | undefined {
  const raw = t.trim();
  if (!raw) return undefined;
  const m = /(?:ext\.?|extension|x|#)\s*\d{1,6}$/i.exec(raw);
  const s = m ? raw.slice(0, m.index).trimEnd() : raw;
  if (!/^\+?[\d\s().\-/]+$/.test(s)) return 'error: not a valid phone number (contains letters or symbols)';
  const digits = s.replace(/\D/g, '');
  if (s.startsWith('+')) {
    if (digits.length < 8 || digits.length > 15 || digits.startsWith('0'))
      return `error: not a valid international phone number (${digits.length} digits, 8 to 15 expected)`;
    return `+${digits}`;
  }
  if (digits.length === 10) return `+1${digits}`;
  if (digits.length === 11 && digits.startsWith('1')) return `+${digits}`;
  return `error: not a valid US phone number (${digits.length} digits, 10 expected)`;
}

function outcome(f: () => unknown): unknown {
  try {
    return f();
  } catch (err) {
    if (err instanceof MappingFunctionError) return `error: ${err.message}`;
    throw err;
  }
}

/** Cells over the characters that matter: ASCII case, separators, whitespace kinds, non-ASCII letters, symbols. */
const cell = (chars: string[]) => fc.array(fc.constantFrom(...chars), { maxLength: 14 }).map((cs) => cs.join(''));
const NAME_CHARS = [
  'A',
  'M',
  'C',
  'a',
  'c',
  'z',
  'Z',
  ' ',
  ' ',
  '-',
  "'",
  '’',
  '.',
  '"',
  '(',
  '1',
  '\t',
  '\n',
  '\u00a0',
  'É',
  'é',
  'ß',
  'Ǆ',
  '~',
  '\u007f',
  '\u001f',
];
const PHONE_CHARS = ['5', '1', '0', '9', ' ', ' ', '(', ')', '-', '.', '/', '+', 'x', 'X', 'e', 't', '#', '\t', '\u00a0', ',', '٣'];

describe('$name fast path', () => {
  it('gives what the regexes give, on random names', () => {
    fc.assert(
      fc.property(cell(NAME_CHARS), (s) => {
        expect(fnName(s), JSON.stringify(s)).toBe(nameByRegex(s));
      }),
      { numRuns: RUNS, seed: SEED },
    );
  });

  it('gives what the regexes give, on random names made of words (Mc prefixes, separators, cases)', () => {
    const word = fc.constantFrom('MC', 'MCD', 'MCDONALD', 'MCMC', 'Mc', 'mc', 'O', 'BRIEN', 'SMITH', 'van', 'ÉLODIE', 'X', 'A1', '');
    const sep = fc.constantFrom(' ', '-', "'", '’', '  ', '\t', '.', '');
    const name = fc.array(fc.tuple(word, sep), { maxLength: 4 }).map((ws) => ws.map(([w, s]) => w + s).join(''));
    fc.assert(
      fc.property(name, (s) => {
        expect(fnName(s), JSON.stringify(s)).toBe(nameByRegex(s));
      }),
      { numRuns: RUNS, seed: SEED },
    );
  });

  it('gives what the regexes give on the names of the bench and the examples', () => {
    for (const s of ['Sofia', 'JAMES', 'Anne-Marie', "O'BRIEN", 'SMITH-JONES', 'McDonald', 'MCDONALD', 'van der Berg', 'A', 'a b', '...', 'X-', "-'"])
      expect(fnName(s), s).toBe(nameByRegex(s));
  });
});

describe('$phone fast path', () => {
  it('gives what the regexes give (value or error message), on random numbers', () => {
    fc.assert(
      fc.property(cell(PHONE_CHARS), (s) => {
        expect(
          outcome(() => fnPhone(s)),
          JSON.stringify(s),
        ).toBe(phoneByRegex(s));
      }),
      { numRuns: RUNS, seed: SEED },
    );
  });

  it('gives what the regexes give on the bench formats and the edge cases', () => {
    for (const s of ['555.123.4567', '(555) 123-4567', '555-123-4567', '+1 555 123 4567', '+', '+ ', '()', '1', '+0123456789', '555 123 4567 x12'])
      expect(
        outcome(() => fnPhone(s)),
        s,
      ).toBe(phoneByRegex(s));
  });
});
