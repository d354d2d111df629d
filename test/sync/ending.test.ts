/**
 * Issue 4: ending practitioner–patient associations on a re-run — by an END date in the source, by a
 * patient's rows disappearing (`onMissing: end` → the care team's `period.end` = run date), and by a single
 * participant row disappearing (the participant is kept, with `period.end` = run date). Checked on the
 * server and in the run's report.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Resource } from '../../src/api/types.js';
import { fnDateTime } from '../../src/mapping/functions.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { identifierValue, listAll, makeClinic, mrn, npi, run, type Assignment } from './helpers.js';

type Participant = { member: { reference: string }; period?: { start?: string; end?: string } };
type Team = Resource & { subject: { reference: string }; period?: { start?: string; end?: string }; participant: Participant[] };

let sb: Sandbox;
beforeAll(async () => {
  // Bodies over 8 KiB are refused (413): a way to make one care team's update fail at the server.
  sb = await startSandbox({ tenants: ['t-end', 't-end-refused', 't-end-guard'], observationsPerPatient: 0, maxBodyBytes: 8192 });
});
afterAll(async () => {
  await sb.close();
});

const A = (p: number, j: number, end?: string): Assignment => ({ mrn: mrn(p), npi: npi(j), role: 'Psychiatrist', start: `2025-0${j}-0${p}`, end });

describe('ending associations', () => {
  const clinic = makeClinic(6, 4);
  const opts = { statePath: clinic.state, rejectsFile: clinic.rejects };
  const first: Assignment[] = [A(1, 1), A(1, 2), A(2, 1), A(2, 3), A(3, 2), A(4, 3), A(4, 4), A(5, 4), A(6, 1)];
  const day1 = new Date('2026-01-10T08:00:00.000Z');
  const day2 = new Date('2026-02-01T09:30:00.000Z');

  /** Server state, by MRN of the subject and NPI of the members. */
  async function serverTeams(): Promise<Map<string, { team: Team; members: Map<string, Participant> }>> {
    const mrnOf = new Map((await listAll(sb, 't-end', 'Patient')).map((p) => [`Patient/${p.id}`, identifierValue(p)]));
    const npiOf = new Map((await listAll(sb, 't-end', 'Practitioner')).map((p) => [`Practitioner/${p.id}`, identifierValue(p)]));
    const out = new Map<string, { team: Team; members: Map<string, Participant> }>();
    for (const t of (await listAll(sb, 't-end', 'CareTeam')) as Team[]) {
      const key = mrnOf.get(t.subject.reference)!;
      expect(out.has(key), `one care team per patient (${key})`).toBe(false);
      out.set(key, { team: t, members: new Map(t.participant.map((p) => [npiOf.get(p.member.reference)!, p])) });
    }
    return out;
  }

  it('first run: six care teams, nothing ended', async () => {
    clinic.writeAssignments(first);
    const report = await run(sb, 't-end', clinic.mapping, { ...opts, now: day1 });
    expect(report.exitCode).toBe(0);
    expect(report.mappings.careteam).toMatchObject({ created: 6, ended: 0 });
    expect(report.ended).toEqual([]);
    const teams = await serverTeams();
    expect(teams.size).toBe(6);
    for (const { team } of teams.values()) {
      expect(team.period?.end).toBeUndefined();
      for (const p of team.participant) expect(p.period?.end).toBeUndefined();
    }
  });

  it('second run: an END date, a patient gone, a participant gone → the right period.end on the server and in the report', async () => {
    const endDate = '2026-01-31';
    const second = [
      A(1, 1),
      A(1, 2, endDate), // (a) the source gives participant 2 of patient 1 an end date
      // (b) patient 2's rows are all gone
      A(3, 2),
      A(4, 3), // (c) patient 4 loses participant 4
      A(5, 4),
      A(6, 1),
    ];
    clinic.writeAssignments(second);
    const before = await serverTeams();
    const report = await run(sb, 't-end', clinic.mapping, { ...opts, now: day2 });
    expect(report.exitCode).toBe(0);
    const runDate = day2.toISOString();
    const teams = await serverTeams();
    expect(teams.size).toBe(6); // nothing deleted, nothing created

    // (a) by end date: participant 2 of patient 1 ends on the source's date; participant 1 stays open.
    const t1 = teams.get(mrn(1))!;
    expect(t1.members.get(npi(2))!.period).toEqual({ start: fnDateTime('2025-02-01', 'YYYY-MM-DD'), end: fnDateTime(endDate, 'YYYY-MM-DD') });
    expect(t1.members.get(npi(1))!.period?.end).toBeUndefined();
    expect(t1.team.period?.end).toBeUndefined();

    // (b) onMissing: end — patient 2's care team ends on the run date, and so do its open participants.
    const t2 = teams.get(mrn(2))!;
    expect(t2.team.period?.end).toBe(runDate);
    expect([...t2.members.keys()].sort()).toEqual([npi(1), npi(3)]);
    for (const p of t2.members.values()) expect(p.period?.end).toBe(runDate);
    expect(t2.team.meta?.versionId).toBe('2');

    // (c) a dropped participant is kept with period.end = run date; the other one stays open.
    const t4 = teams.get(mrn(4))!;
    expect([...t4.members.keys()].sort()).toEqual([npi(3), npi(4)]);
    expect(t4.members.get(npi(4))!.period).toEqual({ start: before.get(mrn(4))!.members.get(npi(4))!.period!.start, end: runDate });
    expect(t4.members.get(npi(3))!.period?.end).toBeUndefined();
    expect(t4.team.period?.end).toBeUndefined();

    // Nothing else was touched.
    for (const k of [3, 5, 6].map(mrn)) expect(teams.get(k)!.team.meta?.versionId).toBe('1');
    expect(report.mappings.patient).toMatchObject({ unchanged: 6, updated: 0, created: 0 });
    expect(report.mappings.practitioner).toMatchObject({ unchanged: 4, updated: 0, created: 0 });
    expect(report.mappings.careteam).toMatchObject({ created: 0, updated: 2, unchanged: 3, rejected: 0 });

    // The report lists the associations this run ended: the whole care team of patient 2, and the two participants.
    const ended = report.ended.map((e) => `${e.mapping}/${e.key}${e.member ? ` ${e.member}` : ''}`).sort();
    const ref = (t: typeof t1, j: number) => t.members.get(npi(j))!.member.reference;
    expect(ended).toEqual([`careteam/${mrn(1)} ${ref(t1, 2)}`, `careteam/${mrn(2)}`, `careteam/${mrn(4)} ${ref(t4, 4)}`].sort());
    expect(report.mappings.careteam.ended).toBe(3);
    expect(report.ended.find((e) => e.key === mrn(2))!.serverId).toBe(t2.team.id);
  });

  it('third run of the same export: nothing is ended again, nothing written', async () => {
    const before = sb.stats().requests;
    const report = await run(sb, 't-end', clinic.mapping, { ...opts, now: new Date('2026-03-01T00:00:00.000Z') });
    expect(report.totals).toMatchObject({ created: 0, updated: 0, ended: 0, rejected: 0 });
    expect(report.ended).toEqual([]);
    expect(sb.stats().requests - before).toBe(1);
    const t2 = (await serverTeams()).get(mrn(2))!;
    expect(t2.team.period?.end).toBe(day2.toISOString()); // still the date of the run that ended it
  });

  it('the same export with the state lost: every care team adopted, none written (ended participants kept as they are)', async () => {
    rmSync(clinic.state, { force: true });
    for (const suffix of ['-wal', '-shm', '-journal']) rmSync(`${clinic.state}${suffix}`, { force: true });
    const versions = async () => new Map((await listAll(sb, 't-end', 'CareTeam')).map((t) => [t.id, t.meta?.versionId]));
    const before = await versions();
    const report = await run(sb, 't-end', clinic.mapping, { ...opts, now: new Date('2026-03-02T00:00:00.000Z') });
    expect(report.mappings.careteam).toMatchObject({ created: 0, updated: 0, ended: 0, rejected: 0 });
    expect(report.mappings.careteam.adopted).toBeGreaterThan(0);
    expect(report.totals).toMatchObject({ created: 0, updated: 0 });
    expect(await versions()).toEqual(before); // not one PUT: every versionId as it was
  });
});

