/** Every wrong flag value reads "Expected `--x` to be …, got `y`", oclif's own checks (integer, options) included. */
import { describe, expect, it } from 'vitest';
import { uniformFlagMessage } from '../../src/cli/base-command.js';
import { runCliInProcess } from '../helpers/cli.js';

describe("oclif's flag-value messages in the CLI's own wording", () => {
  it.each([
    ['Parsing --concurrency: Expected an integer but received: abc', 'Expected `--concurrency` to be an integer, got `abc`'],
    ['Parsing --max-errors: Expected an integer greater than or equal to 1 but received: -1', 'Expected `--max-errors` to be an integer ≥ 1, got `-1`'],
    ['Parsing --fail-on-rejects: Expected `--fail-on-rejects` to be a count, got `12x`', 'Expected `--fail-on-rejects` to be a count, got `12x`'],
    ['Expected --progress=sometimes to be one of: auto, bar, lines, none', 'Expected `--progress` to be one of auto, bar, lines, none, got `sometimes`'],
    ['Nonexistent flag: --bogus', 'Nonexistent flag: --bogus'],
  ])('%s', (oclif, ours) => {
    expect(uniformFlagMessage(oclif)).toBe(ours);
  });

  it('care-etl run --concurrency 0: exit 2 with the uniform message, nothing else on stdout', async () => {
    const r = await runCliInProcess(['run', 'missing.yaml', '--concurrency', '0']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('Expected `--concurrency` to be an integer ≥ 1, got `0`');
    expect(r.stdout).toBe('');
  });
});
