/**
 * Issue 14 item 1: `care-etl plan` — what a run would do, against the ledger and the live server, writing
 * nothing. Real HTTP against the in-process sandbox, every request seen by a recording proxy in front of it
 * (so "only GETs" is what the server received); the state file compared byte for byte before and after; and
 * each plan checked against the run that follows it (the plan predicts the run).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Resource } from '../../src/api/types.js';
import { comparableDiff, comparableHash } from '../../src/load/identity.js';
import { openLedgerSnapshot, planDocument, PLAN_CHANGES_EXIT, readOnlyScope, type PlanDocument } from '../../src/pipeline/plan.js';
import { planPipeline, runPipeline } from '../../src/pipeline/run-pipeline.js';
import type { RunReport } from '../../src/pipeline/run-report.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { Ledger } from '../../src/state/ledger.js';
import { acquireLease } from '../../src/state/lease.js';
import { makeClinic, mrn, patientRow, patientsCsv, startRecordingProxy } from '../sync/helpers.js';

const N = 20; // patients
const M = 4; // practitioners
const TENANT = 't-plan';
let sb: Sandbox;
let proxy: Awaited<ReturnType<typeof startRecordingProxy>>;

beforeAll(async () => {
  sb = await startSandbox({ tenants: [TENANT, 't-plan-lock'], observationsPerPatient: 0 });
  proxy = await startRecordingProxy(sb.url);
});
afterAll(async () => {
  await proxy?.close();
  await sb?.close();
});

const connection = (tenantId = TENANT) => ({ baseUrl: proxy.url, apiKey: sb.credentials.apiKey, emrId: sb.credentials.emrId, tenantId });
const sha = (path: string) => (existsSync(path) ? createHash('sha256').update(readFileSync(path)).digest('hex') : 'absent');

/** Runs a plan, returning its document and the methods of every request the server received meanwhile. */
async function plan(
  mappingFile: string,
  statePath: string,
  extra: { reconcile?: 'auto' | 'always' | 'never' } = {},
): Promise<{ doc: PlanDocument; report: RunReport; methods: Set<string> }> {
  const from = proxy.log.length;
  const report = await planPipeline({ mappingFile, env: {}, connection: connection(), statePath, ...extra });
  const methods = new Set(proxy.log.slice(from).map((l) => l.split(' ')[0]!));
  return { doc: planDocument(report), report, methods };
}

const run = (mappingFile: string, statePath: string, rejectsFile: string) =>
  runPipeline({ mappingFile, env: {}, connection: connection(), statePath, rejectsFile });

