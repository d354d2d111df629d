import jsonata from 'jsonata';
import { describe, expect, it } from 'vitest';
import { MappingFunctionError } from '../../src/mapping/errors.js';
import {
  CTX_BINDING,
  JSONATA_BUILTINS,
  fnClean,
  fnDate,
  fnDateTime,
  fnName,
  fnPhone,
  fnSplitList,
  registerFunctions,
  translateDateFormat,
  type EvalContext,
} from '../../src/mapping/functions.js';

/** The error a function throws, for assertions on code and message. */
function errorOf(f: () => unknown): MappingFunctionError {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(MappingFunctionError);
    return err as MappingFunctionError;
  }
  throw new Error('expected an error');
}

const gender = Object.assign(Object.create(null) as Record<string, string>, { M: 'male', F: 'female', U: 'unknown' });
async function evaluate(src: string, input: unknown = {}, ctx?: EvalContext): Promise<unknown> {
  const expr = jsonata(src);
  registerFunctions(expr, { tableNames: new WeakMap([[gender, 'gender']]) });
  expr.assign('gender', gender);
  return expr.evaluate(input, ctx ? { [CTX_BINDING]: ctx } : undefined);
}

describe('JSONATA_BUILTINS', () => {
  it('lists functions that exist in the installed jsonata', async () => {
    for (const name of JSONATA_BUILTINS) {
      const v = (await jsonata(`$${name}`).evaluate({})) as unknown;
      expect(v, name).toBeTypeOf('object'); // JSONata function objects
    }
  });
});

describe('$date', () => {
  it('parses the familiar tokens strictly and outputs yyyy-MM-dd', () => {
    expect(fnDate('02/12/1985', 'MM/DD/YYYY')).toBe('1985-02-12');
    expect(fnDate('1985-02-12', 'YYYY-MM-DD')).toBe('1985-02-12');
    expect(fnDate('2/3/1985', 'M/D/YYYY')).toBe('1985-02-03');
    expect(fnDate('19850212', 'YYYYMMDD')).toBe('1985-02-12');
    expect(fnDate(19850212, 'YYYYMMDD')).toBe('1985-02-12'); // JSON numbers
    expect(fnDate('12.02.85', 'DD.MM.YY')).toBe('1985-02-12');
    expect(fnDate(' 1985-02-12 ', 'YYYY-MM-DD')).toBe('1985-02-12');
    expect(fnDate('1985-02-12T10:20:30', 'YYYY-MM-DDTHH:mm:ss')).toBe('1985-02-12');
  });

  it('rejects impossible dates with date-invalid and the reason', () => {
    const e = errorOf(() => fnDate('1985-02-30', 'YYYY-MM-DD'));
    expect(e.code).toBe('date-invalid');
    expect(e.message).toBe('the value is not a valid date in format `YYYY-MM-DD` (day out of range)');
    expect(errorOf(() => fnDate('1985-13-01', 'YYYY-MM-DD')).message).toContain('(month out of range)');
    expect(errorOf(() => fnDate('02/12/1985', 'YYYY-MM-DD')).message).toContain('(does not match the format)');
  });

  it('knows leap years: 2024-02-29 exists, 2023-02-29 does not', () => {
    expect(fnDate('2024-02-29', 'YYYY-MM-DD')).toBe('2024-02-29');
    expect(errorOf(() => fnDate('2023-02-29', 'YYYY-MM-DD')).code).toBe('date-invalid');
  });

  it('returns undefined for empty input (the field is dropped)', () => {
    expect(fnDate(undefined, 'YYYY-MM-DD')).toBeUndefined();
    expect(fnDate(null, 'YYYY-MM-DD')).toBeUndefined();
    expect(fnDate('  ', 'YYYY-MM-DD')).toBeUndefined();
  });

  it('maps over arrays (grouped records)', () => {
    expect(fnDate(['2024-01-02', '', '2024-03-04'], 'YYYY-MM-DD')).toEqual(['2024-01-02', '2024-03-04']);
  });

  it('accepts luxon-native formats with the luxon: prefix', () => {
    expect(fnDate('12 Feb 1985', 'luxon:dd MMM yyyy')).toBe('1985-02-12');
  });

  it('rejects unsupported tokens and missing formats', () => {
    expect(errorOf(() => fnDate('1985-02-12', 'YYYY-MM-DDD')).code).toBe('date-format-invalid');
    expect(errorOf(() => fnDate('1985-02-12', undefined)).code).toBe('date-format-invalid');
    expect(translateDateFormat('YYY')).toContain('unsupported token `YYY`');
  });

  it('translates only the documented tokens, everything else is literal', () => {
    expect(translateDateFormat('YYYY-MM-DD')).toEqual({ source: 'YYYY-MM-DD', luxon: "yyyy'-'MM'-'dd" });
    expect(translateDateFormat('DD.MM.YYYY at HH')).toEqual({ source: 'DD.MM.YYYY at HH', luxon: "dd'.'MM'.'yyyy' at 'HH" });
    expect(fnDate('12.02.1985 at 10', 'DD.MM.YYYY at HH')).toBe('1985-02-12');
    expect(translateDateFormat("DD 'T' HH")).toContain('single quotes are not supported');
  });
});

