import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CareClient } from '../../src/api/client.js';
import { connectionFromEnv, resolveConnection } from '../../src/api/connection.js';
import type { RunReport } from '../../src/pipeline/run-report.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { copyTree, runCliInProcess } from '../helpers/cli.js';

/*
 * Issue 14, item 4 / "Done when": `care-etl run --only-rejected` after fixing 2 of the example clinic's 9 rejected
 * rows sends exactly those 2 rows — one selected by file and line (a patient rejected before its key was known),
 * one by key (a care team group) — and nothing else: the other rows are read but neither created nor updated,
 * `onMissing: end` ends nothing, the other 7 rejects stay rejected. A normal run afterwards is unaffected.
 */

const API_KEY = 'e2e-only-rejected-key';
const TENANT = 't-only';
let sb: Sandbox;
let env: Record<string, string>;

beforeAll(async () => {
  sb = await startSandbox({ apiKey: API_KEY, emrId: 'emr-only', tenants: [TENANT] });
  env = { CARE_BASE_URL: sb.url, CARE_API_KEY: API_KEY, CARE_EMR_ID: 'emr-only', CARE_TENANT_ID: TENANT, NO_COLOR: '1' };
});
afterAll(async () => {
  await sb.close();
});

const readNdjson = (file: string) =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { file: string; line?: number; record?: number; stage: string; key?: string; issues: { code: string }[] });

const where = (r: ReturnType<typeof readNdjson>[number]) => `${r.file.split('/').pop()}:${r.line ?? `#${r.record}`}:${r.stage}:${r.issues[0]!.code}`;

/** The `--verbose` request log (method, path, status — never bodies): the writes a run sent. */
const writes = (stderr: string) => {
  const log = [...stderr.matchAll(/^(?:\S+Z )?\[http\] (POST|PUT) \/(\w+)\S* → (\S+)/gm)].map((m) => `${m[1]} /${m[2]} ${m[3]}`);
  return { posts: log.filter((l) => l.startsWith('POST')), puts: log.filter((l) => l.startsWith('PUT')) };
};

/** Writable resources on the server per type (the sandbox also generates Observations for each new patient). */
const onServer = () => {
  const { Patient, Practitioner, CareTeam } = sb.stats().resources[TENANT] ?? {};
  return { Patient, Practitioner, CareTeam };
};

/** Every writable resource's version: an update bumps it. */
async function versions(): Promise<Map<string, string>> {
  const client = new CareClient(resolveConnection(connectionFromEnv(env)), { retry: false });
  const out = new Map<string, string>();
  try {
    for (const type of ['Patient', 'Practitioner', 'CareTeam'] as const) {
      for await (const r of client.list(type, { pageSize: 200 })) out.set(`${type}/${r.id}`, String((r.meta as { versionId?: string } | undefined)?.versionId));
    }
  } finally {
    await client.close();
  }
  return out;
}

const run = async (mapping: string, ...flags: string[]) => {
  const res = await runCliInProcess(['run', mapping, '--json', '--verbose', ...flags], { env });
  const report = JSON.parse(res.stdout) as RunReport;
  return { res, report, ...writes(res.stderr) };
};

