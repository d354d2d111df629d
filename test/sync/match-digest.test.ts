/**
 * Issue 24 item 5: match values are kept in the state as a digest (HMAC-SHA-256 under CARE_STATE_SECRET, else an
 * unkeyed SHA-256), never in clear; an interrupted create is still found on the server by its digest; a digest
 * made under another secret is never taken for "not stored" (no duplicate). Real HTTP against the sandbox.
 */
import { copyFileSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CareClient } from '../../src/api/client.js';
import { resolveConnection } from '../../src/api/connection.js';
import { CareEtlError } from '../../src/core/issues.js';
import { Secret } from '../../src/core/secret.js';
import { MatchDigest } from '../../src/load/match-digest.js';
import { planPipeline } from '../../src/pipeline/run-pipeline.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { Ledger } from '../../src/state/ledger.js';
import { ROOT } from '../helpers/cli.js';
import { connectionOf, listAll, run, withLedger } from './helpers.js';

const SECRET = 'c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00';
const OTHER_SECRET = 'decafbad'.repeat(8);
const PATIENTS = [
  { MRN: 'M001', FIRST: 'Dulcinea', LAST: 'Quixotely', DOB: '1980-01-02' },
  { MRN: 'M002', FIRST: 'Sancho', LAST: 'Panzabrook', DOB: '1975-11-23' },
  { MRN: 'M003', FIRST: 'Rocinante', LAST: 'Mancharidge', DOB: '1991-06-30' },
];
/** A patient a killed run was creating: its intent is in the state, its create stored on the server. */
const INTERRUPTED = { MRN: 'M009', FIRST: 'Aldonza', LAST: 'Lorenzovale', DOB: '1969-03-14' };

let sb: Sandbox;
beforeAll(async () => {
  sb = await startSandbox({
    tenants: ['t-bytes', 't-bytes-s1', 't-orphan', 't-wrong', 't-wrong-orphan', 't-legacy', 't-changed', 't-pg'],
    observationsPerPatient: 0,
  });
});
afterAll(async () => {
  await sb.close();
});

function clinic(rows: typeof PATIENTS): { dir: string; mapping: string; state: string } {
  const dir = mkdtempSync(join(tmpdir(), 'care-etl-hmac-'));
  copyFileSync(join(ROOT, 'test/fixtures/hmac/name-birthdate-mapping.yaml'), join(dir, 'mapping.yaml'));
  writeFileSync(join(dir, 'patients.csv'), `MRN,FIRST,LAST,DOB\n${rows.map((r) => `${r.MRN},${r.FIRST},${r.LAST},${r.DOB}`).join('\n')}\n`);
  return { dir, mapping: join(dir, 'mapping.yaml'), state: join(dir, '.care-etl', 'state.db') };
}

const env = (secret?: string) => ({ env: secret ? { CARE_STATE_SECRET: secret } : {} });

/** Every byte of the state (database, and its WAL should one be left). */
function stateBytes(state: string): string {
  return [state, `${state}-wal`]
    .filter(existsSync)
    .map((f) => readFileSync(f).toString('latin1'))
    .join('');
}

/** The state a run killed after its create reached the server leaves: the intent, and the resource on the server. */
async function interruptedCreate(state: string, tenant: string, matchValueAsRecorded: string): Promise<string> {
  const ledger = Ledger.open(state);
  try {
    const scope = ledger.scope(sb.url, tenant);
    const runId = scope.beginRun({ mappingFile: 'mapping.yaml', dryRun: false });
    scope.recordIntent({ mapping: 'patient', key: INTERRUPTED.MRN, resourceType: 'Patient', hash: 'h', matchValue: matchValueAsRecorded, runId });
    scope.finishRun(runId, 'failed');
  } finally {
    ledger.close();
  }
  const client = new CareClient(resolveConnection(connectionOf(sb, tenant)), { retry: false });
  try {
    const body = { resourceType: 'Patient', active: true, name: [{ family: INTERRUPTED.LAST, given: [INTERRUPTED.FIRST] }], birthDate: INTERRUPTED.DOB };
    return (await client.create('Patient', body)).id;
  } finally {
    await client.close();
  }
}

