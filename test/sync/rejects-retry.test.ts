/**
 * Issue 4: rows rejected in one run are retried by the next run once fixed — and nothing else is touched.
 * Covers rejects before loading (transform), rejects by the server (a definitive 4xx) and transient errors
 * that exhausted their retries (the row must not be lost: it stays retriable).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { copyTree } from '../helpers/cli.js';
import { countBy, duplicates, identifierValue, listAll, makePatients, mrn, patientRow, patientsCsv, run, withLedger } from './helpers.js';

let sb: Sandbox;
beforeAll(async () => {
  // 4 KiB bodies at most: a row with an absurdly long name is refused by the server (413), not by the pipeline.
  sb = await startSandbox({ tenants: ['t-example', 't-413', 't-429'], observationsPerPatient: 0, maxBodyBytes: 4096 });
});
afterAll(async () => {
  await sb.close();
});

/** Requests the sandbox received while `fn` ran. */
async function requestsDuring<T>(fn: () => Promise<T>): Promise<{ result: T; requests: number }> {
  const before = sb.stats().requests;
  const result = await fn();
  return { result, requests: sb.stats().requests - before };
}

function editLine(file: string, line: number, edit: (l: string) => string): void {
  const lines = readFileSync(file, 'utf8').split('\n');
  lines[line - 1] = edit(lines[line - 1]!);
  writeFileSync(file, lines.join('\n'));
}

describe('fixing rejected rows of the example clinic', () => {
  const dir = copyTree('examples/clinic', 'care-etl-sync-example-');
  const mapping = join(dir, 'mapping.yaml');

  it('first run: the example loads with its deliberate rejects', async () => {
    const report = await run(sb, 't-example', mapping);
    expect(report.mappings.patient).toMatchObject({ created: 30, rejected: 5 });
    expect(report.mappings.practitioner).toMatchObject({ created: 6, rejected: 1 });
    expect(report.mappings.careteam).toMatchObject({ created: 28, rejected: 3 });
    // patients.csv:36 repeats key 000005: rejected as a duplicate, never a second create.
    const perMrn = countBy(await listAll(sb, 't-example', 'Patient'), identifierValue);
    expect(perMrn.get('000005')).toBe(1);
    expect(duplicates(perMrn)).toEqual([]);
  });

  it('fixing patient 000031 (invalid birth date) → next run: exactly that create, plus its dependent care team', async () => {
    const file = join(dir, 'data', 'patients.csv');
    expect(readFileSync(file, 'utf8').split('\n')[32]).toMatch(/^000031,.*02\/30\/1985/);
    editLine(file, 33, (l) => l.replace('02/30/1985', '02/28/1985'));
    const { result: report, requests } = await requestsDuring(() => run(sb, 't-example', mapping));
    expect(report.mappings.patient).toMatchObject({ created: 1, updated: 0, unchanged: 30, adopted: 0, rejected: 4 });
    expect(report.mappings.practitioner).toMatchObject({ created: 0, updated: 0, unchanged: 6, rejected: 1 });
    // assignments.csv:47 (000031) was rejected as `ref-rejected`; now its patient exists.
    expect(report.mappings.careteam).toMatchObject({ created: 1, updated: 0, unchanged: 28, adopted: 0, rejected: 2, ended: 0 });
    // preflight + POST Patient + POST CareTeam, each type listed once first: the keys are unknown to the state,
    // so the server is asked whether they exist already (--reconcile auto); each type listed again after its creates
    // (--verify-after-load auto: copies made by another writer)
    expect(requests).toBe(1 + 2 + 2 + 2);

    const patients = await listAll(sb, 't-example', 'Patient');
    const p31 = patients.filter((p) => identifierValue(p) === '000031');
    expect(p31).toHaveLength(1);
    const teams = await listAll(sb, 't-example', 'CareTeam');
    expect(teams.filter((t) => (t.subject as { reference: string }).reference === `Patient/${p31[0]!.id}`)).toHaveLength(1);
    expect(teams).toHaveLength(29);
    expect(teams.filter((t) => t.meta?.versionId !== '1')).toEqual([]);
  });

  it('fixing a care-team row (invalid start date) → next run: exactly that care team', async () => {
    const file = join(dir, 'data', 'assignments.csv');
    expect(readFileSync(file, 'utf8').split('\n')[48]).toBe('000003;1245319599;Clinical Psychologist;2025-13-01;');
    editLine(file, 49, (l) => l.replace('2025-13-01', '2025-12-01'));
    const { result: report, requests } = await requestsDuring(() => run(sb, 't-example', mapping));
    expect(report.mappings.patient).toMatchObject({ created: 0, updated: 0, unchanged: 31, rejected: 4 });
    expect(report.mappings.careteam).toMatchObject({ created: 1, updated: 0, unchanged: 29, rejected: 1 });
    expect(requests).toBe(1 + 1 + 1 + 1); // preflight + one CareTeam listing (key unknown to the state) + POST + the listing after it
    expect(await listAll(sb, 't-example', 'CareTeam')).toHaveLength(30);
  });
});

