/**
 * `runCliInProcess` (test/helpers/cli.ts) stands in for the spawned CLI in most end-to-end files: it must give what
 * `node bin/run.js` gives — exit code, stdout, stderr — and leave the test worker as it found it.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { copyTree, runCli, runCliInProcess, type CliResult } from '../helpers/cli.js';

/** What differs between two runs of the same command: timings, dates, process ids. */
const stable = (r: CliResult) => {
  const clean = (s: string) =>
    s
      .replace(/"durationMs": \d+/g, '"durationMs": N')
      .replace(/[\d.,]+ ?(ms|s|rows\/s)\b/g, 'T')
      .replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/g, 'DATE')
      .replace(/node:\d+/g, 'node:PID');
  return { code: r.code, stdout: clean(r.stdout), stderr: clean(r.stderr) };
};

describe('runCliInProcess', () => {
  it('gives what the spawned CLI gives: a dry run with rejects (exit 1), --json, a usage error (exit 2)', async () => {
    const cases = [
      ['run', 'examples/clinic/mapping.yaml', '--dry-run', '--progress', 'lines'],
      ['validate', 'examples/clinic/mapping.yaml', '--sample', '5', '--json'],
      ['run', 'examples/clinic/mapping.yaml', '--dryrun'],
    ];
    for (const args of cases) {
      const [spawned, inProcess] = [await runCli(args), await runCliInProcess(args)];
      expect(stable(inProcess), args.join(' ')).toEqual(stable(spawned));
    }
  });

  it('runs in the given cwd, and leaves exit code, environment, cwd and signal handlers as they were', async () => {
    const before = { env: { ...process.env }, cwd: process.cwd(), exitCode: process.exitCode, sigint: process.listenerCount('SIGINT') };
    const dir = copyTree('examples/clinic');
    const r = await runCliInProcess(['run', 'mapping.yaml', '--dry-run', '--api-key', 'inproc-secret-9f3'], { cwd: dir, env: { CARE_EMR_ID: 'emr-inproc' } });
    expect(r.code, r.stderr).toBe(1); // the example's rejected rows
    expect(existsSync(join(dir, '.care-etl', 'dry-run', 'Patient.ndjson'))).toBe(true);
    expect(r.stdout + r.stderr).not.toContain('inproc-secret-9f3');
    expect({ env: process.env, cwd: process.cwd(), exitCode: process.exitCode, sigint: process.listenerCount('SIGINT') }).toEqual(before);
  });
});
