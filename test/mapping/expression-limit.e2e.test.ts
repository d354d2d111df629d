// A `map:` that recurses forever (a tail call: JSONata never overflows the stack) must end as a rejected row
// within `limits.expressionTimeoutMs` — in `run --dry-run`, `validate --sample` and `care-etl test` — instead of
// hanging at 100 % CPU. Built CLI (`npm run build`); fixture: test/fixtures/expression-limit/ (limit 200 ms).
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { TestReport } from '../../src/mapping-tests/types.js';
import type { RunReport } from '../../src/pipeline/run-report.js';
import type { ValidateReport } from '../../src/pipeline/validate-mapping.js';
import { ROOT, runCli } from '../helpers/cli.js';

const FIXTURE = 'test/fixtures/expression-limit';
const MAPPING = join(ROOT, FIXTURE, 'mapping.yaml');
/** The runaway rejection, with its position in the mapping (the recursive call; never a cell value). */
const TIMEOUT_ISSUE = /mapping `patient` map: the expression ran longer than 200 ms and was stopped \(likely infinite recursion[^\n]*\[D1012\]/;
// A hang is killed by runCli after this long and fails the test (no timing assertion beyond that).
const KILL_AFTER_MS = 30_000;

beforeAll(() => {
  if (!existsSync(join(ROOT, 'dist/commands/run.js'))) throw new Error('dist/ is missing: run `npm run build` first');
});

describe('a runaway expression is bounded (built CLI)', { timeout: 60_000 }, () => {
  it('run --dry-run: the looping row is rejected with file:line:col, the other rows are written, exit 1', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-exprlimit-'));
    const rejectsFile = join(dir, 'rejects.ndjson');
    const args = [
      'run',
      MAPPING,
      '--dry-run',
      '--out',
      join(dir, 'out'),
      '--rejects',
      rejectsFile,
      '--state',
      join(dir, 'state.db'),
      '--progress',
      'none',
      '--json',
    ];
    const r = await runCli(args, { timeoutMs: KILL_AFTER_MS });
    expect(r.signal, r.stderr).toBeNull();
    expect(r.code, r.stderr).toBe(1);
    const report = JSON.parse(r.stdout) as RunReport;
    expect(report.mappings.patient).toMatchObject({ read: 3, rejected: 1 });
    const written = readFileSync(join(dir, 'out', 'Patient.ndjson'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { identifier: { value: string }[] });
    expect(written.map((p) => p.identifier[0]!.value)).toEqual(['001', '003']);

    const rejects = readFileSync(rejectsFile, 'utf8')
      .trim()
      .split('\n')
      .map(
        (l) =>
          JSON.parse(l) as {
            stage: string;
            line: number;
            key: string;
            issues: { code: string; message: string; path: string; location: { file: string; line: number; column: number } }[];
          },
      );
    expect(rejects).toHaveLength(1);
    expect(rejects[0]).toMatchObject({ stage: 'transform', line: 3, key: '002' });
    const issue = rejects[0]!.issues[0]!;
    expect(issue).toMatchObject({ code: 'jsonata', path: '/resources/0/map', location: { file: MAPPING } });
    expect(issue.message).toMatch(TIMEOUT_ISSUE);
    expect(issue.message).not.toContain('Secretname');
    // inside the map's block scalar (lines 15–21 of the fixture), at a call of the runaway function
    expect(issue.location.line).toBeGreaterThanOrEqual(15);
    expect(issue.location.line).toBeLessThanOrEqual(21);
    const lines = readFileSync(MAPPING, 'utf8').split('\n');
    expect(lines[issue.location.line - 1]!.slice(issue.location.column - 1)).toMatch(/^\$spin\(/);
  });

  it('validate --sample N: the sample reports the row rejected, exit 1', async () => {
    const r = await runCli(['validate', MAPPING, '--sample', '10'], { timeoutMs: KILL_AFTER_MS });
    expect(r.signal, r.stderr).toBeNull();
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toMatch(/patient\s+3\s+2\s+1/);
    // the reason first, the mapping's name, the JSONata code and the expression's position on the line below (issue 26)
    expect(r.stdout).toMatch(
      /\] the expression ran longer than 200 ms and was stopped \(likely infinite recursion[^\n]*\n {4}transform, mapping `patient` map, \[D1012\], test\/fixtures\/expression-limit\/mapping\.yaml:\d+:\d+\n/,
    );

    const json = await runCli(['validate', MAPPING, '--sample', '10', '--json'], { timeoutMs: KILL_AFTER_MS });
    expect(json.code, json.stderr).toBe(1);
    const report = JSON.parse(json.stdout) as ValidateReport;
    expect(report.samples?.patient).toMatchObject({ rows: 3, valid: 2 });
    expect(report.samples?.patient.rejects).toHaveLength(1);
    expect(report.samples?.patient.rejects[0]).toMatchObject({ line: 3, issues: [{ code: 'jsonata', location: { file: MAPPING } }] });
    expect(json.stdout).not.toContain('Secretname');
  });

  it('care-etl test: a `reject:` case passes; a case expecting a resource fails cleanly (exit 1)', async () => {
    const ok = await runCli(['test', join(FIXTURE, 'expression-limit.test.yaml'), '--json'], { timeoutMs: KILL_AFTER_MS });
    expect(ok.signal, ok.stderr).toBeNull();
    expect(ok.code, ok.stdout).toBe(0);
    const report = JSON.parse(ok.stdout) as TestReport;
    expect(report.totals).toMatchObject({ passed: 2, failed: 0, errors: 0, brokenFiles: 0 });

    const bad = await runCli(['test', join(FIXTURE, 'expecting-resource')], { timeoutMs: KILL_AFTER_MS });
    expect(bad.signal, bad.stderr).toBeNull();
    expect(bad.code, bad.stdout).toBe(1);
    expect(bad.stdout).toContain('✗ patient › expects a resource from a row that loops');
    expect(bad.stdout).toContain('1 rejection not expected by the case');
    expect(bad.stdout).toMatch(/test\/fixtures\/expression-limit\/mapping\.yaml:\d+:\d+: error \[jsonata\] at \/resources\/0\/map: /);
    expect(bad.stdout).toMatch(TIMEOUT_ISSUE);
    expect(bad.stdout).toMatch(/cases: 0 passed, 1 failed/);
  });
});