describe('$dateTime', () => {
  it('outputs ISO 8601 with offset, UTC by default', () => {
    expect(fnDateTime('2024-01-02 03:04', 'YYYY-MM-DD HH:mm')).toBe('2024-01-02T03:04:00Z');
    expect(fnDateTime('2024-01-02 03:04:05', 'YYYY-MM-DD HH:mm:ss', 'America/New_York')).toBe('2024-01-02T03:04:05-05:00');
    expect(fnDateTime('2024-07-02', 'YYYY-MM-DD', 'Europe/Paris')).toBe('2024-07-02T00:00:00+02:00');
  });

  it('rejects invalid values and zones', () => {
    expect(errorOf(() => fnDateTime('2024-01-02 25:00', 'YYYY-MM-DD HH:mm')).message).toContain('(hour out of range)');
    expect(errorOf(() => fnDateTime('2024-01-02', 'YYYY-MM-DD', 'Mars/Base')).code).toBe('date-zone-invalid');
    expect(fnDateTime('', 'YYYY-MM-DD')).toBeUndefined();
  });
});

describe('$name', () => {
  it("title-cases a word after a quote or parenthesis too, not only after a space, `-` or `'`", () => {
    expect(fnName('JOHN "JACK" SMITH')).toBe('John "Jack" Smith');
    expect(fnName('(MUELLER)')).toBe('(Mueller)');
    expect(fnName('ST.JOHN')).toBe('St.John');
    expect(fnName('«ÖZDEMIR»')).toBe('«Özdemir»');
    expect(fnName('(MCDONALD)')).toBe('(McDonald)');
    expect(fnName('JOHN 3RD')).toBe('John 3rd');
  });

  it('a combining mark belongs to its letter: decomposed (NFD) names keep one word', () => {
    expect(fnName('JOSE\u0301PHINE')).toBe('Jose\u0301phine');
    expect(fnName('MU\u0308LLER-GO\u0308RZ')).toBe('Mu\u0308ller-Go\u0308rz');
    expect(fnName('"MU\u0308LLER"')).toBe('"Mu\u0308ller"');
  });

  it('title-cases ALL-CAPS names per word, hyphen and apostrophe part', () => {
    expect(fnName("O'BRIEN")).toBe("O'Brien");
    expect(fnName('SMITH-JONES')).toBe('Smith-Jones');
    expect(fnName('MARY   ANN')).toBe('Mary Ann');
    expect(fnName('MCDONALD')).toBe('McDonald');
    expect(fnName('ÉLODIE')).toBe('Élodie');
  });

  it('keeps mixed-case names as written, collapsing whitespace only', () => {
    expect(fnName('McDonald')).toBe('McDonald');
    expect(fnName(" O'Brien ")).toBe("O'Brien");
    expect(fnName('van  der Berg')).toBe('van der Berg');
    expect(fnName('DeShawn')).toBe('DeShawn');
  });

  it('drops empty values and maps arrays', () => {
    expect(fnName('   ')).toBeUndefined();
    expect(fnName(undefined)).toBeUndefined();
    expect(fnName(['ANN', '', 'LEE'])).toEqual(['Ann', 'Lee']);
  });
});

