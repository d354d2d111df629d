// Issue 22 items 3 and 5: `validate --sample` and `run --dry-run` reject what the run rejects for reasons that need
// no server (a `match:` giving two values, an impossible calendar date written without `$date`), with the same
// stage, code and reason; `validate --sample` fails (exit 1) on such a row. The run goes to a sandbox over HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { CareClient } from '../../src/api/client.js';
import { connectionFromEnv, resolveConnection } from '../../src/api/connection.js';
import type { Resource } from '../../src/api/types.js';
import type { RunReport } from '../../src/pipeline/run-report.js';
import type { ValidateReport } from '../../src/pipeline/validate-mapping.js';
import { copyTree, runCliInProcess } from '../helpers/cli.js';

const API_KEY = 'gate-e2e-key-51c2a9';
let sb: Sandbox;
const envFor = (tenant: string) => ({ CARE_BASE_URL: sb.url, CARE_API_KEY: API_KEY, CARE_EMR_ID: 'emr-gate', CARE_TENANT_ID: tenant });

beforeAll(async () => {
  sb = await startSandbox({ apiKey: API_KEY, emrId: 'emr-gate', tenants: ['t-gate', 't-collide', 't-known'], observationsPerPatient: 0 });
});
afterAll(async () => {
  await sb.close();
});

type Reject = { line?: number; stage: string; key?: string; issues: { code: string; message: string; path?: string }[] };
/** What a reject says, without where its file lives: line, key, stage, then each issue's code, path and message. */
const said = (r: Reject) => `${r.line}:${r.key}:${r.stage}:${r.issues.map((i) => `${i.code} ${i.path ?? ''} ${i.message}`).join(' | ')}`;
const readRejects = (file: string): Reject[] =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Reject);

async function patients(tenant: string): Promise<Resource[]> {
  const client = new CareClient(resolveConnection(connectionFromEnv(envFor(tenant))), { retry: false });
  try {
    const out: Resource[] = [];
    for await (const r of client.list('Patient', { pageSize: 100 })) out.push(r);
    return out;
  } finally {
    await client.close();
  }
}

