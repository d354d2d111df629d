/**
 * Settings that fail loudly (issue 25, item 5), through the built CLI spawned with node as the installed bin is:
 * `--dotenv` (Node 20 reads `--env-file` itself, anywhere on the command line), `.env` lines that are not KEY=value.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, runCli } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'care-etl-settings-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const MAPPING = join(ROOT, 'examples', 'clinic', 'mapping.yaml');

describe('--dotenv (alias --env-file)', () => {
  it('a missing --dotenv file: exit 2 with care-etl\'s message, nothing else done', async () => {
    const r = await runCli(['validate', MAPPING, '--dotenv', join(dir, 'missing.env')], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`The env file ${join(dir, 'missing.env')} does not exist`);
    expect(r.stderr).not.toContain('node:');
  });

  it('--env-file naming an existing file still works (alias): its variables reach the mapping', async () => {
    writeFileSync(join(dir, 'bad-url.env'), 'CARE_BASE_URL=not a url\n');
    const r = await runCli(['plan', MAPPING, '--env-file', join(dir, 'bad-url.env')], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--base-url');
  });

  it('a .env line with an unterminated quote: exit 2 naming the file and line, never the value', async () => {
    writeFileSync(join(dir, 'quote.env'), '# settings\nCARE_API_KEY="sk-SECRET-canary\nCARE_EMR_ID=e\n');
    const r = await runCli(['validate', MAPPING, '--dotenv', join(dir, 'quote.env')], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${join(dir, 'quote.env')}:2`);
    expect(r.stderr).toContain('never closed');
    expect(r.stdout + r.stderr).not.toContain('SECRET-canary');
  });
});
