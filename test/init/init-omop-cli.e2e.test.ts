import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CareClient } from '../../src/api/client.js';
import { resolveConnection } from '../../src/api/connection.js';
import type { Issue } from '../../src/core/issues.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { copyTree, runCliInProcess } from '../helpers/cli.js';
import { all, checkReferences } from '../mappings/helpers.js';

const TABLES = ['person', 'provider', 'visit_occurrence', 'visit_detail', 'care_site'];

/**
 * The answers a user gives to the TODO markers `init` leaves on an OMOP CDM export: the identifier system of
 * each id column. Any other marker is unexpected and fails the test.
 */
const ANSWERS: [RegExp, string][] = [
  [/^the namespace \(URI\) of person_source_value/, 'urn:test-org:patient-id'],
  [/^the namespace \(URI\) of the CDM person_id/, 'urn:test-org:omop:person_id'],
  [/^the namespace \(URI\) of provider_source_value/, 'urn:test-org:staff-id'],
  [/^the namespace \(URI\) of the CDM provider_id/, 'urn:test-org:omop:provider_id'],
];

function answer(text: string): string {
  const fill = (line: string) =>
    line.replace(/\$TODO\("((?:[^"\\]|\\.)*)"\)/g, (_, ask: string) => {
      const a = ANSWERS.find(([re]) => re.test(ask));
      if (!a) throw new Error(`unexpected TODO: ${ask}`);
      return JSON.stringify(a[1]);
    });
  // YAML comments (the "next steps" header names `$TODO("…")`) are not markers.
  return text
    .split('\n')
    .map((l) => (l.trimStart().startsWith('#') ? l : fill(l)))
    .join('\n');
}

let sb: Sandbox;
beforeAll(async () => {
  sb = await startSandbox({ observationsPerPatient: 0 });
});
afterAll(async () => {
  await sb.close();
});

describe('care-etl init on an OMOP CDM v5.4 export (built CLI), its TODOs answered, then validate and run', () => {
  it('writes person → Patient, provider → Practitioner, one CareTeam per person; answered, it loads with 0 rejects', async () => {
    const dir = copyTree('mappings/omop-cdm/sample', 'care-etl-omop-');
    const init = await runCliInProcess(['init', ...TABLES.flatMap((t) => ['--from', `${t}.csv`]), '--out', 'mapping.yaml'], { cwd: dir });
    expect(init.code, init.stderr).toBe(0);
    expect(init.stdout).toMatch(/patient\s+Patient\s+person_id/);
    expect(init.stdout).toMatch(/practitioner\s+Practitioner\s+provider_id/);
    expect(init.stdout).toMatch(/careteam\s+CareTeam\s+groupBy person_id/);
    expect(init.stdout).toContain('Not mapped: visit_detail.csv (visit_detail) — not a mapping: read as the lookup `visitDetailProviders`');
    expect(init.stdout).toContain('Not mapped: care_site.csv (care_site) — not a mapping: this API has no care site');
    expect(init.stdout).toContain('OMOP CDM tables recognised by their columns (person, provider, visit_occurrence, visit_detail, care_site)');
    const todos = Number(/^(\d+) TODO markers? to resolve/m.exec(init.stdout)?.[1]);
    expect(todos).toBe(4);

    // validate lists exactly those markers (exit 2), each with its question.
    const v = await runCliInProcess(['validate', 'mapping.yaml', '--json'], { cwd: dir });
    expect(v.code).toBe(2);
    const issues = (JSON.parse(v.stdout) as { error: { issues: Issue[] } }).error.issues;
    expect(issues.map((i) => i.code)).toEqual(Array(todos).fill('todo'));
    expect(issues.map((i) => /TODO — (.*)$/.exec(i.message)![1]).every((ask) => ANSWERS.some(([re]) => re.test(ask)))).toBe(true);

    const text = readFileSync(join(dir, 'mapping.yaml'), 'utf8');
    writeFileSync(join(dir, 'mapping.yaml'), answer(text));
    const ok = await runCliInProcess(['validate', 'mapping.yaml', '--sample', '100'], { cwd: dir });
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/careteam\s+60\s+20\s+0/);

    const tenant = sb.credentials.tenants[0]!;
    const env = { CARE_BASE_URL: sb.url, CARE_API_KEY: sb.credentials.apiKey, CARE_EMR_ID: sb.credentials.emrId, CARE_TENANT_ID: tenant };
    const run = await runCliInProcess(['run', 'mapping.yaml', '--json'], { cwd: dir, env });
    expect(run.code, run.stderr).toBe(0);
    const report = (JSON.parse(run.stdout) as { mappings: Record<string, { created: number; rejected: number }> }).mappings;
    expect(report.patient).toMatchObject({ created: 20, rejected: 0 });
    expect(report.practitioner).toMatchObject({ created: 5, rejected: 0 });
    expect(report.careteam).toMatchObject({ created: 20, rejected: 0 });

    // Counted over HTTP: every care team points at a loaded patient and practitioners.
    const client = new CareClient(resolveConnection({ baseUrl: sb.url, apiKey: sb.credentials.apiKey, emrId: sb.credentials.emrId, tenantId: tenant }));
    try {
      const [patients, practitioners, teams] = [await all(client, 'Patient'), await all(client, 'Practitioner'), await all(client, 'CareTeam')];
      expect([patients.length, practitioners.length, teams.length]).toEqual([20, 5, 20]);
      const { participants, dangling } = checkReferences(patients, practitioners, teams);
      expect(dangling).toEqual([]);
      expect(participants).toBe(39); // distinct (person, provider) pairs of visit_occurrence and visit_detail
      expect(patients.every((p) => (p.identifier as { system: string }[])[0]!.system === 'urn:test-org:patient-id')).toBe(true);
    } finally {
      await client.close();
    }
  });
});