describe('$clean', () => {
  it('trims, and turns empty into undefined', () => {
    expect(fnClean('  x  ')).toBe('x');
    expect(fnClean('   ')).toBeUndefined();
    expect(fnClean('')).toBeUndefined();
    expect(fnClean(null)).toBeUndefined();
    expect(fnClean(42)).toBe('42');
    expect(fnClean([' a ', ' ', 'b'])).toEqual(['a', 'b']);
  });
});

describe('$phone', () => {
  it('normalises US numbers to E.164', () => {
    expect(fnPhone('(555) 123-4567')).toBe('+15551234567');
    expect(fnPhone('555.123.4567')).toBe('+15551234567');
    expect(fnPhone('1-555-123-4567')).toBe('+15551234567');
    expect(fnPhone(5551234567)).toBe('+15551234567');
    expect(fnPhone('555-123-4567 x89')).toBe('+15551234567');
    expect(fnPhone('555-123-4567 ext. 89')).toBe('+15551234567');
  });

  it('keeps international numbers and supports calling-code defaults', () => {
    expect(fnPhone('+44 20 7946 0958')).toBe('+442079460958');
    expect(fnPhone('020 7946 0958', '+44')).toBe('+442079460958');
    expect(fnPhone('(416) 555-0199', 'CA')).toBe('+14165550199');
  });

  it('returns undefined for empty input', () => {
    expect(fnPhone('')).toBeUndefined();
    expect(fnPhone('   ')).toBeUndefined();
    expect(fnPhone(undefined)).toBeUndefined();
  });

  it('rejects unparseable numbers without echoing them', () => {
    const e = errorOf(() => fnPhone('123-4567'));
    expect(e.code).toBe('phone-invalid');
    expect(e.message).toBe('not a valid US phone number (7 digits, 10 expected)');
    expect(errorOf(() => fnPhone('1-800-FLOWERS')).code).toBe('phone-invalid');
    expect(errorOf(() => fnPhone('+12')).code).toBe('phone-invalid');
    expect(errorOf(() => fnPhone('555 123 4567', 'FR')).code).toBe('phone-country');
  });

  it('strips extensions in one pass: a cell with a long run of spaces is answered, not searched quadratically', () => {
    expect(fnPhone('555-123-4567\u00a0 #89')).toBe('+15551234567');
    expect(fnPhone('555-123-4567extension 1')).toBe('+15551234567');
    expect(errorOf(() => fnPhone('555 x 12 x 34')).code).toBe('phone-invalid'); // only the last extension goes
    // was /\s*(?:ext…)…$/ searched from every position of the run: about 3 s at 50,000 spaces, hours at 1,000,000
    expect(errorOf(() => fnPhone(`5${' '.repeat(1_000_000)}a`)).code).toBe('phone-invalid');
    expect(errorOf(() => fnPhone(`5${' '.repeat(1_000_000)}x 1a`)).code).toBe('phone-invalid');
  });
});

describe('$splitList', () => {
  it('splits a multi-value cell into trimmed, non-empty parts', () => {
    expect(fnSplitList('a, b,,  c ,')).toEqual(['a', 'b', 'c']);
    expect(fnSplitList('Mary Ann', ' ')).toEqual(['Mary', 'Ann']);
    expect(fnSplitList('x|y', '|')).toEqual(['x', 'y']);
    expect(fnSplitList('solo')).toEqual(['solo']);
    expect(fnSplitList(' , ')).toBeUndefined();
    expect(fnSplitList(undefined)).toBeUndefined();
  });

  it('leaves the built-in $split untouched', async () => {
    expect(await evaluate('$split("a,,b", ",")')).toEqual(['a', '', 'b']);
    expect(await evaluate('$splitList("a,,b")')).toEqual(['a', 'b']);
  });
});

