import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { TestReport } from '../../src/mapping-tests/types.js';
import { copyTree, ROOT, runCliInProcess } from '../helpers/cli.js';

// Spawns the built CLI (npm run build; CI builds in `npm ci` → prepare).
beforeAll(() => {
  if (!existsSync(join(ROOT, 'dist/commands/test.js'))) throw new Error('dist/ is missing: run `npm run build` first');
});

describe('care-etl test (built CLI)', () => {
  it('passing cases: ✓ lines, a summary, exit 0', async () => {
    const r = await runCliInProcess(['test', 'test/fixtures/mapping-tests/passing.test.yaml']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('test/fixtures/mapping-tests/passing.test.yaml  → test/fixtures/mapping-tests/mapping.yaml');
    expect(r.stdout).toMatch(/ {2}✓ patient › exact resource from an inline row {2}\(\d/);
    expect(r.stdout).toContain('  - patient › skipped case  (skipped)');
    expect(r.stdout).toMatch(/5 cases · 1 file · .*\ncases: 4 passed, 0 failed, 1 skipped\n/);
  });

  it('failing cases: diff and expression position, exit 1', async () => {
    const r = await runCliInProcess(['test', 'test/fixtures/mapping-tests/failing.test.yaml']);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('✗ patient › wrong expectation');
    expect(r.stdout).toContain('/name/0/family: expected "LEE", got "Lee"');
    expect(r.stdout).toMatch(
      /test\/fixtures\/mapping-tests\/mapping\.yaml:\d+:\d+: error \[jsonata\] at \/resources\/0\/map: .*Unable to cast value to a number/,
    );
  });

  it('a broken test file or mapping: exit 2', async () => {
    const r = await runCliInProcess(['test', 'test/fixtures/mapping-tests/broken']);
    expect(r.code).toBe(2);
    expect(r.stdout).toContain('bad-file.test.yaml:3:14: error [number-not-text]');
  });

  it('--json, and the shipped mappings and examples all pass', async () => {
    const r = await runCliInProcess(['test', 'mappings', 'examples', '--json']);
    expect(r.code, r.stdout.slice(0, 2000)).toBe(0);
    const report = JSON.parse(r.stdout) as TestReport;
    expect(report.totals.failed + report.totals.errors + report.totals.brokenFiles).toBe(0);
    expect(report.files.map((f) => f.file.slice(ROOT.length + 1)).sort()).toEqual([
      'examples/clinic/mapping.test.yaml',
      'mappings/fhir-r4-bulk/fhir-r4-bulk.test.yaml',
      'mappings/generic-csv/generic-csv.test.yaml',
      'mappings/omop-cdm/omop-cdm.test.yaml',
      'mappings/synthea-fhir/synthea-fhir.test.yaml',
      'mappings/synthea/synthea.test.yaml',
    ]);
    expect(report.totals.passed).toBeGreaterThan(40);
  });

  it('no argument: the current folder', async () => {
    const r = await runCliInProcess(['test'], { cwd: join(ROOT, 'mappings/generic-csv') });
    expect(r.code, r.stdout).toBe(0);
    expect(r.stdout).toContain('generic-csv.test.yaml  → mapping.yaml');
  });
});

describe('care-etl init (built CLI)', () => {
  it('writes a starter mapping, refuses to overwrite it, and validate lists the TODO left', async () => {
    const dir = copyTree('examples/clinic');
    const out = join(dir, 'starter.yaml');
    const args = [
      'init',
      '--from',
      join(dir, 'data/patients.csv'),
      '--from',
      join(dir, 'data/practitioners.json'),
      '--from',
      join(dir, 'data/assignments.csv'),
      '--out',
      out,
    ];
    const first = await runCliInProcess(args);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/patient\s+Patient\s+MRN/);
    expect(first.stdout).toContain('2 TODO markers to resolve');
    const text = readFileSync(out, 'utf8');
    expect(text).toContain('{ path: data/patients.csv }');

    const again = await runCliInProcess(args);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('already exists: not overwritten');
    expect(readFileSync(out, 'utf8')).toBe(text);
    expect((await runCliInProcess([...args, '--force'])).code).toBe(0);

    const v = await runCliInProcess(['validate', out]);
    expect(v.code).toBe(2);
    expect(v.stderr).toMatch(/starter\.yaml:\d+:\d+: error \[todo\] at \/resources\/0\/map: mapping `patient` map: TODO — the namespace \(URI\) of your MRNs/);
  });

  it('an unreadable export: exit 2', async () => {
    const r = await runCliInProcess(['init', '--from', 'nope.csv', '--out', join(mkdtempSync(join(tmpdir(), 'care-etl-')), 'm.yaml')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('nope.csv: file not found');
  });
});
