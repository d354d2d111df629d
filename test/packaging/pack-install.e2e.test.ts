import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';

/*
 * Issue 16 (install like a CLI): scripts/pack-install-check.mjs packs the checkout, installs the tarball with
 * `npm install -g --prefix <temp>` and runs `care-etl` from a temp folder outside the checkout with only that
 * prefix's bin added to PATH. Needs the built dist/ (`npm ci` builds it) and the npm cache or registry for the
 * dependencies; better-sqlite3 reuses this checkout's binary of the same version (see the script), else it builds.
 */

interface Summary {
  tarball: string;
  shipped: string[];
  installSeconds: number;
  betterSqlite3: string;
  dryRunPatients: number;
  commands: { argv: string[]; status: number | null; stdout: string; stderr: string }[];
  failures: string[];
}

function check(): Promise<{ code: number | null; summary: Summary; stderr: string }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [join(ROOT, 'scripts', 'pack-install-check.mjs'), '--json'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      try {
        resolvePromise({ code, summary: JSON.parse(stdout) as Summary, stderr });
      } catch {
        reject(new Error(`no summary (exit ${code}): ${stdout.slice(-2000)} ${stderr.slice(-2000)}`));
      }
    });
  });
}

describe('packed, installed globally into a temp prefix, run from outside the checkout', () => {
  it('ships what the README links to and no source maps; --version, init, validate, a dry run and a run work', { timeout: 600_000 }, async () => {
    const { code, summary } = await check();
    expect(summary.failures).toEqual([]);
    expect(code).toBe(0);
    const shipped = summary.shipped;
    expect(shipped.filter((f) => f.endsWith('.map') || /^(test|bench|src)\//.test(f))).toEqual([]);
    for (const f of [
      'bin/run.js',
      'README.md',
      'BENCHMARKS.md',
      'docs/sandbox.md',
      'docs/export.md',
      'examples/clinic/README.md',
      'examples/clinic/data/patients.csv',
      'mappings/README.md',
      'schemas/mapping.schema.json',
    ]) {
      expect(shipped).toContain(f);
    }
    const byCommand = Object.fromEntries(summary.commands.map((c) => [c.argv.slice(1, 2).join(' ') + (c.argv.includes('--dry-run') ? ' --dry-run' : ''), c]));
    expect(byCommand['--version']?.stdout).toMatch(/^care-etl\/\d+\.\d+\.\d+ /);
    expect(byCommand.init?.status).toBe(0);
    expect(byCommand.validate?.status).toBe(0);
    expect(byCommand['run --dry-run']?.status).toBe(1); // the example's deliberately bad rows
    expect(summary.dryRunPatients).toBe(30);
    expect(byCommand.run?.stdout).toMatch(/patient\s+35\s+30\s/);
  });
});
