/** `-h`, `-q`, `-v` and "did you mean" for a mistyped flag, through the built CLI. */
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { ROOT, runCli, runCliInProcess } from '../helpers/cli.js';

const mapping = join(ROOT, 'examples', 'clinic', 'mapping.yaml');

describe('short flags', () => {
  it('-h prints the same help as --help, for the root and for a command', async () => {
    const [h, help, rootH, rootHelp] = await Promise.all([
      runCli(['run', '-h']),
      runCliInProcess(['run', '--help']),
      runCliInProcess(['-h']),
      runCliInProcess(['--help']),
    ]);
    expect(h.code).toBe(0);
    expect(h.stdout).toContain('$ care-etl run MAPPING');
    expect(h.stdout).toBe(help.stdout);
    expect(rootH.stdout).toBe(rootHelp.stdout);
  });

  it('-q prints nothing on success; -v is --verbose on a command and the version alone', async () => {
    const [q, v, version] = await Promise.all([runCliInProcess(['validate', mapping, '-q']), runCliInProcess(['-v']), runCliInProcess(['--version'])]);
    expect([q.code, q.stdout, q.stderr]).toEqual([0, '', '']);
    expect(v.stdout).toBe(version.stdout);
    const both = await runCliInProcess(['validate', mapping, '-q', '-v']);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--quiet');
  });
});

describe('a mistyped flag', () => {
  it('--dryrun: "Did you mean --dry-run?", exit 2, nothing sent', async () => {
    const r = await runCliInProcess(['run', mapping, '--dryrun']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('Nonexistent flag: --dryrun');
    expect(r.stderr).toContain('Did you mean --dry-run?');
  });

  it('under --json the suggestion is the hint of the envelope', async () => {
    const r = await runCliInProcess(['export', mapping, '--fromat', 'csv', '--json']);
    expect(r.code).toBe(2);
    expect((JSON.parse(r.stdout) as { error: { hint: string } }).error.hint).toMatch(/^Did you mean --format\?/);
  });
});
