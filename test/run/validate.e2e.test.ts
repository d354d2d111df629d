import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import type { ValidateReport } from '../../src/pipeline/validate-mapping.js';
import type { ErrorJson } from '../../src/cli/render.js';
import { ROOT, runCliInProcess } from '../helpers/cli.js';

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
