/**
 * Issue 10: the server is the system of record — exactly once without the local ledger. Real HTTP against
 * the sandbox (127.0.0.1, ephemeral port), whose list answers fill absent fields with null (`listNulls: 'all'`)
 * as some servers do. Writes are counted on the server itself (`sb.stats()`, versionIds read back).
 */
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CareClient } from '../../src/api/client.js';
import { resolveConnection } from '../../src/api/connection.js';
import type { Resource } from '../../src/api/types.js';
import { checkState, rebuildState } from '../../src/pipeline/run-pipeline.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { connectionOf, countBy, duplicates, identifierValue, listAll, makeClinic, mrn, npi, patientRow, patientsCsv, run, withLedger } from './helpers.js';

const N = 200;
const M = 10;
let sb: Sandbox;
const TENANTS = ['t-lost', 't-prefilled', 't-dup', 't-state', 't-gone', 't-nocount', 't-perrow'];

beforeAll(async () => {
  sb = await startSandbox({ tenants: TENANTS, observationsPerPatient: 0, listNulls: 'all' });
});
afterAll(async () => {
  await sb.close();
});

/** Requests the sandbox received while `fn` ran, by method-independent status and write count. */
async function counted<T>(fn: () => Promise<T>): Promise<{ result: T; requests: number }> {
  const before = sb.stats().requests;
  const result = await fn();
  return { result, requests: sb.stats().requests - before };
}

const versions = (rs: Resource[]) => countBy(rs, (r) => String(r.meta?.versionId));
const forgetState = (statePath: string) => rmSync(dirname(statePath), { recursive: true, force: true });
const client = (tenant: string) => new CareClient(resolveConnection(connectionOf(sb, tenant)), { retry: false });

describe('a lost state folder', () => {
  const clinic = makeClinic(N, M, 'care-etl-lost-');
  const teams = new Set(clinic.assignments.map((a) => a.mrn)).size;
  const opts = { statePath: clinic.state, rejectsFile: clinic.rejects };

  it('load, delete .care-etl/, run again on unchanged data: 0 creates, 0 updates, everything adopted', async () => {
    const first = await run(sb, 't-lost', clinic.mapping, opts);
    expect(first.exitCode).toBe(0);
    expect(first.totals).toMatchObject({ created: N + M + teams, adopted: 0 });
    // A fresh state: each type was listed once before its first create, and the run said why.
    expect(first.indexes.map((b) => b.resourceType)).toEqual(['Patient', 'Practitioner', 'CareTeam']);
    expect(first.indexes[0]!.reason).toMatch(/state holds no loaded patient/);

    forgetState(clinic.state);
    const { result: again } = await counted(() => run(sb, 't-lost', clinic.mapping, opts));
    expect(again.exitCode).toBe(0);
    expect(again.totals).toMatchObject({ created: 0, updated: 0, unchanged: N + M + teams, adopted: N + M + teams, rejected: 0 });
    expect(again.indexes.map((b) => [b.resourceType, b.resources, b.pages])).toEqual([
      ['Patient', N, 1],
      ['Practitioner', M, 1],
      ['CareTeam', teams, 1],
    ]);
    expect(sb.stats().resources['t-lost']).toMatchObject({ Patient: N, Practitioner: M, CareTeam: teams });
    for (const type of ['Patient', 'Practitioner', 'CareTeam'] as const) {
      expect(Object.fromEntries(versions(await listAll(sb, 't-lost', type)))).toEqual({ 1: type === 'Patient' ? N : type === 'Practitioner' ? M : teams });
    }
    // The rebuilt state is complete: the next run sends nothing but the preflight.
    const third = await counted(() => run(sb, 't-lost', clinic.mapping, opts));
    expect(third.result.totals).toMatchObject({ created: 0, updated: 0, adopted: 0, unchanged: N + M + teams });
    expect(third.requests).toBe(1);
  });

  it('change 5 rows, delete the state again, run: exactly 5 updates and 0 creates', async () => {
    const changed = new Set([4, 50, 51, 120, 199].map(mrn));
    clinic.writePatients(patientsCsv(N, (i) => (changed.has(mrn(i)) ? 1 : 0)));
    forgetState(clinic.state);
    const report = await run(sb, 't-lost', clinic.mapping, opts);
    expect(report.exitCode).toBe(0);
    expect(report.mappings.patient).toMatchObject({ created: 0, updated: 5, unchanged: N - 5, adopted: N, rejected: 0 });
    expect(report.totals).toMatchObject({ created: 0, updated: 5 });
    const patients = await listAll(sb, 't-lost', 'Patient');
    expect(patients).toHaveLength(N);
    expect(
      patients
        .filter((p) => p.meta?.versionId === '2')
        .map(identifierValue)
        .sort(),
    ).toEqual([...changed].sort());
    expect(versions(patients).get('1')).toBe(N - 5);
    expect(duplicates(countBy(patients, identifierValue))).toEqual([]);
  });
});

