/** `care-etl run --report FILE.html|FILE.md` (built CLI): the report to hand over, chosen by extension, 0600. */
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { copyTree, runCliInProcess } from '../helpers/cli.js';

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
      const r = await runCliInProcess(['run', mapping, '--dry-run', '--quiet', '--report', file]);
      expect(r.code, r.stderr).toBe(1);
      const text = readFileSync(file, 'utf8');
      check(text);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      // patients.csv line 33 (000031, Grace Holm) is rejected: the page names its line and key, never its content.
      if (name !== 'report.json') for (const phi of ['Grace', 'Holm', '02/30/1985', 'grace@example.org']) expect(text).not.toContain(phi);
      if (name !== 'report.json') expect(text).toContain('000031');
    }
  }, 60_000);

  it('says which keys left the export (onMissing: ignore): in the JSON report and on the page', async () => {
    // Every row of this fixture has its key: absent keys can be told apart from unread ones (no keyless reject).
    const dir = copyTree('test/fixtures/run/clean');
    const mapping = join(dir, 'mapping.yaml');
    expect((await runCliInProcess(['run', mapping, '--quiet'])).code).toBe(0); // the embedded sandbox
    const csv = join(dir, 'data', 'patients.csv');
    writeFileSync(csv, readFileSync(csv, 'utf8').replace(/^000002,[^\n]*\n/m, '')); // Liam Moreau left the export
    const r = await runCliInProcess(['run', mapping, '--json', '--report', join(dir, 'report.html')]);
    const report = JSON.parse(r.stdout) as { vanished: { mapping: string; key: string }[]; vanishedCount: number };
    expect(report, r.stdout.slice(0, 3000)).toHaveProperty('vanishedCount');
    expect(report.vanishedCount).toBe(1);
    expect(report.vanished).toEqual([expect.objectContaining({ mapping: 'patient', key: '000002' })]);
    const page = readFileSync(join(dir, 'report.html'), 'utf8');
    expect(page).toContain('Gone from the export (1)');
    // a run that sent requests says the concurrency it settled on (discovered, under the default ceiling)
    expect(page).toMatch(
      /<dt>Concurrency<\/dt><dd>settled at \d+ request\(s\) in flight \(discovered from \d+(, where run \d+ settled)?; largest window \d+, ceiling 32: --max-concurrency\)<\/dd>/,
    );
    expect(page).toContain('000002');
    expect(page).not.toContain('Moreau');
  }, 60_000);
});
