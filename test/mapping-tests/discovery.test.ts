import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findTestFiles } from '../../src/mapping-tests/run-mapping-tests.js';
import { ROOT, runCliInProcess } from '../helpers/cli.js';

let dir: string;
const TREE = [
  'a.test.yaml',
  'sub/ok.test.yaml',
  'sub/fixtures/in-sub-fixtures.test.yaml',
  'fixtures/top.test.yaml',
  'fixtures/nested/deep.test.yaml',
  'fixtures/nested/fixtures/nested-fixtures.test.yaml',
  'node_modules/pkg/dep.test.yaml',
  '.care-etl/dry-run/state.test.yaml',
  '.git/hooks/git.test.yaml',
  'dist/built.test.yaml',
];

/** The files found, relative to the temp tree. */
async function found(paths: string[]): Promise<string[]> {
  const { files, missing } = await findTestFiles(paths, dir);
  expect(missing).toEqual([]);
  return files.map((f) => relative(dir, f));
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'care-etl-discovery-'));
  for (const f of TREE) {
    mkdirSync(join(dir, dirname(f)), { recursive: true });
    writeFileSync(join(dir, f), 'cases: []\n');
  }
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('findTestFiles: folders a recursive search skips', () => {
  it('skips node_modules, dist, dot-folders (.git, .care-etl) and folders named fixtures', async () => {
    expect(await found([])).toEqual(['a.test.yaml', 'sub/ok.test.yaml']);
    expect(await found(['.'])).toEqual(['a.test.yaml', 'sub/ok.test.yaml']);
    expect(await found(['sub'])).toEqual(['sub/ok.test.yaml']);
  });

  it('searches a skipped folder the user names explicitly (folders below it are filtered again)', async () => {
    expect(await found(['fixtures'])).toEqual(['fixtures/nested/deep.test.yaml', 'fixtures/top.test.yaml']);
    expect(await found(['fixtures/nested/fixtures'])).toEqual(['fixtures/nested/fixtures/nested-fixtures.test.yaml']);
    expect(await found(['sub/fixtures'])).toEqual(['sub/fixtures/in-sub-fixtures.test.yaml']);
    expect(await found(['.care-etl'])).toEqual(['.care-etl/dry-run/state.test.yaml']);
    expect(await found(['node_modules/pkg'])).toEqual(['node_modules/pkg/dep.test.yaml']);
  });

  it('runs a test file named explicitly inside a skipped folder', async () => {
    expect(await found(['fixtures/top.test.yaml', '.git/hooks/git.test.yaml'])).toEqual(['fixtures/top.test.yaml', '.git/hooks/git.test.yaml']);
  });
});

describe('care-etl test at the repository root (built CLI)', () => {
  it('runs the shipped mapping tests and not the deliberately broken ones under test/fixtures', async () => {
    const r = await runCliInProcess(['test', '--json'], { cwd: ROOT });
    const report = JSON.parse(r.stdout) as { files: { file: string }[]; exitCode: number };
    const files = report.files.map((f) => relative(ROOT, f.file)).sort();
    expect(files).toEqual([
      'examples/clinic/mapping.test.yaml',
      'mappings/fhir-r4-bulk/fhir-r4-bulk.test.yaml',
      'mappings/generic-csv/generic-csv.test.yaml',
      'mappings/omop-cdm/omop-cdm.test.yaml',
      'mappings/synthea-fhir/synthea-fhir.test.yaml',
      'mappings/synthea/synthea.test.yaml',
    ]);
    expect(report.exitCode).toBe(0);
    expect(r.code).toBe(0);
  });
});
