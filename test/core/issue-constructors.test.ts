/**
 * The named issue constructors make exactly the object an inline literal made (no key added, none reordered
 * away), and a code that is not one of ISSUE_CODES does not compile.
 */
import { expect, test } from 'vitest';
import { configError, CareEtlError, ExitCode, foreignCode, issue } from '../../src/core/issues.js';

test('issue.error / warning / fatal copy the code, the message and only the keys of `where` given', () => {
  expect(issue.error('duplicate-key', 'm')).toStrictEqual({ severity: 'error', code: 'duplicate-key', message: 'm' });
  expect(issue.warning('match-ambiguous', 'm', { location: undefined })).toStrictEqual({
    severity: 'warning',
    code: 'match-ambiguous',
    message: 'm',
    location: undefined,
  });
  expect(issue.fatal('csv-header', 'm', { location: { file: 'a.csv', line: 1 } })).toStrictEqual({
    severity: 'fatal',
    code: 'csv-header',
    message: 'm',
    location: { file: 'a.csv', line: 1 },
  });
  expect(issue.error('http-422', 'm').code).toBe('http-422');
  expect(issue.error(foreignCode('minLength'), 'm', { path: '/name' })).toStrictEqual({ severity: 'error', code: 'minLength', message: 'm', path: '/name' });
  // @ts-expect-error a code outside ISSUE_CODES (a typo) is a compile error
  issue.error('invalidd', 'm');
});

test('issue.invalid and issue.fileUnreadable name their code', () => {
  expect(issue.invalid('m', { path: '/id' })).toStrictEqual({ severity: 'error', code: 'invalid', message: 'm', path: '/id' });
  expect(issue.fileUnreadable('x.env', 'x.env: no such file')).toStrictEqual({
    severity: 'error',
    code: 'file-unreadable',
    message: 'x.env: no such file',
    location: { file: 'x.env' },
  });
});

test('configError: a CareEtlError with exit code 2 and the hint', () => {
  const err = configError('`--bom` applies to `--format csv` only', 'Drop --bom.');
  expect(err).toBeInstanceOf(CareEtlError);
  expect([err.message, err.hint, err.exitCode, err.issues]).toEqual(['`--bom` applies to `--format csv` only', 'Drop --bom.', ExitCode.config, []]);
});
