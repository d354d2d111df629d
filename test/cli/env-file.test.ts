import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadEnvFiles } from '../../src/cli/env-file.js';
import { CareEtlError } from '../../src/core/issues.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'care-etl-env-'));
  mkdirSync(join(dir, 'clinic'));
  writeFileSync(join(dir, 'clinic', 'mapping.yaml'), 'sources: {}\n');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function thrown(fn: () => unknown): CareEtlError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(CareEtlError);
    return err as CareEtlError;
  }
  throw new Error('expected an error');
}

describe('loadEnvFiles', () => {
  it('reads the .env beside the mapping; variables already set win, even when empty', () => {
    writeFileSync(
      join(dir, 'clinic', '.env'),
      '# clinic settings\nCARE_BASE_URL=https://care.example.org\nexport CARE_TENANT_ID="clinic a" # quoted\nCARE_EMR_ID=from-file\nCARE_API_KEY=from-file\nEMPTY=\n',
    );
    const env: NodeJS.ProcessEnv = { CARE_EMR_ID: 'from-env', CARE_API_KEY: '' };
    const files = loadEnvFiles({ mappingFile: 'clinic/mapping.yaml', env, cwd: dir });
    expect(files).toEqual(['clinic/.env']);
    expect(env).toEqual({
      CARE_BASE_URL: 'https://care.example.org',
      CARE_TENANT_ID: 'clinic a',
      CARE_EMR_ID: 'from-env',
      CARE_API_KEY: '',
      EMPTY: '',
    });
  });

  it('--env-file replaces the .env beside the mapping; relative to cwd; values literal (no ${VAR} expansion)', () => {
    writeFileSync(join(dir, 'clinic', '.env'), 'FROM_BESIDE=1\n');
    writeFileSync(join(dir, 'prod.env'), '\uFEFFCARE_BASE_URL=https://prod.example.org\r\nPATH_LIKE=${HOME}/x\r\nMULTI="a\nb"\n');
    const env: NodeJS.ProcessEnv = {};
    expect(loadEnvFiles({ envFile: 'prod.env', mappingFile: 'clinic/mapping.yaml', env, cwd: dir })).toEqual(['prod.env']);
    expect(env).toEqual({ CARE_BASE_URL: 'https://prod.example.org', PATH_LIKE: '${HOME}/x', MULTI: 'a\nb' });
    const abs = join(dir, 'prod.env');
    expect(loadEnvFiles({ envFile: abs, env: {}, cwd: '/' })).toEqual([abs]);
  });

  it('no --env-file and no .env beside the mapping (or no mapping): nothing loaded', () => {
    const env: NodeJS.ProcessEnv = {};
    expect(loadEnvFiles({ mappingFile: 'clinic/mapping.yaml', env, cwd: dir })).toEqual([]);
    expect(loadEnvFiles({ env, cwd: dir })).toEqual([]);
    expect(loadEnvFiles({ mappingFile: 'missing/mapping.yaml', env, cwd: dir })).toEqual([]);
    mkdirSync(join(dir, 'clinic', '.env'));
    expect(loadEnvFiles({ mappingFile: 'clinic/mapping.yaml', env, cwd: dir })).toEqual([]);
    expect(env).toEqual({});
  });

  it('a missing --env-file is an error with exit code 2 naming the file', () => {
    const e = thrown(() => loadEnvFiles({ envFile: 'nope.env', mappingFile: 'clinic/mapping.yaml', env: {}, cwd: dir }));
    expect(e.exitCode).toBe(2);
    expect(e.message).toContain('nope.env');
    expect(e.issues[0]).toMatchObject({ code: 'file-unreadable', location: { file: 'nope.env' } });
  });

  it('an --env-file that is a folder is an error with exit code 2', () => {
    const e = thrown(() => loadEnvFiles({ envFile: 'clinic', env: {}, cwd: dir }));
    expect(e.exitCode).toBe(2);
    expect(e.message).toBe('The env file clinic is a folder');
  });

  it('a line that is not KEY=value is an error naming its line, never its text (it may hold a secret); nothing is applied', () => {
    writeFileSync(join(dir, 'bad.env'), 'A=1\n\nCARE_API_KEY: s3cret-value\nB=2\n');
    const env: NodeJS.ProcessEnv = {};
    const e = thrown(() => loadEnvFiles({ envFile: 'bad.env', env, cwd: dir }));
    expect(e.exitCode).toBe(2);
    expect(e.issues[0]).toMatchObject({ code: 'env-syntax', location: { file: 'bad.env', line: 3 } });
    expect(JSON.stringify({ message: e.message, issues: e.issues, hint: e.hint })).not.toContain('s3cret');
    expect(env).toEqual({});
  });

  it('applies to process.env by default', () => {
    const key = `CARE_ETL_ENV_FILE_TEST_${process.pid}`;
    writeFileSync(join(dir, 'clinic', '.env'), `${key}=yes\n`);
    try {
      expect(loadEnvFiles({ mappingFile: join(dir, 'clinic', 'mapping.yaml') })).toEqual([join(dir, 'clinic', '.env')]);
      expect(process.env[key]).toBe('yes');
    } finally {
      delete process.env[key];
    }
  });
});

describe('loadEnvFiles: every line that is not KEY=value is an error naming its line (issue 25)', () => {
  const cases: [string, string, number, RegExp][] = [
    ['an unterminated quote', 'CARE_BASE_URL=https://x.example\nCARE_API_KEY="s3cret-value\nCARE_EMR_ID=e1\n', 2, /never closed/],
    ['a line without =', 'CARE_BASE_URL=https://x.example\n\n# comment\ns3cret-value\nCARE_EMR_ID=e1\n', 4, /expected KEY=value/],
    ['a binary file', 'A=1\nB=2\n\u0000\u0001s3cret-value\u0000\n', 3, /NUL byte/],
    ['text after a closing quote', "A='s3cret-value' trailing\n", 1, /after the closing ' quote/],
    ['a multi-line value closed by a later quote followed by text', 'A="s3cret-value\nB=2\nC="x"\n', 1, /closes on line 3/],
  ];
  for (const [what, text, line, reason] of cases) {
    it(`${what}: exit 2 at line ${line}, the text never shown, nothing applied`, () => {
      writeFileSync(join(dir, 'bad.env'), text);
      const env: NodeJS.ProcessEnv = {};
      const e = thrown(() => loadEnvFiles({ envFile: 'bad.env', env, cwd: dir }));
      expect(e.exitCode).toBe(2);
      expect(e.issues[0]).toMatchObject({ code: 'env-syntax', location: { file: 'bad.env', line } });
      expect(e.issues[0]!.message).toMatch(reason);
      expect(JSON.stringify({ message: e.message, issues: e.issues, hint: e.hint })).not.toContain('s3cret');
      expect(env).toEqual({});
    });
  }

  it('what parseEnv reads well stays accepted: quotes of each kind, multi-line, comments, export, CRLF, spaces around =', () => {
    writeFileSync(join(dir, 'ok.env'), 'export A=\'x y\' # c\r\nB = `m\nl`\nC="q" \n  D=plain # comment\nE=a"b\n\n# end\n');
    const env: NodeJS.ProcessEnv = {};
    loadEnvFiles({ envFile: 'ok.env', env, cwd: dir });
    expect(env).toEqual({ A: 'x y', B: 'm\nl', C: 'q', D: 'plain', E: 'a"b' });
  });
});