describe('care-etl plan against the sandbox', () => {
  const clinic = makeClinic(N, M, 'care-etl-plan-');
  const teams = new Set(clinic.assignments.map((a) => a.mrn)).size;

  it('before any run: every key is a create (references to planned creates resolve to placeholders), no state file is created, only GETs', async () => {
    const { doc, report, methods } = await plan(clinic.mapping, clinic.state);
    expect([...methods]).toEqual(['GET']);
    expect(existsSync(clinic.state)).toBe(false);
    expect(report.exitCode).toBe(PLAN_CHANGES_EXIT);
    expect(doc.changes).toBe(true);
    expect(doc.mappings.patient!.counts).toMatchObject({ read: N, created: N, updated: 0, unchanged: 0, adopted: 0, rejected: 0 });
    expect(doc.mappings.practitioner!.counts).toMatchObject({ created: M, rejected: 0 });
    expect(doc.mappings.careteam!.counts).toMatchObject({ created: teams, rejected: 0, ended: 0 });
    const team = doc.mappings.careteam!.creates.find((c) => c.key === mrn(1))!;
    expect((team.resource as { subject: { reference: string } }).subject.reference).toBe(`Patient/plan-${mrn(1)}`);
    expect(sb.stats().resources[TENANT] ?? {}).toEqual({});
  });

  it('on the freshly loaded tenant: no changes (exit 0), only GETs, the state file byte-identical', async () => {
    const first = await run(clinic.mapping, clinic.state, clinic.rejects);
    expect(first.totals).toMatchObject({ created: N + M + teams, rejected: 0 });
    const before = sha(clinic.state);
    const { doc, report, methods } = await plan(clinic.mapping, clinic.state);
    expect([...methods]).toEqual(['GET']);
    expect(sha(clinic.state)).toBe(before);
    expect(report.exitCode).toBe(0);
    expect(doc.changes).toBe(false);
    expect(doc.totals).toMatchObject({ created: 0, updated: 0, ended: 0, adopted: 0, rejected: 0, drifted: 0, unchanged: N + M + teams });
  });

  it('after editing 5 rows: exactly 5 updates, each with its field diff, and nothing else — then the run does exactly that', async () => {
    const edited = [2, 5, 11, 17, 20];
    clinic.writePatients(patientsCsv(N, (i) => (edited.includes(i) ? 1 : 0)));
    const stateBefore = sha(clinic.state);
    const versionsBefore = JSON.stringify(sb.stats().resources);
    const { doc, report, methods } = await plan(clinic.mapping, clinic.state);
    expect([...methods]).toEqual(['GET']);
    expect(sha(clinic.state)).toBe(stateBefore);
    expect(JSON.stringify(sb.stats().resources)).toBe(versionsBefore);
    expect(report.exitCode).toBe(PLAN_CHANGES_EXIT);
    expect(doc.totals).toMatchObject({ created: 0, updated: 5, ended: 0, adopted: 0, rejected: 0, drifted: 0 });
    const p = doc.mappings.patient!;
    expect(p.updates.map((u) => u.key)).toEqual(edited.map(mrn));
    for (const u of p.updates) {
      const i = Number(u.key);
      // The phone is the only column `rev` changes: one field, the server's value → the mapped one.
      expect(u.diff).toEqual([
        { path: '/telecom/0/value', before: `+1${patientRow(i, 0)[5]!.replace(/-/g, '')}`, after: `+1${patientRow(i, 1)[5]!.replace(/-/g, '')}` },
      ]);
      expect(u.serverId).toMatch(/^[A-Za-z0-9.-]+$/);
    }
    expect(p.creates).toEqual([]);
    expect(p.adoptions).toEqual([]);
    expect(p.ends).toEqual([]);
    expect(p.rejects).toEqual([]);
    for (const n of ['practitioner', 'careteam']) expect(doc.mappings[n]!.counts).toMatchObject({ created: 0, updated: 0, ended: 0, adopted: 0, rejected: 0 });

    const applied = await run(clinic.mapping, clinic.state, clinic.rejects);
    expect(applied.totals).toMatchObject({ created: 0, updated: 5, ended: 0, adopted: 0, rejected: 0 });
    const after = await plan(clinic.mapping, clinic.state);
    expect(after.report.exitCode).toBe(0);
  });

  it('with the state deleted on a loaded tenant: adoptions and no creates (exit 0: nothing would be sent), and still no state file', async () => {
    rmSync(clinic.state, { force: true });
    const { doc, report, methods } = await plan(clinic.mapping, clinic.state);
    expect([...methods]).toEqual(['GET']);
    expect(existsSync(clinic.state)).toBe(false);
    expect(doc.totals).toMatchObject({ created: 0, updated: 0, ended: 0, rejected: 0 });
    expect(doc.mappings.patient!.counts).toMatchObject({ adopted: N, unchanged: N });
    expect(doc.mappings.practitioner!.counts).toMatchObject({ adopted: M, unchanged: M });
    expect(doc.mappings.careteam!.counts.adopted).toBe(teams);
    expect(doc.mappings.patient!.adoptions.every((a) => !a.updated)).toBe(true);
    expect(report.exitCode).toBe(0);
    expect(doc.changes).toBe(false);

    const applied = await run(clinic.mapping, clinic.state, clinic.rejects);
    expect(applied.totals).toMatchObject({ created: 0, updated: 0, adopted: doc.totals.adopted });
  });

  it('a care team gone from the export (onMissing: end) and a dropped participant are planned as ends, with their diffs — as the run then ends them', async () => {
    const gone = mrn(3);
    const multi = clinic.assignments.filter((a) => a.mrn === mrn(5)); // i % 3 = 2: three practitioners
    expect(multi.length).toBe(3);
    const rows = clinic.assignments.filter((a) => a.mrn !== gone && a !== multi[2]);
    clinic.writeAssignments(rows);
    const stateBefore = sha(clinic.state);
    const { doc, report, methods } = await plan(clinic.mapping, clinic.state);
    expect([...methods]).toEqual(['GET']);
    expect(sha(clinic.state)).toBe(stateBefore);
    expect(report.exitCode).toBe(PLAN_CHANGES_EXIT);
    const ct = doc.mappings.careteam!;
    expect(ct.counts).toMatchObject({ created: 0, updated: 1, ended: 2, rejected: 0 });
    const whole = ct.ends.find((e) => !e.member)!;
    expect(whole.key).toBe(gone);
    // Its one participant and the team itself get the run's date as end: nothing else changes.
    expect(whole.diff).toEqual([
      { path: '/participant/0/period/end', after: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) },
      { path: '/period', after: { end: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) } },
    ]);
    const member = ct.ends.find((e) => e.member)!;
    expect(member.key).toBe(mrn(5));
    expect(ct.updates[0]).toMatchObject({ key: mrn(5), endedMembers: [member.member] });

    const applied = await run(clinic.mapping, clinic.state, clinic.rejects);
    expect(applied.mappings.careteam).toMatchObject({ updated: 1, ended: 2, created: 0 });
    expect(applied.ended.map((e) => [e.key, e.member]).sort()).toEqual(ct.ends.map((e) => [e.key, e.member]).sort());
  });

  it('--reconcile always: a resource changed on the server behind the state is an update; auto reports it as drift and leaves it', async () => {
    const key = mrn(7);
    const { CareClient } = await import('../../src/api/client.js');
    const { resolveConnection } = await import('../../src/api/connection.js');
    const client = new CareClient(resolveConnection({ baseUrl: sb.url, apiKey: sb.credentials.apiKey, emrId: sb.credentials.emrId, tenantId: TENANT }), {
      retry: false,
    });
    try {
      let target: Resource | undefined;
      for await (const r of client.list('Patient', { pageSize: 1000 })) if ((r.identifier as { value: string }[])[0]!.value === key) target = r;
      const { meta: _meta, ...body } = target!;
      await client.update('Patient', target!.id!, { ...body, gender: 'other' });
    } finally {
      await client.close();
    }
    const auto = await plan(clinic.mapping, clinic.state);
    expect(auto.report.exitCode).toBe(0);
    expect(auto.doc.mappings.patient!.drifted).toEqual([
      { key, serverId: expect.any(String), diff: [{ path: '/gender', before: 'other', after: expect.any(String) }] },
    ]);
    expect(auto.doc.warnings.join('\n')).toMatch(/differ on the server.*--reconcile always/);
    const always = await plan(clinic.mapping, clinic.state, { reconcile: 'always' });
    expect(always.report.exitCode).toBe(PLAN_CHANGES_EXIT);
    expect(always.doc.mappings.patient!.updates.map((u) => [u.key, u.diff.map((d) => d.path)])).toEqual([[key, ['/gender']]]);
    expect(always.doc.mappings.patient!.drifted).toEqual([]);
  });

  it('a state file that never saw this tenant stays byte-identical (the plan reads a copy); during a run it reads what that run committed, no lease needed', async () => {
    const before = sha(clinic.state);
    const other = await planPipeline({ mappingFile: clinic.mapping, env: {}, connection: connection('t-plan-lock'), statePath: clinic.state });
    expect(planDocument(other).totals).toMatchObject({ created: N + M + teams - 1, adopted: 0 }); // one team left the export above
    expect(sha(clinic.state)).toBe(before);

    const ledger = Ledger.open(clinic.state);
    try {
      const scope = ledger.scope(sb.url, 't-plan-lock');
      const lease = await acquireLease(ledger, ledger.scopeIdOf(scope));
      scope.recordIntent({ mapping: 'patient', key: 'in-flight', resourceType: 'Patient', hash: 'h', runId: 1 });
      const snap = await openLedgerSnapshot(clinic.state, { busyTimeoutMs: 50 });
      try {
        expect(snap.ledger.scope(sb.url, 't-plan-lock').get('patient', 'in-flight')?.status).toBe('pending');
      } finally {
        snap.ledger.close();
        snap.dispose();
      }
      lease.release();
    } finally {
      ledger.close();
    }
  });
});

