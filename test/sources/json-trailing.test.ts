/** Trailing data after a complete JSON document is named as such, at its line:col (issue 25, item 5). */
import { afterAll, describe, expect, test } from 'vitest';
import { CareEtlError } from '../../src/core/issues.js';
import { collect, tempDir } from './helpers.js';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

async function fatal(path: string, records?: string): Promise<CareEtlError> {
  const err = await collect({ name: 's', path, ...(records ? { records } : {}) }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CareEtlError);
  return err as CareEtlError;
}

describe('JSON: trailing data', () => {
  test('garbage after a complete top-level array: trailing data at its line:col, not "before the first record"', async () => {
    const err = await fatal(tmp.write('a.json', '[{"a":1},\n {"a":"]"}]\n\n  garbage'));
    expect(err.message).toContain('trailing data after the complete top-level array');
    expect(err.message).not.toContain('before the first record');
    expect(err.issues[0]).toMatchObject({ code: 'json-syntax', location: { line: 4, column: 3 } });
    expect(err.exitCode).toBe(2);
  });

  test('a second array after the first (with a BOM), and after a `records:` object', async () => {
    expect((await fatal(tmp.write('b.json', '\uFEFF[{"a":1}] [{"a":2}]'))).issues[0]).toMatchObject({ location: { line: 1, column: 12 } });
    const err = await fatal(tmp.write('c.json', '{"staff":[{"a":1}]}\n}'), 'staff');
    expect(err.message).toContain('trailing data after the complete top-level object');
    expect(err.issues[0]).toMatchObject({ location: { line: 2, column: 1 } });
  });

  test('a JSONata `records:` expression: the same words, at the line:col', async () => {
    const err = await fatal(tmp.write('d.json', '{"staff":[{"a":1}]}\n  x'), 'staff[a=1]');
    expect(err.message).toContain('trailing data after the complete top-level value');
    expect(err.issues[0]).toMatchObject({ location: { line: 2, column: 3 } });
  });

  test('a syntax error inside the array stays an invalid-JSON error', async () => {
    const err = await fatal(tmp.write('e.json', '[{"a":1},,{"a":2}] x'));
    expect(err.message).toContain('invalid JSON');
    expect(err.message).not.toContain('trailing');
  });
});
