/**
 * Issue 10: `care-etl state check|rebuild` and the match-value warning of `validate`, through the built CLI.
 * The example clinic is loaded into a sandbox on 127.0.0.1, its state deleted, then checked and rebuilt.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunReport } from '../../src/pipeline/run-report.js';
import type { ValidateReport } from '../../src/pipeline/validate-mapping.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { copyTree, runCli, runCliInProcess } from '../helpers/cli.js';

let sb: Sandbox;
beforeAll(async () => {
  sb = await startSandbox({ tenants: ['t-state-cli'], observationsPerPatient: 0 });
});
afterAll(async () => {
  await sb.close();
});

describe('care-etl state (built CLI)', () => {
  const dir = copyTree('examples/clinic', 'care-etl-state-cli-');
  const mapping = join(dir, 'mapping.yaml');
  const env = () => ({ CARE_BASE_URL: sb.url, CARE_API_KEY: sb.credentials.apiKey, CARE_EMR_ID: sb.credentials.emrId, CARE_TENANT_ID: 't-state-cli' });

  it('check after a lost state shows every key found by match; rebuild records them; the next run writes nothing', async () => {
    const load = await runCli(['run', mapping, '--json', '--progress', 'none'], { env: env() });
    expect(load.code, load.stderr).toBe(1); // the example's deliberately bad rows
    const loaded = JSON.parse(load.stdout) as RunReport;
    rmSync(join(dir, '.care-etl', 'state.db'), { force: true });

    const check = await runCliInProcess(['state', 'check', mapping], { env: env() });
    expect(check.code, check.stderr).toBe(1); // the bad rows still cannot be settled
    expect(check.stdout).toMatch(/^mapping\s+source keys\s+in state\s+on server/m);
    expect(check.stderr).toMatch(/\[index\] Patient: 30 resource\(s\) in 1 page\(s\)/);
    expect(check.stdout).not.toContain(sb.credentials.apiKey);

    const rebuild = await runCliInProcess(['state', 'rebuild', mapping, '--json'], { env: env() });
    const report = JSON.parse(rebuild.stdout) as RunReport;
    expect(report.state!.patient).toMatchObject({
      inLedger: 0,
      foundOnServer: loaded.mappings.patient.created,
      foundByMatch: loaded.mappings.patient.created,
      notOnServer: 0,
    });
    expect(report.state!.careteam).toMatchObject({ foundOnServer: loaded.mappings.careteam.created, notOnServer: 0 });

    const again = await runCliInProcess(['run', mapping, '--json', '--progress', 'none'], { env: env() });
    const r = JSON.parse(again.stdout) as RunReport;
    expect(r.totals).toMatchObject({ created: 0, updated: 0, adopted: 0 });
    expect(r.indexes).toEqual([]); // nothing unknown to the rebuilt state: no listing
  });
});

describe('care-etl validate --sample: keys the match rule cannot tell apart', () => {
  it('names both rows', async () => {
    const dir = copyTree('examples/clinic', 'care-etl-validate-match-');
    // Two patients (two MRNs) under one identifier value: the identifier is built from a column both share.
    const mapping = join(dir, 'mapping.yaml');
    const yaml = (await import('node:fs'))
      .readFileSync(mapping, 'utf8')
      .replace('"identifier": [{ "system": "urn:lakeside:mrn", "value": MRN }]', '"identifier": [{ "system": "urn:lakeside:family", "value": LAST }]');
    writeFileSync(mapping, yaml);
    const res = await runCliInProcess(['validate', mapping, '--sample', '100', '--allow-rejects', '--json']);
    expect(res.code, res.stderr).toBe(0); // the example's deliberately bad rows are accepted here
    const report = JSON.parse(res.stdout) as ValidateReport;
    const w = report.warnings.filter((i) => i.code === 'match-ambiguous');
    expect(w.length).toBeGreaterThan(0);
    expect(w[0]!.message).toMatch(/keys `\d+` \(patients line \d+\) and `\d+` \(patients line \d+\) have the same match value/);
    expect(w[0]!.location?.line).toBeGreaterThan(0);
  });
});