describe('a care team whose last update was refused', () => {
  it('is still ended by onMissing: end when its patient leaves the export', async () => {
    const T = 't-end-refused';
    const clinic = makeClinic(3, 2);
    const opts = { statePath: clinic.state, rejectsFile: clinic.rejects };
    const rows = [A(1, 1), A(2, 1), A(2, 2), A(3, 2)];
    clinic.writeAssignments(rows);
    expect((await run(sb, T, clinic.mapping, { ...opts, now: new Date('2026-01-01T00:00:00.000Z') })).exitCode).toBe(0);

    // Patient 2's care team changes, but its update is refused by the server (413: body too large).
    clinic.writeAssignments([A(1, 1), { ...A(2, 1), role: 'R'.repeat(9000) }, A(2, 2), A(3, 2)]);
    const refused = await run(sb, T, clinic.mapping, { ...opts, now: new Date('2026-01-02T00:00:00.000Z') });
    expect(refused.mappings.careteam).toMatchObject({ updated: 0, rejected: 1, unchanged: 2 });

    // Then patient 2 leaves: its care team must be ended like any other.
    const day3 = new Date('2026-01-03T00:00:00.000Z');
    clinic.writeAssignments([A(1, 1), A(3, 2)]);
    const report = await run(sb, T, clinic.mapping, { ...opts, now: day3 });
    expect(report.exitCode).toBe(0);
    const patient2 = (await listAll(sb, T, 'Patient')).find((p) => identifierValue(p) === mrn(2))!;
    const team2 = ((await listAll(sb, T, 'CareTeam')) as Team[]).find((t) => t.subject.reference === `Patient/${patient2.id}`)!;
    expect(team2.period?.end).toBe(day3.toISOString());
    for (const p of team2.participant) expect(p.period?.end).toBe(day3.toISOString());
    expect(report.ended).toEqual([{ mapping: 'careteam', key: mrn(2), serverId: team2.id }]);
  });
});