describe('the offline loop rejects what the run rejects', () => {
  it('a two-valued match: and an impossible birthDate: validate --sample, --dry-run and the run agree; validate exits 1', async () => {
    const dir = copyTree('test/fixtures/gate', 'care-etl-gate-');
    const mapping = join(dir, 'mapping.yaml');

    const validate = await runCliInProcess(['validate', mapping, '--sample', '10', '--json']);
    expect(validate.code, validate.stderr).toBe(1);
    const report = JSON.parse(validate.stdout) as ValidateReport & { exitCode: number };
    expect(report.exitCode).toBe(1);
    const sampled = report.samples!.patient!.rejects.map((r) => said(r as Reject));

    const dry = await runCliInProcess(['run', mapping, '--dry-run', '--json'], { env: envFor('t-gate') });
    expect(dry.code, dry.stderr).toBe(1);
    const dryReport = JSON.parse(dry.stdout) as RunReport;
    expect(dryReport.mappings.patient).toMatchObject({ read: 4, written: 2, rejected: 2 });
    const dryRejects = readRejects(join(dir, '.care-etl', 'dry-run', 'rejects.ndjson')).map(said);

    const run = await runCliInProcess(['run', mapping, '--json'], { env: envFor('t-gate') });
    expect(run.code, run.stderr).toBe(1);
    expect((JSON.parse(run.stdout) as RunReport).mappings.patient).toMatchObject({ read: 4, created: 2, rejected: 2 });
    const runRejects = readRejects(join(dir, '.care-etl', 'rejects.ndjson')).map(said);

    expect(runRejects).toEqual([
      expect.stringMatching(/^3:002:validate:format \/birthDate must be a calendar date/),
      '4:003:load:match-invalid /resources/0/match mapping `patient` match: `identifier.value` must give text, got 2 values',
    ]);
    expect(dryRejects).toEqual(runRejects);
    expect(sampled).toEqual(runRejects);
    // The match reject names the mapping's file:line:col in every loop.
    expect(report.samples!.patient!.rejects[1]!.issues[0]!.location).toMatchObject({ file: mapping, line: 14, column: 12 });

    // Over HTTP: the two good rows are on the server, nothing of the rejected ones.
    const loaded = await patients('t-gate');
    expect(loaded.map((p) => p.birthDate).sort()).toEqual(['1985-02-28', '2000-02-29']);

    const allowed = await runCliInProcess(['validate', mapping, '--sample', '10', '--allow-rejects']);
    expect(allowed.code, allowed.stderr).toBe(0);
    expect(allowed.stdout).toMatch(/2 sampled row\(s\) rejected/);
    const text = await runCliInProcess(['validate', mapping, '--sample', '10']);
    expect(text.code).toBe(1);
    // The reason first (naming the column where one is read), the mapping's words on the line below it.
    expect(text.stdout).toMatch(/`identifier\.value` must give text, got 2 values\n\s+load, mapping `patient` match, .*mapping\.yaml:14:12/);
    expect(text.stdout).toMatch(/column DOB: must be a calendar date[^\n]*\n\s+validate, resource field \/birthDate/);
    expect(text.stdout + text.stderr).not.toContain('1985-02-30');
  });

  it('a key the state already holds is checked too: the run rejects it as validate --sample does, whatever the state', async () => {
    const dir = copyTree('test/fixtures/gate', 'care-etl-gate-known-');
    const mapping = join(dir, 'mapping.yaml');
    const text = readFileSync(mapping, 'utf8');
    writeFileSync(mapping, text.replace('match: identifier.value', 'match: identifier[0].value'));
    const first = await runCliInProcess(['run', mapping, '--json'], { env: envFor('t-known') });
    expect((JSON.parse(first.stdout) as RunReport).mappings.patient).toMatchObject({ created: 3, rejected: 1 });
    // The same resources, now with a match giving two values for 003: unchanged in the state, yet not matchable.
    writeFileSync(mapping, text);
    const second = await runCliInProcess(['run', mapping, '--json'], { env: envFor('t-known') });
    expect(second.code, second.stderr).toBe(1);
    expect((JSON.parse(second.stdout) as RunReport).mappings.patient).toMatchObject({ unchanged: 2, rejected: 2 });
    const rejects = readRejects(join(dir, '.care-etl', 'rejects.ndjson'));
    expect(rejects.map((r) => `${r.key}:${r.stage}:${r.issues[0]!.code}`)).toEqual(['002:validate:format', '003:load:match-invalid']);
  });

  it('source keys sharing a match value: loaded by the run with a warning, and the dry run says the same', async () => {
    const dir = copyTree('test/fixtures/gate', 'care-etl-gate-collide-');
    const mapping = join(dir, 'mapping.yaml');
    // 001 (1985) and 003 (1990) share "19"; 003 no longer has two identifiers.
    writeFileSync(mapping, readFileSync(mapping, 'utf8').replace('match: identifier.value', 'match: $substring(birthDate, 0, 2)'));

    const dry = await runCliInProcess(['run', mapping, '--dry-run', '--json'], { env: envFor('t-collide') });
    const run = await runCliInProcess(['run', mapping, '--json'], { env: envFor('t-collide') });
    const [dryReport, runReport] = [JSON.parse(dry.stdout) as RunReport, JSON.parse(run.stdout) as RunReport];
    expect(dryReport.mappings.patient).toMatchObject({ written: 3, rejected: 1 });
    expect(runReport.mappings.patient).toMatchObject({ created: 3, rejected: 1 });
    const shared = (r: RunReport) => r.warnings.filter((w) => w.includes('share their match value'));
    expect(shared(runReport)).toEqual([expect.stringMatching(/^patient: 1 key\(s\) share their match value/)]);
    expect(shared(dryReport)).toEqual(shared(runReport));
    expect(await patients('t-collide')).toHaveLength(3);

    const validate = await runCliInProcess(['validate', mapping, '--sample', '10', '--json']);
    const report = JSON.parse(validate.stdout) as ValidateReport;
    expect(report.warnings.filter((w) => w.code === 'match-ambiguous').map((w) => w.message)).toEqual([
      expect.stringMatching(/keys `001` \(patients line 2\) and `003` \(patients line 4\)/),
    ]);
  });
});