describe('a tenant already holding the clinic (created by another tool, fewer fields)', () => {
  const clinic = makeClinic(N, M, 'care-etl-prefilled-');
  const opts = { statePath: clinic.state, rejectsFile: clinic.rejects };
  const PRE = 150;

  it('the first run creates none of them and updates each once; a second run writes nothing', async () => {
    const c = client('t-prefilled');
    try {
      for (let i = 1; i <= PRE; i++) {
        const [m, first, last] = patientRow(i);
        await c.create('Patient', {
          resourceType: 'Patient',
          identifier: [{ system: 'urn:sync-test:mrn', value: m }],
          name: [{ family: last, given: [first] }],
        });
      }
      for (let j = 1; j <= M; j++)
        await c.create('Practitioner', { resourceType: 'Practitioner', identifier: [{ system: 'http://hl7.org/fhir/sid/us-npi', value: npi(j) }] });
    } finally {
      await c.close();
    }
    const first = await run(sb, 't-prefilled', clinic.mapping, opts);
    expect(first.exitCode).toBe(0);
    expect(first.mappings.patient).toMatchObject({ created: N - PRE, updated: PRE, adopted: PRE, rejected: 0 });
    expect(first.mappings.practitioner).toMatchObject({ created: 0, updated: M, adopted: M });
    const patients = await listAll(sb, 't-prefilled', 'Patient');
    expect(patients).toHaveLength(N);
    expect(duplicates(countBy(patients, identifierValue))).toEqual([]);
    // Each pre-existing patient got exactly one update (version 2), each new one is at version 1.
    for (const p of patients) expect(p.meta?.versionId, identifierValue(p)).toBe(Number(identifierValue(p)) <= PRE ? '2' : '1');
    expect(Object.fromEntries(versions(await listAll(sb, 't-prefilled', 'Practitioner')))).toEqual({ 2: M });

    const second = await counted(() => run(sb, 't-prefilled', clinic.mapping, opts));
    expect(second.result.totals).toMatchObject({ created: 0, updated: 0, rejected: 0 });
    expect(second.requests).toBe(1);
  });
});

