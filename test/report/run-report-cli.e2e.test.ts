/** `care-etl run --report FILE.html|FILE.md` (built CLI): the report to hand over, chosen by extension, 0600. */
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { copyTree, runCli } from '../helpers/cli.js';

describe('run --report by extension', () => {
  it('writes a self-contained HTML page, Markdown, or JSON — each 0600', async () => {
    const dir = copyTree('examples/clinic');
    const mapping = join(dir, 'mapping.yaml');
    for (const [name, check] of [
      ['report.html', (t: string) => expect(t).toMatch(/^<!DOCTYPE html>/i)],
      ['report.md', (t: string) => expect(t).toMatch(/^## care-etl run report/)],
      ['report.json', (t: string) => expect(JSON.parse(t)).toMatchObject({ totals: { rejected: 9 } })],
    ] as const) {
      const file = join(dir, name);
      const r = await runCli(['run', mapping, '--dry-run', '--quiet', '--report', file]);
      expect(r.code, r.stderr).toBe(1);
      const text = readFileSync(file, 'utf8');
      check(text);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      if (name !== 'report.json') expect(text).not.toContain('Sofia'); // no patient names without --include-rows
    }
  }, 60_000);
});