const recordedMatch = `${INTERRUPTED.LAST}|${INTERRUPTED.DOB}`;
const digestUnder = (secret: string) => new MatchDigest(new Secret(secret)).of(recordedMatch);

describe('match values in the state', () => {
  it('a name|birthDate rule leaves no family name or birth date in the state file: keyed digests only, never the secret', async () => {
    const c = clinic(PATIENTS);
    const report = await run(sb, 't-bytes', c.mapping, { statePath: c.state, ...env(SECRET) });
    expect(report.exitCode).toBe(0);
    expect(report.totals.created).toBe(3);
    const bytes = stateBytes(c.state);
    for (const p of PATIENTS) {
      expect(bytes).not.toContain(p.LAST);
      expect(bytes).not.toContain(p.DOB);
      expect(bytes).toContain(p.MRN); // keys stay readable: state check, rejects and reports name them
    }
    expect(bytes).not.toContain(SECRET);
    const recorded = withLedger(c.state, sb, 't-bytes', (s) => [...s.entries('patient')].map((e) => e.matchValue));
    expect(recorded).toHaveLength(3);
    for (const v of recorded) expect(v).toMatch(/^h1:[0-9a-f]{8}:[0-9a-f]{64}$/);
  });

  it('without CARE_STATE_SECRET a local state keeps an unkeyed digest, still no name or birth date', async () => {
    const c = clinic(PATIENTS);
    expect((await run(sb, 't-bytes-s1', c.mapping, { statePath: c.state })).exitCode).toBe(0);
    const bytes = stateBytes(c.state);
    for (const p of PATIENTS) expect(bytes).not.toContain(`${p.LAST}|${p.DOB}`);
    for (const p of PATIENTS) expect(bytes).not.toContain(p.LAST);
    const recorded = withLedger(c.state, sb, 't-bytes-s1', (s) => [...s.entries('patient')].map((e) => e.matchValue));
    for (const v of recorded) expect(v).toMatch(/^s1:[0-9a-f]{64}$/);
  });

  it('after a crash, the server copy of a key gone from the export is found by its digest and adopted, not created again', async () => {
    const c = clinic(PATIENTS);
    const id = await interruptedCreate(c.state, 't-orphan', digestUnder(SECRET));
    const report = await run(sb, 't-orphan', c.mapping, { statePath: c.state, ...env(SECRET) });
    expect(report.exitCode).toBe(0);
    const entry = withLedger(c.state, sb, 't-orphan', (s) => s.get('patient', INTERRUPTED.MRN));
    expect(entry).toMatchObject({ status: 'synced', serverId: id });
    expect(await listAll(sb, 't-orphan', 'Patient')).toHaveLength(PATIENTS.length + 1);
  });

  it('the row changed since the crash (a corrected family name): plan and run find the server copy by the recorded digest', async () => {
    const corrected = { ...INTERRUPTED, LAST: 'Lorenzo-Vale' };
    const c = clinic([...PATIENTS, corrected]);
    const id = await interruptedCreate(c.state, 't-changed', digestUnder(SECRET));
    const plan = await planPipeline({ mappingFile: c.mapping, statePath: c.state, ...env(SECRET), connection: connectionOf(sb, 't-changed') });
    expect(plan.plan?.patient?.counts).toMatchObject({ created: PATIENTS.length, updated: 1, adopted: 1 });
    const report = await run(sb, 't-changed', c.mapping, { statePath: c.state, ...env(SECRET) });
    expect(report.exitCode).toBe(0);
    expect(report.mappings.patient).toMatchObject({ created: PATIENTS.length, updated: 1, adopted: 1 });
    expect(withLedger(c.state, sb, 't-changed', (s) => s.get('patient', INTERRUPTED.MRN))).toMatchObject({ status: 'synced', serverId: id });
    const patients = await listAll(sb, 't-changed', 'Patient');
    expect(patients).toHaveLength(PATIENTS.length + 1);
    expect(patients.find((p) => p.id === id)?.name).toEqual([{ family: 'Lorenzo-Vale', given: [INTERRUPTED.FIRST] }]);
  });

  it('a state written before digests (clear match values) keeps working', async () => {
    const c = clinic(PATIENTS);
    const id = await interruptedCreate(c.state, 't-legacy', recordedMatch);
    expect((await run(sb, 't-legacy', c.mapping, { statePath: c.state, ...env(SECRET) })).exitCode).toBe(0);
    expect(withLedger(c.state, sb, 't-legacy', (s) => s.get('patient', INTERRUPTED.MRN))).toMatchObject({ status: 'synced', serverId: id });
  });

  it('another CARE_STATE_SECRET: the interrupted create stays pending, named as such, never created twice; the right secret then adopts it', async () => {
    const c = clinic([...PATIENTS, INTERRUPTED]);
    const id = await interruptedCreate(c.state, 't-wrong', digestUnder(SECRET));
    const wrong = await run(sb, 't-wrong', c.mapping, { statePath: c.state, ...env(OTHER_SECRET) });
    expect(wrong.exitCode).toBe(1);
    expect(wrong.mappings.patient).toMatchObject({ created: PATIENTS.length, rejected: 1 });
    const rejects = readFileSync(join(c.dir, '.care-etl', 'rejects.ndjson'), 'utf8');
    expect(rejects).toContain('state-secret-mismatch');
    expect(rejects).toContain('CARE_STATE_SECRET');
    expect(rejects).not.toContain(OTHER_SECRET);
    expect(withLedger(c.state, sb, 't-wrong', (s) => s.get('patient', INTERRUPTED.MRN)?.status)).toBe('pending');
    expect(await listAll(sb, 't-wrong', 'Patient')).toHaveLength(PATIENTS.length + 1); // no second copy of M009

    // Without any secret (the digest was keyed): the same, never a create.
    expect((await run(sb, 't-wrong', c.mapping, { statePath: c.state })).mappings.patient).toMatchObject({ created: 0, rejected: 1 });
    expect(await listAll(sb, 't-wrong', 'Patient')).toHaveLength(PATIENTS.length + 1);

    const right = await run(sb, 't-wrong', c.mapping, { statePath: c.state, ...env(SECRET) });
    expect(right.exitCode).toBe(0);
    expect(right.mappings.patient).toMatchObject({ created: 0, rejected: 0, adopted: 1 });
    expect(withLedger(c.state, sb, 't-wrong', (s) => s.get('patient', INTERRUPTED.MRN))).toMatchObject({ status: 'synced', serverId: id });
    expect(await listAll(sb, 't-wrong', 'Patient')).toHaveLength(PATIENTS.length + 1);
  });

  it('another CARE_STATE_SECRET, the key gone from the export: the intent stays pending (not closed as never stored), with a warning', async () => {
    const c = clinic(PATIENTS);
    await interruptedCreate(c.state, 't-wrong-orphan', digestUnder(SECRET));
    const report = await run(sb, 't-wrong-orphan', c.mapping, { statePath: c.state, ...env(OTHER_SECRET) });
    expect(report.warnings.join('\n')).toMatch(/1 interrupted create\(s\) .* another CARE_STATE_SECRET/);
    expect(withLedger(c.state, sb, 't-wrong-orphan', (s) => s.get('patient', INTERRUPTED.MRN)?.status)).toBe('pending');
  });

  it('a PostgreSQL state without CARE_STATE_SECRET (or with a short one) is exit 2 before anything is sent', async () => {
    const c = clinic(PATIENTS);
    const before = sb.stats().requests;
    for (const secret of [undefined, 'short']) {
      const err = await run(sb, 't-pg', c.mapping, { statePath: 'postgres://etl:pw-not-shown@127.0.0.1:1/care', ...env(secret) }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CareEtlError);
      const e = err as CareEtlError;
      expect(e.exitCode).toBe(2);
      expect(e.issues.map((i) => i.code)).toEqual(['state-secret-missing']);
      expect(`${e.message} ${e.hint}`).toMatch(/CARE_STATE_SECRET[\s\S]*openssl rand -hex 32/);
      expect(`${e.message} ${e.hint}`).not.toContain('pw-not-shown');
    }
    expect(sb.stats().requests).toBe(before);
  });
});
