import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const BIN = join(ROOT, 'bin', 'run.js');

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * The caller's environment without CARE_* and `CI`: both make the CLI refuse the embedded sandbox (a GitHub-style
 * runner sets CI=true), so a test that wants them passes them in `env`.
 */
export function cleanEnv(): Record<string, string | undefined> {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CARE_') && k !== 'CI'));
}

/** Runs the built CLI (`npm ci` builds it) with a clean environment (`cleanEnv`) plus `env`. */
export function runCli(args: string[], opts: { env?: Record<string, string | undefined>; cwd?: string; timeoutMs?: number } = {}): Promise<CliResult> {
  const base = cleanEnv();
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: opts.cwd ?? ROOT, env: { ...base, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 120_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolvePromise({ code, signal, stdout, stderr });
    });
  });
}

/** A private copy of a folder (e.g. examples/clinic) so that its `.care-etl/` state stays in a temp dir. */
export function copyTree(from: string, prefix = 'care-etl-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cpSync(join(ROOT, from), dir, { recursive: true, filter: (src) => !src.includes('.care-etl') });
  return dir;
}