describe('a server already holding two copies of one patient', () => {
  it('that row is rejected naming both ids; the rest loads', async () => {
    const clinic = makeClinic(20, 3, 'care-etl-dup-');
    const c = client('t-dup');
    const ids: string[] = [];
    try {
      for (let k = 0; k < 2; k++)
        ids.push((await c.create('Patient', { resourceType: 'Patient', identifier: [{ system: 'urn:sync-test:mrn', value: mrn(7) }] })).id);
    } finally {
      await c.close();
    }
    const report = await run(sb, 't-dup', clinic.mapping, { statePath: clinic.state, rejectsFile: clinic.rejects });
    expect(report.exitCode).toBe(1);
    expect(report.mappings.patient).toMatchObject({ created: 19, rejected: 1 });
    const { readFileSync } = await import('node:fs');
    const rejects = readFileSync(clinic.rejects, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const dup = rejects.find((r) => r.mapping === 'patient')!;
    expect(dup).toMatchObject({ stage: 'load', key: mrn(7), line: 8 });
    expect(dup.issues[0].code).toBe('duplicate-on-server');
    for (const id of ids) expect(dup.issues[0].message).toContain(`Patient/${id}`);
    // Its care team cannot refer to it; every other one loads.
    expect(rejects.filter((r) => r.mapping === 'careteam').map((r) => r.issues[0].code)).toEqual(['ref-rejected']);
    expect(sb.stats().resources['t-dup']!.Patient).toBe(21);
  });
});

describe('state rebuild and state check', () => {
  const clinic = makeClinic(60, 5, 'care-etl-state-');
  const teams = new Set(clinic.assignments.map((a) => a.mrn)).size;
  const opts = { statePath: clinic.state, rejectsFile: clinic.rejects };
  const inspect = (record: boolean) =>
    (record ? rebuildState : checkState)({ mappingFile: clinic.mapping, env: {}, connection: connectionOf(sb, 't-state'), statePath: clinic.state });

  it('check without a state: everything found by match, nothing in the state; rebuild writes nothing; run after it: 0 writes', async () => {
    expect((await run(sb, 't-state', clinic.mapping, opts)).exitCode).toBe(0);
    forgetState(clinic.state);
    const { result: check, requests: checkRequests } = await counted(() => inspect(false));
    expect(check.state).toEqual({
      patient: {
        sourceKeys: 60,
        inLedger: 0,
        foundOnServer: 60,
        differing: 0,
        foundByMatch: 60,
        notOnServer: 0,
        onlyOnServer: 0,
        syncedButAbsent: 0,
        rejected: 0,
      },
      practitioner: {
        sourceKeys: 5,
        inLedger: 0,
        foundOnServer: 5,
        differing: 0,
        foundByMatch: 5,
        notOnServer: 0,
        onlyOnServer: 0,
        syncedButAbsent: 0,
        rejected: 0,
      },
      careteam: {
        sourceKeys: teams,
        inLedger: 0,
        foundOnServer: teams,
        differing: 0,
        foundByMatch: teams,
        notOnServer: 0,
        onlyOnServer: 0,
        syncedButAbsent: 0,
        rejected: 0,
      },
    });
    expect(check.exitCode).toBe(0);
    expect(checkRequests).toBe(1 + 3); // preflight + one page per type
    withLedger(clinic.state, sb, 't-state', (scope) => expect(scope.counts()).toEqual({ pending: 0, synced: 0, rejected: 0 }));

    const before = sb.stats().byStatus;
    const { result: rebuilt } = await counted(() => inspect(true));
    expect(rebuilt.exitCode).toBe(0);
    expect(sb.stats().resources['t-state']).toMatchObject({ Patient: 60, Practitioner: 5, CareTeam: teams });
    expect(sb.stats().byStatus).toEqual({ ...before, 200: (before[200] ?? 0) + 4 }); // reads only
    withLedger(clinic.state, sb, 't-state', (scope) => expect(scope.counts()).toEqual({ pending: 0, synced: 60 + 5 + teams, rejected: 0 }));

    const after = await counted(() => run(sb, 't-state', clinic.mapping, opts));
    expect(after.result.totals).toMatchObject({ created: 0, updated: 0, adopted: 0, unchanged: 60 + 5 + teams });
    expect(after.requests).toBe(1);
  });

  it('check counts what only the server has, and what the state records but the server lost', async () => {
    const c = client('t-state');
    let extra: string;
    try {
      extra = (await c.create('Patient', { resourceType: 'Patient', identifier: [{ system: 'urn:sync-test:mrn', value: 'not-in-export' }] })).id;
    } finally {
      await c.close();
    }
    const goneId = withLedger(clinic.state, sb, 't-state', (scope) => scope.serverIdOf('patient', mrn(9))!);
    expect(sb.removeResource('t-state', 'Patient', goneId)).toBe(true);
    const check = await inspect(false);
    expect(check.state!.patient).toMatchObject({ sourceKeys: 60, inLedger: 60, foundOnServer: 59, notOnServer: 1, onlyOnServer: 1, syncedButAbsent: 1 });
    expect(check.exitCode).toBe(1);
    expect(extra).toBeTruthy();
  });
});

describe('a resource the state records but the server no longer has', () => {
  it('is created again: on a 404 to its update, and with --reconcile always when unchanged', async () => {
    const clinic = makeClinic(30, 3, 'care-etl-gone-');
    const opts = { statePath: clinic.state, rejectsFile: clinic.rejects };
    expect((await run(sb, 't-gone', clinic.mapping, opts)).exitCode).toBe(0);
    const id = (k: number) => withLedger(clinic.state, sb, 't-gone', (scope) => scope.serverIdOf('patient', mrn(k))!);
    sb.removeResource('t-gone', 'Patient', id(3));
    sb.removeResource('t-gone', 'Patient', id(4));
    // Patient 3 changed: its update answers 404 → looked up, not found → created again.
    clinic.writePatients(patientsCsv(30, (i) => (i === 3 ? 1 : 0)));
    const second = await run(sb, 't-gone', clinic.mapping, opts);
    expect(second.mappings.patient).toMatchObject({ created: 1, updated: 0, unchanged: 29, rejected: 0 });
    // Patient 4 unchanged: the state alone cannot know; --reconcile always checks recorded ids against the server.
    expect((await run(sb, 't-gone', clinic.mapping, opts)).mappings.patient).toMatchObject({ created: 0, unchanged: 30 });
    const third = await run(sb, 't-gone', clinic.mapping, { ...opts, reconcile: 'always' });
    expect(third.mappings.patient).toMatchObject({ created: 1, updated: 0, unchanged: 29, rejected: 0 });
    const perMrn = countBy(await listAll(sb, 't-gone', 'Patient'), identifierValue);
    expect(perMrn.size).toBe(30);
    expect(duplicates(perMrn)).toEqual([]);
  });
});

describe('a server that answers 400 to _count', () => {
  it('is listed without it, and a lost state still means 0 writes', async () => {
    const nc = await startSandbox({ tenants: ['t-nocount'], observationsPerPatient: 0, countParam: 'reject', pageSize: 25 });
    try {
      const clinic = makeClinic(80, 4, 'care-etl-nocount-');
      const opts = { statePath: clinic.state, rejectsFile: clinic.rejects };
      expect((await run(nc, 't-nocount', clinic.mapping, opts)).exitCode).toBe(0);
      forgetState(clinic.state);
      const again = await run(nc, 't-nocount', clinic.mapping, opts);
      expect(again.totals).toMatchObject({ created: 0, updated: 0, rejected: 0 });
      const patients = again.indexes.find((b) => b.resourceType === 'Patient')!;
      expect(patients).toMatchObject({ resources: 80, pages: 4, pageSize: undefined });
    } finally {
      await nc.close();
    }
  });
});

describe('care teams without `match:` (one per assignment row)', () => {
  it('lost state: found again by subject + members, 0 writes', async () => {
    const clinic = makeClinic(40, 5, 'care-etl-perrow-', 'clinic-per-row-mapping.yaml');
    const opts = { statePath: clinic.state, rejectsFile: clinic.rejects };
    expect((await run(sb, 't-perrow', clinic.mapping, opts)).mappings.careteam).toMatchObject({ created: clinic.assignments.length, rejected: 0 });
    forgetState(clinic.state);
    const again = await run(sb, 't-perrow', clinic.mapping, opts);
    expect(again.mappings.careteam).toMatchObject({ created: 0, updated: 0, unchanged: clinic.assignments.length, adopted: clinic.assignments.length });
    expect(sb.stats().resources['t-perrow']!.CareTeam).toBe(clinic.assignments.length);
  });
});
