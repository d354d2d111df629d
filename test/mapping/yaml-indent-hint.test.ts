import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadMapping } from '../../src/mapping/load-mapping.js';
import { issuesOf } from './helpers.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'care-etl-indent-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const MAPPING = [
  'version: 1',
  'sources:',
  '  rows: { path: rows.csv }',
  'resources:',
  '  - name: patient',
  '    type: Patient',
  '    from: rows',
  '    key: MRN',
  '    map: |',
  '      {',
  '        "birthDate": DOB',
  '      }',
];

/** The first YAML error's message for MAPPING with line `n` (1-based) replaced by `line`. */
async function firstYamlError(n: number, line: string): Promise<string> {
  const text = MAPPING.map((l, i) => (i === n - 1 ? line : l)).join('\n') + '\n';
  await writeFile(join(dir, 'm.yaml'), text);
  const { issues } = await issuesOf(() => loadMapping(join(dir, 'm.yaml'), { env: {} }));
  return issues.find((i) => i.code === 'yaml' && / — line \d+/.test(i.message))?.message ?? issues[0]!.message;
}

describe('YAML errors caused by indentation name the line, its indentation and the one it needs', () => {
  it('a key indented between two levels', async () => {
    expect(await firstYamlError(8, '   key: MRN')).toContain(
      'line 8 is indented by 3 spaces, but the keys before it by 0, 2, 4: YAML nests by indentation — indent it by 4',
    );
  });

  it('a key indented deeper than the key before it, which has a value (yaml reports the line before)', async () => {
    expect(await firstYamlError(8, '      key: MRN')).toContain(
      'line 8 is indented by 6 spaces, deeper than line 7 (4), whose key already has a value: indent it by 4',
    );
  });

  it('a key at the indentation of the `-` of its item', async () => {
    expect(await firstYamlError(8, '  key: MRN')).toContain('line 8 is indented by 2 spaces, like the `-` of line 5, but is not a new item: indent it by 4');
  });

  it('a line of a `map: |` block not indented deeper than `map:`', async () => {
    expect(await firstYamlError(10, '   {')).toContain(
      "line 10 is indented by 3 spaces, which ends the block that line 9 starts with `|`: indent the block's lines deeper than its key (by 6)",
    );
  });

  it('a list item without the space after its `-`', async () => {
    expect(await firstYamlError(5, '  -name: patient')).toContain('line 5 starts with `-name`: a list item needs a space after its `-` (`- name`)');
  });

  it('only the first 20 errors get a hint (each reads the whole file: a mis-indented 8,000-line lookup took seconds)', async () => {
    const lines = ['version: 1', 'lookups:', '  sex:'];
    for (let i = 0; i < 60; i++) lines.push(i % 2 ? `    k${i}: v` : `  k${i}: "x`);
    await writeFile(join(dir, 'big.yaml'), lines.join('\n') + '\n');
    const { issues } = await issuesOf(() => loadMapping(join(dir, 'big.yaml'), { env: {} }));
    const hinted = issues.map((i, n) => (/ — line \d+/.test(i.message) ? n : -1)).filter((n) => n >= 0);
    expect(issues.length).toBeGreaterThan(25);
    expect(hinted.length).toBeGreaterThan(0);
    expect(Math.max(...hinted)).toBeLessThan(20);
  });

  it('no hint for a tab (yaml says it) nor for errors that are not about indentation', async () => {
    expect(await firstYamlError(8, '\tkey: MRN')).not.toContain(' — line');
    expect(await firstYamlError(3, '  rows: { path: rows.csv')).not.toContain(' — line');
  });
});
