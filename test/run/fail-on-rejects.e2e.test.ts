import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { copyTree, runCliInProcess } from '../helpers/cli.js';

// The example clinic rejects 9 of its 90 rows (10%).
describe('run --fail-on-rejects', () => {
  it('50% → exit 0 with the rejects still reported (summary, warning, report); 8 → exit 1; a bad value → exit 2', async () => {
    const dir = copyTree('examples/clinic');
    const ok = await runCliInProcess(['run', 'mapping.yaml', '--fail-on-rejects', '50%', '--report', 'report.md', '--progress', 'none'], { cwd: dir });
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain('9 rows rejected: see');
    expect(ok.stdout).toContain('warning: 9 row(s) rejected (10.0% of 90 rows read): at or below --fail-on-rejects 50%');
    const md = readFileSync(join(dir, 'report.md'), 'utf8');
    expect(md).toContain('at or below --fail-on-rejects 50%');

    const above = await runCliInProcess(['run', 'mapping.yaml', '--fail-on-rejects', '8', '--json', '--progress', 'none'], { cwd: dir });
    expect(above.code).toBe(1);
    const report = JSON.parse(above.stdout) as { exitCode: number; failOnRejects: string; warnings: string[] };
    expect(report).toMatchObject({ exitCode: 1, failOnRejects: '8' });
    expect(report.warnings.join('\n')).not.toContain('--fail-on-rejects');

    const bad = await runCliInProcess(['run', 'mapping.yaml', '--fail-on-rejects', '5x'], { cwd: dir });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('Expected `--fail-on-rejects` to be a count ≥ 0 or a percentage like 5%, got `5x`');
  });
});