describe('$lookup', () => {
  it('returns the label of a code', async () => {
    expect(await evaluate('$lookup($gender, SEX)', { SEX: 'F' })).toBe('female');
    expect(await evaluate('$lookup($gender, SEX)', { SEX: ' M ' })).toBe('male');
  });

  it('fails with lookup-miss naming the table and the code', async () => {
    await expect(evaluate('$lookup($gender, SEX)', { SEX: 'X' })).rejects.toMatchObject({
      code: 'lookup-miss',
      message: expect.stringContaining('the code (1 character) is not in lookup table `gender` (known: M, F, U)'),
    });
  });

  it('uses the default for unknown codes, and returns nothing for empty codes', async () => {
    expect(await evaluate('$lookup($gender, SEX, "unknown")', { SEX: 'X' })).toBe('unknown');
    expect(await evaluate('$lookup($gender, SEX, ())', { SEX: 'X' })).toBeUndefined();
    expect(await evaluate('$lookup($gender, SEX)', { SEX: '' })).toBeUndefined();
    expect(await evaluate('$lookup($gender, SEX)', {})).toBeUndefined();
  });

  it('does not find inherited properties', async () => {
    await expect(evaluate('$lookup($gender, "constructor")')).rejects.toMatchObject({ code: 'lookup-miss' });
  });

  it('keeps the built-in semantics for ordinary objects', async () => {
    expect(await evaluate('$lookup({"a": 1}, "b")')).toBeUndefined();
    expect(await evaluate('$lookup({"a": 1}, "a")')).toBe(1);
    expect(await evaluate('$lookup([{"a": 1}, {"a": [2, 3]}, {}], "a")')).toEqual([1, 2, 3]);
  });
});

describe('$ref / $sourceKey / $now', () => {
  const ctx: EvalContext = {
    resolveRef: (name, key) => `${name === 'patient' ? 'Patient' : 'X'}/${key}-id`,
    sourceKey: (ref) => (ref === 'Patient/7' ? '00123' : undefined),
    now: new Date('2024-05-06T07:08:09.000Z'),
  };

  it('resolves references through the per-row context', async () => {
    expect(await evaluate('$ref("patient", MRN)', { MRN: 7 }, ctx)).toBe('Patient/7-id');
    expect(await evaluate('$sourceKey(r)', { r: 'Patient/7' }, ctx)).toBe('00123');
  });

  it('rejects an empty key and calls without a context', async () => {
    await expect(evaluate('$ref("patient", MRN)', {}, ctx)).rejects.toMatchObject({ code: 'ref-key-missing' });
    await expect(evaluate('$ref("patient", MRN)', { MRN: 1 })).rejects.toMatchObject({ code: 'ref-context' });
    await expect(evaluate('$ref("patient", MRN)', [{ MRN: 1 }, { MRN: 2 }], ctx)).rejects.toMatchObject({ code: 'ref-key-invalid' });
    // no key holds a NUL (compile-mapping's keys refuse it), and a PostgreSQL state cannot be asked for one
    await expect(evaluate('$ref("patient", MRN)', { MRN: '7\u0000' }, ctx)).rejects.toMatchObject({ code: 'ref-key-invalid' });
  });

  it('$now() and $millis() return the run instant; pictures still work', async () => {
    expect(await evaluate('$now()', {}, ctx)).toBe('2024-05-06T07:08:09.000Z');
    expect(await evaluate('$millis()', {}, ctx)).toBe(Date.parse('2024-05-06T07:08:09.000Z'));
    expect(await evaluate('$now("[Y0001]-[M01]-[D01]")', {}, ctx)).toBe('2024-05-06');
  });

  it('keeps concurrent evaluations apart (the context is per evaluation, not a shared slot)', async () => {
    const expr = jsonata('$ref("patient", MRN)');
    registerFunctions(expr, { tableNames: new WeakMap() });
    const mk = (tag: string): EvalContext => ({ resolveRef: (_n, k) => `${tag}/${k}`, now: new Date() });
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => expr.evaluate({ MRN: String(i) }, { [CTX_BINDING]: mk(`T${i}`) })));
    expect(results).toEqual(Array.from({ length: 20 }, (_, i) => `T${i}/${i}`));
  });

  it('leaves the built-in $trim in place', async () => {
    expect(await evaluate('$trim("  a   b ")')).toBe('a b');
  });
});