describe('rows refused by the server', () => {
  it('a definitive 4xx at load is rejected, and created by the next run once the row is fixed', async () => {
    const fx = makePatients(20);
    const long = 'X'.repeat(5000);
    const rows = (fixed: boolean) =>
      patientsCsv(20).replace(new RegExp(`^${mrn(7)},([^,]*),[^,]*,`, 'm'), (_m, first: string) => `${mrn(7)},${first},${fixed ? 'Short' : long},`);
    fx.writePatients(rows(false));
    const first = await run(sb, 't-413', fx.mapping, { statePath: fx.state, rejectsFile: join(fx.dir, 'rejects.ndjson') });
    expect(first.mappings.patient).toMatchObject({ created: 19, rejected: 1 });
    const rejects = readFileSync(join(fx.dir, 'rejects.ndjson'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(rejects).toHaveLength(1);
    expect(rejects[0]).toMatchObject({ stage: 'load', key: mrn(7) });
    expect(rejects[0].issues[0].code).toBe('http-413');
    withLedger(fx.state, sb, 't-413', (scope) => {
      expect(scope.get('patient', mrn(7))).toMatchObject({ status: 'rejected' });
      expect(scope.get('patient', mrn(7))!.serverId).toBeUndefined();
    });

    // Unfixed, it is tried again (and refused again); nothing else is sent.
    const { result: again, requests: r2 } = await requestsDuring(() =>
      run(sb, 't-413', fx.mapping, { statePath: fx.state, rejectsFile: join(fx.dir, 'rejects.ndjson') }),
    );
    expect(again.mappings.patient).toMatchObject({ created: 0, unchanged: 19, rejected: 1 });
    expect(r2).toBe(1 + 1 + 1); // preflight + one Patient listing (a key the state never saw stored) + POST

    fx.writePatients(rows(true));
    const { result: fixed, requests: r3 } = await requestsDuring(() =>
      run(sb, 't-413', fx.mapping, { statePath: fx.state, rejectsFile: join(fx.dir, 'rejects.ndjson') }),
    );
    expect(fixed.mappings.patient).toMatchObject({ created: 1, updated: 0, unchanged: 19, rejected: 0 });
    expect(r3).toBe(1 + 1 + 1 + 1); // … + the listing after the create (--verify-after-load auto)
    const perMrn = countBy(await listAll(sb, 't-413', 'Patient'), identifierValue);
    expect(perMrn.size).toBe(20);
    expect(duplicates(perMrn)).toEqual([]);
  });

  it('transient errors that exhausted their retries (429) do not lose the row: the next run creates exactly those', async () => {
    const N = 12;
    const fx = makePatients(N);
    const opts = { statePath: fx.state, rejectsFile: join(fx.dir, 'rejects.ndjson'), concurrency: 1 };
    // 2 requests/s and a single attempt per request: most creates are refused with 429 and not retried.
    sb.setFaults({ rateLimitPerSecond: 2 });
    let first;
    try {
      first = await run(sb, 't-429', fx.mapping, { ...opts, retry: { attempts: 1 } });
    } finally {
      sb.setFaults(undefined);
    }
    const c = first.mappings.patient;
    expect(c.rejected).toBeGreaterThan(0);
    expect(c.created + c.rejected).toBe(N);
    const rejects = readFileSync(opts.rejectsFile, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(rejects.every((r) => r.stage === 'load' && r.issues[0].code === 'http-429')).toBe(true);
    expect((await listAll(sb, 't-429', 'Patient')).length).toBe(c.created);

    const { result: second, requests } = await requestsDuring(() => run(sb, 't-429', fx.mapping, opts));
    expect(second.mappings.patient).toMatchObject({ created: c.rejected, updated: 0, adopted: 0, unchanged: c.created, rejected: 0 });
    expect(requests).toBe(1 + 1 + c.rejected + 1); // preflight + one Patient listing + the creates + the listing after them
    const perMrn = countBy(await listAll(sb, 't-429', 'Patient'), identifierValue);
    expect(perMrn.size).toBe(N);
    expect(duplicates(perMrn)).toEqual([]);
    for (let i = 1; i <= N; i++) expect(perMrn.get(patientRow(i)[0]!)).toBe(1);

    // Same for updates: changed rows whose update ran out of attempts are updated by the next run.
    const changed = new Set([2, 4, 6, 8, 10, 12].map(mrn));
    fx.writePatients(patientsCsv(N, (i) => (changed.has(mrn(i)) ? 1 : 0)));
    sb.setFaults({ rateLimitPerSecond: 2 });
    let third;
    try {
      third = await run(sb, 't-429', fx.mapping, { ...opts, retry: { attempts: 1 } });
    } finally {
      sb.setFaults(undefined);
    }
    const u = third.mappings.patient;
    expect(u.rejected).toBeGreaterThan(0);
    expect(u.updated + u.rejected).toBe(changed.size);
    const fourth = await requestsDuring(() => run(sb, 't-429', fx.mapping, opts));
    expect(fourth.result.mappings.patient).toMatchObject({ created: 0, updated: u.rejected, unchanged: N - u.rejected, rejected: 0 });
    expect(fourth.requests).toBe(1 + u.rejected);
    const patients = await listAll(sb, 't-429', 'Patient');
    expect(patients).toHaveLength(N);
    for (const p of patients) expect(p.meta?.versionId, identifierValue(p)).toBe(changed.has(identifierValue(p)) ? '2' : '1');
  });
});