describe('the ending guard (issue 22): the allowance from the mapping, the flag winning over it', () => {
  it('refuses above the default 10 %, ends within allowEnding:, and --allow-ending wins', async () => {
    const T = 't-end-guard';
    const clinic = makeClinic(10, 3);
    const opts = { statePath: clinic.state, rejectsFile: clinic.rejects };
    const rows: Assignment[] = Array.from({ length: 10 }, (_, i) => ({ mrn: mrn(i + 1), npi: npi(1 + (i % 3)), role: 'Psychiatrist', start: '2025-01-01' }));
    clinic.writeAssignments(rows);
    expect((await run(sb, T, clinic.mapping, { ...opts, now: new Date('2026-01-01T00:00:00.000Z') })).exitCode).toBe(0);
    const ended = async () => ((await listAll(sb, T, 'CareTeam')) as Team[]).filter((t) => t.period?.end).length;

    // Three of ten patients leave: 10 % of 10 allows one.
    clinic.writeAssignments(rows.slice(3));
    const refused = await run(sb, T, clinic.mapping, opts);
    expect(refused.exitCode).toBe(5);
    expect(refused.endingGuard!.careteam).toEqual({
      wouldEnd: 3,
      loaded: 10,
      rowsRead: 7,
      allowance: '10%',
      from: 'default',
      limit: 1,
      allowed: false,
      reason: 'above-limit',
      message:
        'careteam: would end 3 of 10 care teams (30 %), above the limit of 10% (1; the default) — nothing ended; if the clinic really closed these, re-run with --allow-ending 3 (or 100%)',
    });
    expect(refused.mappings.careteam).toMatchObject({ ended: 0, unchanged: 7 });
    expect(await ended()).toBe(0);

    // The flag wins over the mapping's setting: allowEnding: 3 in the file, --allow-ending 2 on the run.
    const yaml = readFileSync(clinic.mapping, 'utf8');
    writeFileSync(clinic.mapping, yaml.replace('    onMissing: end\n', '    onMissing: end\n    allowEnding: 3\n'));
    const flagged = await run(sb, T, clinic.mapping, { ...opts, allowEnding: '2' });
    expect(flagged.exitCode).toBe(5);
    expect(flagged.endingGuard!.careteam).toMatchObject({ allowance: '2', from: 'flag', limit: 2, allowed: false });
    expect(await ended()).toBe(0);

    const allowed = await run(sb, T, clinic.mapping, opts);
    expect(allowed.exitCode).toBe(0);
    expect(allowed.endingGuard!.careteam).toMatchObject({ wouldEnd: 3, allowance: '3', from: 'mapping', limit: 3, allowed: true });
    expect(allowed.mappings.careteam.ended).toBe(3);
    expect(await ended()).toBe(3);

    // A bad --allow-ending is a usage error before anything is read.
    await expect(run(sb, T, clinic.mapping, { ...opts, allowEnding: '150%' })).rejects.toMatchObject({
      exitCode: 2,
      message: 'Expected `--allow-ending` to be a count ≥ 0 or a percentage like 25%, got `150%`',
    });
  });
});