describe('plan building blocks', () => {
  it('comparableDiff ignores what adoption ignores and is empty exactly when the comparable hashes are equal', () => {
    const server = {
      resourceType: 'Patient',
      id: 'x1',
      meta: { versionId: '3' },
      active: true,
      name: [{ family: 'Lee', given: ['Ann'], prefix: null }],
      telecom: [],
      gender: 'female',
    };
    const mapped = { gender: 'female', name: [{ given: ['Ann'], family: 'Lee' }], active: true, resourceType: 'Patient' };
    expect(comparableDiff(server, mapped)).toEqual([]);
    expect(comparableHash(server)).toBe(comparableHash(mapped));
    const changed = { ...mapped, name: [{ given: ['Anne'], family: 'Lee' }], birthDate: '1989-01-03', gender: undefined };
    expect(comparableDiff(server, changed)).toEqual([
      { path: '/birthDate', after: '1989-01-03' },
      { path: '/gender', before: 'female' },
      { path: '/name/0/given/0', before: 'Ann', after: 'Anne' },
    ]);
    expect(comparableHash(server)).not.toBe(comparableHash(changed));
    expect(comparableDiff({ a: { 'b/c': [1] } }, { a: { 'b/c': [1, 2] } })).toEqual([{ path: '/a/b~1c/1', after: 2 }]);
  });

  it('the plan reads the state through a view that refuses every write', () => {
    const ledger = Ledger.open(':memory:');
    try {
      const scope = readOnlyScope(ledger.scope('https://x.example', 't'));
      expect(scope.get('patient', 'k')).toBeUndefined();
      expect(scope.counts('patient')).toMatchObject({ synced: 0 });
      expect(() => scope.recordIntent({ mapping: 'patient', key: 'k', resourceType: 'Patient', hash: 'h', matchValue: 'm', runId: 1 })).toThrow(
        /tried to write the state \(recordIntent\)/,
      );
      expect(() => scope.beginRun({ mappingFile: 'm', dryRun: false })).toThrow(/beginRun/);
      expect(() => scope.markSeen('patient', ['k'], 1)).toThrow(/markSeen/);
    } finally {
      ledger.close();
    }
  });
});
