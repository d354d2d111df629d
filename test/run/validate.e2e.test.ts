import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ValidateReport } from '../../src/pipeline/validate-mapping.js';
import type { ErrorJson } from '../../src/cli/render.js';
import { copyTree, ROOT, runCliInProcess } from '../helpers/cli.js';

describe('care-etl validate (built CLI, offline)', () => {
  it('accepts the example and reports the load order; --sample lists the sample rejections and exits 1 (0 with --allow-rejects)', async () => {
    const res = await runCliInProcess(['validate', join(ROOT, 'examples/clinic/mapping.yaml'), '--sample', '50', '--json']);
    expect(res.code, res.stderr).toBe(1); // the example has deliberately bad rows: a run would reject them
    const allowed = await runCliInProcess(['validate', join(ROOT, 'examples/clinic/mapping.yaml'), '--sample', '50', '--allow-rejects', '--json']);
    expect(allowed.code, allowed.stderr).toBe(0);
    expect(JSON.parse(allowed.stdout)).toMatchObject({ exitCode: 0, samples: { patient: { valid: 30 } } });
    const report = JSON.parse(res.stdout) as ValidateReport;
    expect(report.order).toEqual(['patient', 'practitioner', 'careteam']);
    expect(report.samples?.patient).toMatchObject({ rows: 35, valid: 30 });
    expect(report.samples?.patient.rejects.map((r) => r.line)).toEqual([21, 33, 34, 35, 36]);
    // Rows are not copied into the report (patient data stays in files with mode 0600).
    expect(JSON.stringify(report)).not.toContain('Grace');
  });

  it('--sample over whole sources rejects what a dry run rejects — a $ref to a key its target source lacks included', async () => {
    const mapping = join(copyTree('examples/clinic'), 'mapping.yaml');
    const sampled = await runCliInProcess(['validate', mapping, '--sample', '1000', '--json']);
    const report = JSON.parse(sampled.stdout) as ValidateReport;
    const dry = await runCliInProcess(['run', mapping, '--dry-run', '--progress', 'none']);
    expect(dry.code, dry.stderr).toBe(1);
    const rejects = readFileSync(join(dirname(mapping), '.care-etl', 'dry-run', 'rejects.ndjson'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { mapping: string; line: number; issues: { code: string }[] });
    for (const name of report.order)
      expect(
        report.samples?.[name]?.rejects.map((r) => [r.line, r.issues[0]!.code]),
        name,
      ).toEqual(rejects.filter((r) => r.mapping === name).map((r) => [r.line, r.issues[0]!.code]));
    // assignments.csv line 3 refers to practitioner 9999999991, in no row of practitioners.json
    expect(report.samples?.careteam?.rejects.find((r) => r.line === 3)?.issues[0]).toMatchObject({ code: 'ref-missing' });
    // a sample that did not read the practitioners whole cannot tell: a placeholder, as before
    const partial = JSON.parse((await runCliInProcess(['validate', mapping, '--sample', '3', '--json'])).stdout) as ValidateReport;
    expect(partial.samples?.careteam?.rejects.map((r) => r.line)).toEqual([]);
  });

  it('reports every problem at once with file:line:column and exits 2', async () => {
    const res = await runCliInProcess(['validate', join(ROOT, 'test/fixtures/run/broken/mapping.yaml')]);
    expect(res.code).toBe(2);
    // the `]` inside the block scalar: line 11, column 62 of the fixture
    expect(res.stderr).toMatch(/broken\/mapping\.yaml:11:\d+: error \[jsonata-syntax\]/);
    const json = await runCliInProcess(['validate', join(ROOT, 'test/fixtures/run/broken/mapping.yaml'), '--json']);
    const body = JSON.parse(json.stdout) as ErrorJson;
    expect(body.exitCode).toBe(2);
    expect(body.error.issues[0]).toMatchObject({ code: 'jsonata-syntax', location: { line: 11 } });
  });
});
