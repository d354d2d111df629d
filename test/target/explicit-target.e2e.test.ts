import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { copyTree, runCliInProcess } from '../helpers/cli.js';

/*
 * Issue 22, item 4, end to end with the built CLI: the embedded sandbox is used only when nothing says otherwise.
 * CARE_* variables, CI, connection flags or a `target:` key without a base URL are refused (exit 2) before anything
 * is written; `--sandbox` loads anyway, and every output mode says "embedded sandbox".
 */

const KEY = 'explicit-target-key-5f1c';
const CARE_WITHOUT_BASE = { CARE_API_KEY: KEY, CARE_EMR_ID: 'emr-x', CARE_TENANT_ID: 'tenant-x' };

function clinic(): { dir: string; mapping: string } {
  const dir = copyTree('examples/clinic', 'care-etl-target-');
  return { dir, mapping: join(dir, 'mapping.yaml') };
}

describe('a real target suggested but no base URL: refused, nothing created', () => {
  it('CARE_API_KEY, CARE_EMR_ID, CARE_TENANT_ID set, no CARE_BASE_URL, no target: → exit 2 naming them, never the key', async () => {
    const { dir, mapping } = clinic();
    const r = await runCliInProcess(['run', mapping], { env: CARE_WITHOUT_BASE });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain('CARE_API_KEY, CARE_EMR_ID, CARE_TENANT_ID are set but no base URL');
    expect(r.stderr).toContain('set CARE_BASE_URL');
    expect(r.stderr).toContain('--sandbox');
    expect(r.stderr + r.stdout).not.toContain(KEY);
    expect(existsSync(join(dir, '.care-etl'))).toBe(false); // no sandbox database, no ledger, no rejects
  });

  it('CI=true alone → exit 2 (run, plan, state check, export), --json error envelope with the code', async () => {
    const { dir, mapping } = clinic();
    const [run, plan, check, exp] = await Promise.all([
      runCliInProcess(['run', mapping, '--json'], { env: { CI: 'true' } }),
      runCliInProcess(['plan', mapping], { env: { CI: 'true' } }),
      runCliInProcess(['state', 'check', mapping], { env: { CI: 'true' } }),
      runCliInProcess(['export', mapping, '--out', join(dir, 'out.csv')], { env: { CI: 'true' } }),
    ]);
    expect(run.code, run.stderr).toBe(2);
    const body = JSON.parse(run.stdout) as { error: { issues: { code: string }[] } };
    expect(body.error.issues.map((i) => i.code)).toEqual(['target-missing']);
    for (const r of [plan, check, exp]) {
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain('CI is set');
    }
    expect(existsSync(join(dir, '.care-etl'))).toBe(false);
  });

  it('a mapping with a `target:` key but no baseUrl → exit 2 naming the section with its line', async () => {
    const { dir, mapping } = clinic();
    const text = readFileSync(mapping, 'utf8').replace(/^version: 1$/m, 'version: 1\ntarget:\n  tenantId: tenant-from-file');
    writeFileSync(mapping, text);
    const line = text.split('\n').indexOf('  tenantId: tenant-from-file') + 1; // the section's contents
    const r = await runCliInProcess(['run', mapping]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain(`the mapping has a \`target:\` section (${mapping}:${line}:3)`);
    expect(existsSync(join(dir, '.care-etl'))).toBe(false);
  });

  it('a connection flag without a base URL → exit 2', async () => {
    const { dir, mapping } = clinic();
    const r = await runCliInProcess(['run', mapping, '--tenant-id', 'tenant-x']);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain('--tenant-id is given');
    expect(existsSync(join(dir, '.care-etl'))).toBe(false);
  });

  it('--sandbox with a base URL known is a usage error (exit 2): one target', async () => {
    const { dir, mapping } = clinic();
    const fromEnv = await runCliInProcess(['run', mapping, '--sandbox'], { env: { CARE_BASE_URL: 'https://care.example.test' } });
    expect(fromEnv.code, fromEnv.stderr).toBe(2);
    expect(fromEnv.stderr).toContain('--sandbox loads into the embedded sandbox, but a base URL is set by CARE_BASE_URL');
    const fromFlag = await runCliInProcess(['run', mapping, '--sandbox', '--base-url', 'https://care.example.test']);
    expect(fromFlag.code, fromFlag.stderr).toBe(2);
    expect(existsSync(join(dir, '.care-etl'))).toBe(false);
  });
});

describe('--sandbox, or nothing set: the embedded sandbox, and every output mode says so', () => {
  it('CARE_* set without a base URL, --sandbox --quiet: loads; the one stderr line says "embedded sandbox"', async () => {
    const { dir, mapping } = clinic();
    const md = join(dir, 'report.md');
    const r = await runCliInProcess(['run', mapping, '--sandbox', '--quiet', '--report', md], { env: { ...CARE_WITHOUT_BASE, CI: 'true' } });
    expect(r.code, r.stderr).toBe(1); // the example's deliberately bad rows
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('Target: the embedded sandbox');
    expect(readFileSync(md, 'utf8')).toContain('embedded sandbox');
    expect(existsSync(join(dir, '.care-etl', 'sandbox.db'))).toBe(true);
    // --json --progress none: the report's target says embedded, and stderr still does
    const j = await runCliInProcess(['run', mapping, '--sandbox', '--json', '--progress', 'none'], { env: CARE_WITHOUT_BASE });
    expect(j.code, j.stderr).toBe(1);
    const report = JSON.parse(j.stdout) as { target: { embedded: boolean; dataFile: string }; totals: { unchanged: number } };
    expect(report.target).toMatchObject({ embedded: true, dataFile: join(dir, '.care-etl', 'sandbox.db') });
    expect(report.totals.unchanged).toBeGreaterThan(0); // the same sandbox as the first run
    expect(j.stderr).toContain('Target: the embedded sandbox');
  });

  it('nothing set (a dev machine): the README quickstart loads into the sandbox; --progress none and the summary say so', async () => {
    const { mapping } = clinic();
    const r = await runCliInProcess(['run', mapping, '--progress', 'none']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toContain('Target: the embedded sandbox');
  });
});
