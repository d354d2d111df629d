/**
 * Issue 4: a re-run writes only what changed. Real HTTP against the sandbox; requests are counted on the
 * sandbox itself (`sb.stats()`), versions read back from the server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { identifierValue, listAll, makeClinic, mrn, patientsCsv, run } from './helpers.js';

const N = 200; // patients
const M = 12; // practitioners
let sb: Sandbox;

beforeAll(async () => {
  sb = await startSandbox({ tenants: ['t-rerun'], observationsPerPatient: 0 });
});
afterAll(async () => {
  await sb.close();
});

/** Requests the sandbox received while `fn` ran, by status. */
async function counted<T>(fn: () => Promise<T>): Promise<{ result: T; requests: number; byStatus: Record<string, number> }> {
  const before = sb.stats();
  const result = await fn();
  const after = sb.stats();
  const byStatus: Record<string, number> = {};
  for (const [k, v] of Object.entries(after.byStatus)) if (v - (before.byStatus[k] ?? 0)) byStatus[k] = v - (before.byStatus[k] ?? 0);
  return { result, requests: after.requests - before.requests, byStatus };
}

describe('re-running an export', () => {
  const clinic = makeClinic(N, M);
  const teams = new Set(clinic.assignments.map((a) => a.mrn)).size;
  const opts = { statePath: clinic.state, rejectsFile: clinic.rejects, concurrency: 8 };

  it('first run creates everything', async () => {
    const { result: report } = await counted(() => run(sb, 't-rerun', clinic.mapping, opts));
    expect(report.exitCode).toBe(0);
    expect(report.mappings.patient).toMatchObject({ read: N, created: N, rejected: 0 });
    expect(report.mappings.practitioner).toMatchObject({ read: M, created: M, rejected: 0 });
    expect(report.mappings.careteam).toMatchObject({ created: teams, rejected: 0 });
    expect(sb.stats().resources['t-rerun']).toMatchObject({ Patient: N, Practitioner: M, CareTeam: teams });
  });

  it('a second run of the unchanged export sends no create and no update: only the preflight GET', async () => {
    const { result: report, requests, byStatus } = await counted(() => run(sb, 't-rerun', clinic.mapping, opts));
    expect(report.exitCode).toBe(0);
    expect(report.totals).toMatchObject({ created: 0, updated: 0, adopted: 0, rejected: 0, ended: 0, unchanged: N + M + teams });
    expect(requests).toBe(1); // GET /Patient?_count=1 (preflight); nothing else reached the server
    expect(byStatus).toEqual({ 200: 1 });
    expect(sb.stats().resources['t-rerun']).toMatchObject({ Patient: N, Practitioner: M, CareTeam: teams });
    for (const type of ['Patient', 'Practitioner', 'CareTeam'] as const) {
      expect((await listAll(sb, 't-rerun', type)).every((r) => r.meta?.versionId === '1')).toBe(true);
    }
  });

  it('changing 10 patient rows sends exactly 10 updates and nothing else', async () => {
    const changed = new Set([3, 17, 42, 43, 99, 100, 128, 150, 177, 200].map(mrn));
    clinic.writePatients(patientsCsv(N, (i) => (changed.has(mrn(i)) ? 1 : 0)));
    const { result: report, requests, byStatus } = await counted(() => run(sb, 't-rerun', clinic.mapping, opts));
    expect(report.exitCode).toBe(0);
    expect(report.mappings.patient).toMatchObject({ read: N, created: 0, updated: 10, unchanged: N - 10, adopted: 0, rejected: 0 });
    expect(report.mappings.practitioner).toMatchObject({ created: 0, updated: 0, unchanged: M });
    expect(report.mappings.careteam).toMatchObject({ created: 0, updated: 0, unchanged: teams, ended: 0 });
    expect(requests).toBe(1 + 10); // preflight + 10 PUTs
    expect(byStatus).toEqual({ 200: 11 });

    // The server agrees: exactly the 10 changed patients are at version 2, with the new phone number.
    const patients = await listAll(sb, 't-rerun', 'Patient');
    expect(patients).toHaveLength(N);
    const v2 = patients
      .filter((p) => p.meta?.versionId === '2')
      .map(identifierValue)
      .sort();
    expect(v2).toEqual([...changed].sort());
    expect(patients.filter((p) => p.meta?.versionId !== '1' && p.meta?.versionId !== '2')).toEqual([]);
    for (const type of ['Practitioner', 'CareTeam'] as const) {
      expect((await listAll(sb, 't-rerun', type)).every((r) => r.meta?.versionId === '1')).toBe(true);
    }

    // And a third run is quiet again.
    const third = await counted(() => run(sb, 't-rerun', clinic.mapping, opts));
    expect(third.result.totals).toMatchObject({ created: 0, updated: 0, unchanged: N + M + teams });
    expect(third.requests).toBe(1);
  });
});
