/** `validate --sample` says so when every sampled row of a mapping was skipped: a `where:` that never holds. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCliInProcess } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'care-etl-skips-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
writeFileSync(join(dir, 'rows.csv'), 'MRN,SEX\n1,m\n2,f\n3,m\n');

function mapping(where: string): string {
  const file = join(dir, 'm.yaml');
  writeFileSync(
    file,
    `version: 1\nsources:\n  rows: { path: rows.csv }\nresources:\n  - name: patient\n    type: Patient\n    from: rows\n    key: MRN\n    where: ${where}\n    map: '{ "identifier": [{ "value": MRN }] }'\n`,
  );
  return file;
}

describe('validate --sample with every sampled row skipped', () => {
  it('warns that a run would load none of them (a `where:` comparing `M` with the export`s `m`)', async () => {
    const r = await runCliInProcess(['validate', mapping('SEX = "M"'), '--sample', '10']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('warning: every sampled row of `patient` (3) was skipped — by its `where:` or a map producing nothing');
  });

  it('says nothing when some rows pass', async () => {
    const r = await runCliInProcess(['validate', mapping('SEX = "m"'), '--sample', '10']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toContain('warning: every sampled row');
  });
});