describe('care-etl run --only-rejected (built CLI) against the sandbox', () => {
  it('after fixing 2 of the 9 rejected rows, sends exactly those 2; the other 7 stay rejected; a normal run afterwards is unaffected', async () => {
    const dir = copyTree('examples/clinic', 'care-etl-only-rejected-');
    const mapping = join(dir, 'mapping.yaml');
    const rejectsFile = join(dir, '.care-etl', 'rejects.ndjson');

    // 1. The example clinic: 9 rejects.
    const first = await run(mapping);
    expect(first.res.code, first.res.stderr).toBe(1);
    expect(first.report.totals).toMatchObject({ created: 64, rejected: 9 });
    const before = readNdjson(rejectsFile).map(where);
    expect(before).toHaveLength(9);
    expect(before).toContain('patients.csv:34:transform:key-missing');
    expect(before).toContain('assignments.csv:6:transform:date-invalid');

    // 2. Fix 2 of them in the source: a patient whose MRN was missing (no key then: selected by file and line), and
    //    the impossible date of care team 000003's second row (line 49; the group was rejected under its key).
    const patients = join(dir, 'data', 'patients.csv');
    const p = readFileSync(patients, 'utf8').split('\n');
    expect(p[33]).toMatch(/^,Peter,Lund,/);
    p[33] = `000032${p[33]}`;
    writeFileSync(patients, p.join('\n'));
    const assignments = join(dir, 'data', 'assignments.csv');
    const a = readFileSync(assignments, 'utf8').split('\n');
    expect(a[48]).toBe('000003;1245319599;Clinical Psychologist;2025-13-01;');
    a[48] = '000003;1245319599;Clinical Psychologist;2025-12-01;';
    writeFileSync(assignments, a.join('\n'));

    const countsBefore = onServer();
    const versionsBefore = await versions();

    // 3. --only-rejected: exactly 2 creates, no update, nothing ended.
    const only = await run(mapping, '--only-rejected');
    expect(only.res.code, only.res.stderr).toBe(1); // 7 rows are still rejected
    expect(only.posts).toEqual(['POST /Patient 200', 'POST /CareTeam 200']);
    expect(only.puts).toEqual([]);
    expect(onServer()).toEqual({ ...countsBefore, Patient: countsBefore.Patient! + 1, CareTeam: countsBefore.CareTeam! + 1 });
    const versionsAfter = await versions();
    for (const [ref, v] of versionsBefore) expect(versionsAfter.get(ref), `${ref} not updated`).toBe(v);
    expect(versionsAfter.size).toBe(versionsBefore.size + 2);

    expect(only.report.totals).toMatchObject({ read: 90, created: 2, updated: 0, unchanged: 0, adopted: 0, rejected: 7, ended: 0, notSelected: 64 });
    expect(only.report.mappings.patient).toMatchObject({ created: 1, rejected: 4, notSelected: 30 });
    expect(only.report.mappings.careteam).toMatchObject({ created: 1, rejected: 2, notSelected: 28 });
    expect(only.report.selection).toMatchObject({ rejectsFile, rejects: 9, keys: 5, lines: 4, fromState: 0, selected: 9 });
    expect(only.report.warnings.some((w) => /careteam: onMissing: end skipped/.test(w))).toBe(true);

    const after = readNdjson(rejectsFile).map(where);
    // Mappings that do not $ref each other run side by side (patients and practitioners): their rejects interleave.
    expect([...after].sort()).toEqual(
      before.filter((w) => w !== 'patients.csv:34:transform:key-missing' && w !== 'assignments.csv:6:transform:date-invalid').sort(),
    );
    expect(after).toHaveLength(7);
    expect(statSync(rejectsFile).mode & 0o777).toBe(0o600);
    const summary = readFileSync(join(dir, '.care-etl', 'rejects.summary.csv'), 'utf8')
      .trimEnd()
      .split('\r\n');
    expect(summary).toHaveLength(1 + 7);

    // 4. A normal run afterwards: everything is there, nothing to send, nothing ended, the same 7 rejects.
    const normal = await run(mapping);
    expect(normal.res.code, normal.res.stderr).toBe(1);
    expect(normal.posts).toEqual([]);
    expect(normal.puts).toEqual([]);
    expect(normal.report.totals).toMatchObject({ created: 0, updated: 0, unchanged: 66, rejected: 7, ended: 0 });
    expect(normal.report.totals.notSelected).toBeUndefined();
    expect(normal.report.selection).toBeUndefined();
    expect(readNdjson(rejectsFile).map(where).sort()).toEqual([...after].sort());
  });

  it('with no rejects file to read it is a usage error (exit 2) before anything is sent or written', async () => {
    const dir = copyTree('examples/clinic', 'care-etl-only-rejected-none-');
    const requests = sb.stats().requests;
    const res = await runCliInProcess(['run', join(dir, 'mapping.yaml'), '--only-rejected', '--progress', 'none'], { env });
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/--only-rejected: no rejects file at .*rejects\.ndjson/);
    expect(sb.stats().requests).toBe(requests);
    expect(existsSync(join(dir, '.care-etl', 'rejects.summary.csv'))).toBe(false);
    expect(existsSync(join(dir, '.care-etl', 'state.db'))).toBe(false);
  });
});
