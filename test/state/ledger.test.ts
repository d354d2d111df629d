import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PG_PASSWORD, PG_PASSWORD_ROLE, startPostgres, type PgCluster } from '../helpers/postgres.js';
import { CareEtlError, ExitCode } from '../../src/core/issues.js';
import { Ledger, normalizeBaseUrl } from '../../src/state/ledger.js';
import { SyncBridge } from '../../src/state/postgres/sync-bridge.js';
import { acquireLease } from '../../src/state/lease.js';
import { contentHash, canonicalJson } from '../../src/core/content-hash.js';

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, '..', '..');
const BASE = 'https://api.example.test/fhir';

const BACKENDS = ['sqlite', 'postgres'] as const;
let cluster: Promise<PgCluster> | undefined;
/** One PostgreSQL cluster for this file, started by the first test that needs it. */
const pgCluster = () => (cluster ??= startPostgres());
afterAll(async () => {
  if (cluster) await (await cluster).stop();
});

let dir: string;
const open: Ledger[] = [];
function openLedger(path: string, opts?: Parameters<typeof Ledger.open>[1]): Ledger {
  const l = Ledger.open(path, opts);
  open.push(l);
  return l;
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'care-etl-ledger-'));
});
afterEach(() => {
  for (const l of open.splice(0)) l.close();
  rmSync(dir, { recursive: true, force: true });
});

describe.each(BACKENDS)('Ledger entries (%s)', (backend) => {
  let url = ':memory:';
  beforeEach(async () => {
    if (backend === 'postgres') url = await (await pgCluster()).freshState();
  });
  /** A fresh, empty ledger on this backend (one database per test on PostgreSQL). */
  const fresh = (opts?: Parameters<typeof Ledger.open>[1]) => {
    const l = openLedger(url, opts);
    expect(l.dialect).toBe(backend); // a postgres:// URL is never taken for a file name
    return l;
  };

  it('recordBatch: the synced records, then the intents, of one loader turn in one transaction', () => {
    const s = fresh().scope(BASE, 't1');
    const run = s.beginRun({ mappingFile: 'm.yaml', dryRun: false });
    s.recordIntent({ mapping: 'patients', key: 'A', resourceType: 'Patient', hash: 'hA', matchValue: 'urn:mrn|A', runId: run });
    s.recordIntent({ mapping: 'patients', key: 'B', resourceType: 'Patient', hash: 'hB', matchValue: 'urn:mrn|B', runId: run });
    s.recordBatch(
      [
        { mapping: 'patients', key: 'C', resourceType: 'Patient', hash: 'hC', matchValue: 'urn:mrn|C', runId: run },
        // a key synced and intended in the same turn ends pending: its intent is the later fact
        { mapping: 'patients', key: 'B', resourceType: 'Patient', hash: 'hB2', matchValue: 'urn:mrn|B', runId: run },
      ],
      [
        { mapping: 'patients', key: 'A', resourceType: 'Patient', serverId: 'sA', versionId: '1', hash: 'hA', runId: run },
        { mapping: 'patients', key: 'B', resourceType: 'Patient', serverId: 'sB', versionId: '1', hash: 'hB', runId: run },
      ],
    );
    expect(s.get('patients', 'A')).toMatchObject({ status: 'synced', serverId: 'sA', versionId: '1', hash: 'hA', lastRunId: run });
    expect(s.get('patients', 'B')).toMatchObject({ status: 'pending', hash: 'hB2', matchValue: 'urn:mrn|B' });
    expect(s.get('patients', 'B')!.serverId).toBeUndefined();
    expect(s.get('patients', 'C')).toMatchObject({ status: 'pending', hash: 'hC', matchValue: 'urn:mrn|C', lastRunId: run });
    s.recordBatch([], []); // nothing: no transaction
    expect(s.counts('patients')).toMatchObject({ synced: 1, pending: 2 });
  });

  it('round-trips intent → synced → rejected (keeping the server id)', () => {
    const s = fresh().scope(BASE, 't1');
    const run = s.beginRun({ mappingFile: 'm.yaml', dryRun: false });
    expect(s.get('patients', 'A')).toBeUndefined();

    s.recordIntent({ mapping: 'patients', key: 'A', resourceType: 'Patient', hash: 'h1', matchValue: 'urn:mrn|A', runId: run });
    expect(s.get('patients', 'A')).toMatchObject({
      mapping: 'patients',
      key: 'A',
      resourceType: 'Patient',
      status: 'pending',
      hash: 'h1',
      matchValue: 'urn:mrn|A',
      lastRunId: run,
    });
    expect(s.get('patients', 'A')!.serverId).toBeUndefined();

    s.recordSynced({ mapping: 'patients', key: 'A', resourceType: 'Patient', serverId: 'p-1', versionId: '1', hash: 'h1', runId: run });
    const synced = s.get('patients', 'A')!;
    expect(synced).toMatchObject({ status: 'synced', serverId: 'p-1', versionId: '1', hash: 'h1', matchValue: 'urn:mrn|A' });
    expect(Date.parse(synced.updatedAt)).not.toBeNaN();
    expect(s.serverIdOf('patients', 'A')).toBe('p-1');

    s.recordRejected({ mapping: 'patients', key: 'A', resourceType: 'Patient', runId: run, reason: 'HTTP 422 invalid birthDate' });
    expect(s.get('patients', 'A')).toMatchObject({
      status: 'rejected',
      serverId: 'p-1',
      versionId: '1',
      hash: 'h1',
      reason: 'HTTP 422 invalid birthDate',
    });

    // A later successful update clears the reason.
    s.recordSynced({ mapping: 'patients', key: 'A', resourceType: 'Patient', serverId: 'p-1', versionId: '2', hash: 'h2', runId: run });
    const again = s.get('patients', 'A')!;
    expect(again.status).toBe('synced');
    expect(again.reason).toBeUndefined();
    expect(again.versionId).toBe('2');
  });

  it('records a rejection of a never-created key without a server id', () => {
    const s = fresh().scope(BASE, 't1');
    const run = s.beginRun({ mappingFile: 'm.yaml', dryRun: false });
    s.recordRejected({ mapping: 'patients', key: 'B', resourceType: 'Patient', runId: run });
    expect(s.get('patients', 'B')).toMatchObject({ status: 'rejected', lastRunId: run });
    expect(s.serverIdOf('patients', 'B')).toBeUndefined();
    expect(s.counts()).toEqual({ pending: 0, synced: 0, rejected: 1 });
  });

  it('isolates scopes: same mapping/key under two tenants and two base URLs', () => {
    const l = fresh();
    const a = l.scope(BASE, 'tenant-a');
    const b = l.scope(BASE, 'tenant-b');
    const c = l.scope('https://other.example.test/fhir', 'tenant-a');
    for (const [s, id] of [
      [a, 'a-1'],
      [b, 'b-1'],
    ] as const) {
      const run = s.beginRun({ mappingFile: 'm.yaml', dryRun: false });
      s.recordSynced({ mapping: 'patients', key: 'K', resourceType: 'Patient', serverId: id, hash: 'h', runId: run });
    }
    expect(a.serverIdOf('patients', 'K')).toBe('a-1');
    expect(b.serverIdOf('patients', 'K')).toBe('b-1');
    expect(c.get('patients', 'K')).toBeUndefined();
    expect(a.keyOfServerId('Patient', 'b-1')).toBeUndefined();
    a.setWatermark('observations', '2024-01-01T00:00:00Z');
    expect(b.getWatermark('observations')).toBeUndefined();
    expect(c.counts()).toEqual({ pending: 0, synced: 0, rejected: 0 });
  });

  it('treats base URLs differing only by a trailing slash or host case as one scope', () => {
    expect(normalizeBaseUrl('https://API.example.test/fhir/')).toBe('https://api.example.test/fhir');
    const l = fresh();
    const s1 = l.scope('https://API.example.test/fhir/', 't');
    const run = s1.beginRun({ mappingFile: 'm.yaml', dryRun: false });
    s1.recordSynced({ mapping: 'm', key: 'k', resourceType: 'Patient', serverId: 'x', hash: 'h', runId: run });
    expect(l.scope('https://api.example.test/fhir', 't').serverIdOf('m', 'k')).toBe('x');
  });

  it('re-intending a key clears its old server id (a create makes a new one)', () => {
    const s = fresh().scope(BASE, 't');
    const run = s.beginRun({ mappingFile: 'm.yaml', dryRun: false });
    s.recordSynced({ mapping: 'm', key: 'k', resourceType: 'Patient', serverId: 'gone', hash: 'h', runId: run });
    s.recordIntent({ mapping: 'm', key: 'k', resourceType: 'Patient', hash: 'h2', runId: run });
    expect(s.get('m', 'k')).toMatchObject({ status: 'pending', hash: 'h2' });
    expect(s.serverIdOf('m', 'k')).toBeUndefined();
    expect(s.keyOfServerId('Patient', 'gone')).toBeUndefined();
  });

  it('lists pending entries per mapping and overall, and counts', () => {
    const s = fresh().scope(BASE, 't');
    const run = s.beginRun({ mappingFile: 'm.yaml', dryRun: false });
    s.recordIntent({ mapping: 'patients', key: 'p2', resourceType: 'Patient', hash: 'h', runId: run });
    s.recordIntent({ mapping: 'patients', key: 'p1', resourceType: 'Patient', hash: 'h', runId: run });
    s.recordIntent({ mapping: 'practitioners', key: 'd1', resourceType: 'Practitioner', hash: 'h', runId: run });
    s.recordSynced({ mapping: 'patients', key: 'p3', resourceType: 'Patient', serverId: 'x', hash: 'h', runId: run });
    expect(s.pending('patients').map((e) => e.key)).toEqual(['p1', 'p2']);
    expect(s.pending().map((e) => `${e.mapping}/${e.key}`)).toEqual(['patients/p1', 'patients/p2', 'practitioners/d1']);
    expect(s.counts('patients')).toEqual({ pending: 2, synced: 1, rejected: 0 });
    expect(s.counts()).toEqual({ pending: 3, synced: 1, rejected: 0 });
  });

  it('markSeen / notSeenSince / markEnded drive onMissing: end', () => {
    const s = fresh().scope(BASE, 't');
    const run1 = s.beginRun({ mappingFile: 'm.yaml', dryRun: false });
    for (const k of ['a', 'b', 'c', 'd']) {
      s.recordSynced({ mapping: 'teams', key: k, resourceType: 'CareTeam', serverId: `ct-${k}`, hash: `h-${k}`, runId: run1 });
    }
    s.recordRejected({ mapping: 'teams', key: 'r', resourceType: 'CareTeam', runId: run1 });
    s.finishRun(run1, 'completed', { created: 4 });

    const run2 = s.beginRun({ mappingFile: 'm.yaml', dryRun: false });
    expect(run2).toBeGreaterThan(run1);
    s.markSeen('teams', ['a', 'c', 'not-in-ledger'], run2);
    s.recordSynced({ mapping: 'teams', key: 'b', resourceType: 'CareTeam', serverId: 'ct-b', hash: 'h-b2', runId: run2 });
    expect(s.get('teams', 'a')!.lastRunId).toBe(run2);
    expect(s.get('not-in-ledger', 'x')).toBeUndefined();

    const missing = s.notSeenSince('teams', run2);
    expect(missing.map((e) => e.key)).toEqual(['d']); // rejected 'r' is not synced: not ended
    expect(s.notSeenCount('teams', run2)).toBe(1);
    expect(s.notSeenCount('teams', run1)).toBe(3); // a and c seen by run2, b written by it
    expect(s.notSeenSince('teams', run1, 0)).toEqual([]);
    expect(s.notSeenSince('teams', run1, 2).map((e) => e.key)).toEqual(['a', 'b']); // the first two of three, in key order

    s.markEnded('teams', 'd', '2024-05-01T00:00:00Z', '3', 'h-d-ended');
    expect(s.get('teams', 'd')).toMatchObject({ endedAt: '2024-05-01T00:00:00Z', versionId: '3', hash: 'h-d-ended', status: 'synced' });
    expect(s.notSeenSince('teams', run2)).toEqual([]);

    // markEnded without version/hash keeps the old ones.
    s.markEnded('teams', 'a', '2024-06-01T00:00:00Z');
    expect(s.get('teams', 'a')).toMatchObject({ endedAt: '2024-06-01T00:00:00Z', hash: 'h-a' });

    // The key comes back in the source and is re-synced: no longer ended.
    const run3 = s.beginRun({ mappingFile: 'm.yaml', dryRun: false });
    s.recordSynced({ mapping: 'teams', key: 'd', resourceType: 'CareTeam', serverId: 'ct-d', versionId: '4', hash: 'h-d', runId: run3 });
    expect(s.get('teams', 'd')!.endedAt).toBeUndefined();
  });

  it('marks 50,000 keys in one call (1,000 on PostgreSQL: a round trip per write)', () => {
    const n = backend === 'sqlite' ? 50_000 : 1_000;
    const s = fresh().scope(BASE, 't');
    const run1 = s.beginRun({ mappingFile: 'm.yaml', dryRun: false });
    const keys = Array.from({ length: n }, (_, i) => `MRN-${i}`);
    s.transaction(() => {
      for (const k of keys) s.recordSynced({ mapping: 'patients', key: k, resourceType: 'Patient', serverId: `id-${k}`, hash: 'h', runId: run1 });
    });
    const run2 = s.beginRun({ mappingFile: 'm.yaml', dryRun: false });
    s.markSeen('patients', keys.slice(0, n - 10), run2);
    expect(s.notSeenSince('patients', run2).map((e) => e.key)).toEqual(keys.slice(n - 10).sort());
    // The report lists the first ones in key order and counts all (the run reads no more than it lists).
    expect(s.notSeenSince('patients', run2, 3).map((e) => e.key)).toEqual(
      keys
        .slice(n - 10)
        .sort()
        .slice(0, 3),
    );
    expect(s.notSeenCount('patients', run2)).toBe(10);
    expect(s.notSeenCount('patients', run1)).toBe(n - 10); // the rest was seen by run2
    expect(s.keyOfServerId('Patient', 'id-MRN-567')).toEqual({ mapping: 'patients', key: 'MRN-567' });
  });

  it('records no version it cannot hold, and finds no key for a server id with a NUL (PostgreSQL cannot be asked: it failed the run)', () => {
    const s = fresh().scope(BASE, 't');
    const run = s.beginRun({ mappingFile: 'm.yaml', dryRun: false });
    // a gateway's versionId: an object (SQLite took it for named parameters), a NUL (PostgreSQL refused the write)
    const versions: unknown[] = [{ n: 1 }, 'v\u00001', 7];
    versions.forEach((v, i) =>
      s.recordSynced({ mapping: 'patients', key: `K${i}`, resourceType: 'Patient', serverId: `id-${i}`, versionId: v as string, hash: 'h', runId: run }),
    );
    expect(versions.map((_, i) => s.get('patients', `K${i}`)?.versionId)).toEqual([undefined, undefined, '7']);
    s.markEnded('patients', 'K2', '2024-01-01', { x: 1 } as unknown as string);
    expect(s.get('patients', 'K2')?.versionId).toBe('7');
    expect(s.keyOfServerId('Patient', 'id-0\u0000')).toBeUndefined();
    expect(s.keyOfServerId('Patient', 'id-0')).toEqual({ mapping: 'patients', key: 'K0' });
  });

  it('rolls back a transaction whose function throws, and rethrows its error untouched', () => {
    const s = fresh().scope(BASE, 't');
    const run = s.beginRun({ mappingFile: 'm.yaml', dryRun: false });
    const boom = new Error('boom');
    expect(() =>
      s.transaction(() => {
        s.recordIntent({ mapping: 'm', key: 'k', resourceType: 'Patient', hash: 'h', runId: run });
        throw boom;
      }),
    ).toThrow(boom);
    expect(s.get('m', 'k')).toBeUndefined();
    expect(s.transaction(() => 42)).toBe(42);
  });

  it('keeps watermarks and run history', () => {
    const l = fresh({ now: () => new Date('2024-01-02T03:04:05.000Z') });
    const s = l.scope(BASE, 't');
    expect(s.getWatermark('observations')).toBeUndefined();
    s.setWatermark('observations', '2024-01-01T00:00:00Z');
    s.setWatermark('observations', '2024-02-01T00:00:00Z');
    expect(s.getWatermark('observations')).toBe('2024-02-01T00:00:00Z');

    const r1 = s.beginRun({ mappingFile: 'a.yaml', dryRun: true });
    s.finishRun(r1, 'failed', { errors: 2 });
    const r2 = s.beginRun({ mappingFile: 'b.yaml', dryRun: false });
    expect(s.recentRuns()).toEqual([
      { id: r2, mappingFile: 'b.yaml', dryRun: false, startedAt: '2024-01-02T03:04:05.000Z' },
      {
        id: r1,
        mappingFile: 'a.yaml',
        dryRun: true,
        startedAt: '2024-01-02T03:04:05.000Z',
        finishedAt: '2024-01-02T03:04:05.000Z',
        outcome: 'failed',
        summary: { errors: 2 },
      },
    ]);
  });

  it('keyOfServerId under the run lease (answered from memory for a type with no id recorded before): every recorded id is found', async () => {
    const l = fresh();
    const s = l.scope(BASE, 't1');
    const run = s.beginRun({ mappingFile: 'm.yaml', dryRun: false });
    s.recordSynced({ mapping: 'practitioners', key: 'N1', resourceType: 'Practitioner', serverId: 'p1', hash: 'h', runId: run });
    // A lone surrogate is stored as it comes and read back as U+FFFD: the id read up front is not this one.
    s.recordSynced({ mapping: 'practitioners', key: 'N3', resourceType: 'Practitioner', serverId: 'p\ud800', hash: 'h', runId: run });
    const lease = await acquireLease(l, l.scopeIdOf(s));
    try {
      expect(s.keyOfServerId('Practitioner', 'p1')).toEqual({ mapping: 'practitioners', key: 'N1' }); // recorded before the lease
      expect(s.keyOfServerId('Practitioner', 'p\ud800')).toEqual({ mapping: 'practitioners', key: 'N3' });
      expect(s.keyOfServerId('Practitioner', 'p9')).toBeUndefined(); // read up front with p1: not among them
      s.recordSynced({ mapping: 'practitioners', key: 'N2', resourceType: 'Practitioner', serverId: 'p2', hash: 'h', runId: run });
      expect(s.keyOfServerId('Practitioner', 'p2')).toEqual({ mapping: 'practitioners', key: 'N2' }); // recorded after
      expect(s.keyOfServerId('Patient', 'a1')).toBeUndefined(); // no Patient id recorded yet
      s.recordBatch([], [{ mapping: 'patients', key: 'A', resourceType: 'Patient', serverId: 'a1', hash: 'h', runId: run }]);
      s.recordSynced({ mapping: 'patients', key: 'B', resourceType: 'Patient', serverId: 'b1', hash: 'h', runId: run });
      expect(s.keyOfServerId('Patient', 'a1')).toEqual({ mapping: 'patients', key: 'A' });
      expect(s.keyOfServerId('Patient', 'b1')).toEqual({ mapping: 'patients', key: 'B' });
      expect(s.keyOfServerId('Patient', 'p1')).toBeUndefined();
      // a mapping whose type changed: its rejected entry keeps its server id, now under the new type
      s.recordRejected({ mapping: 'practitioners', key: 'N1', resourceType: 'Patient', runId: run, reason: 'refused' });
      expect(s.keyOfServerId('Patient', 'p1')).toEqual({ mapping: 'practitioners', key: 'N1' });
    } finally {
      lease.release();
    }
  });

  it('keys: every key of the mapping, whatever its status; undefined when there are more than asked for', () => {
    const l = fresh();
    const s = l.scope(BASE, 't1');
    const run = s.beginRun({ mappingFile: 'm.yaml', dryRun: false });
    s.recordSynced({ mapping: 'patients', key: 'A', resourceType: 'Patient', serverId: 'a1', hash: 'h', runId: run });
    s.recordIntent({ mapping: 'patients', key: 'B', resourceType: 'Patient', hash: 'h', runId: run });
    s.recordRejected({ mapping: 'patients', key: 'C', resourceType: 'Patient', runId: run, reason: 'refused' });
    s.recordSynced({ mapping: 'practitioners', key: 'N', resourceType: 'Practitioner', serverId: 'p1', hash: 'h', runId: run });
    expect(s.keys('patients', 3)).toEqual(new Set(['A', 'B', 'C']));
    expect(s.keys('patients', 2)).toBeUndefined();
    expect(s.keys('teams', 0)).toEqual(new Set());
  });

  it('serverIdOf under the run lease (answered from memory): every write of the key is seen, a rolled-back one too', async () => {
    const l = fresh();
    const s = l.scope(BASE, 't1');
    const run = s.beginRun({ mappingFile: 'm.yaml', dryRun: false });
    const synced = (key: string, serverId: string) => ({ mapping: 'patients', key, resourceType: 'Patient', serverId, hash: 'h', runId: run });
    const lease = await acquireLease(l, l.scopeIdOf(s));
    try {
      expect(s.serverIdOf('patients', 'A')).toBeUndefined(); // asked before it is loaded
      s.recordBatch([], [synced('A', 'a1'), synced('B', 'b1')]);
      expect([s.serverIdOf('patients', 'A'), s.serverIdOf('patients', 'B')]).toEqual(['a1', 'b1']);
      // created again (its resource was gone): no id until the create's answer is recorded
      s.recordBatch([{ mapping: 'patients', key: 'A', resourceType: 'Patient', hash: 'h', runId: run }], []);
      expect([s.serverIdOf('patients', 'A'), s.serverIdOf('patients', 'B')]).toEqual([undefined, 'b1']);
      s.recordSynced(synced('A', 'a2'));
      expect(s.serverIdOf('patients', 'A')).toBe('a2');
      s.forget('patients', 'B');
      expect(s.serverIdOf('patients', 'B')).toBeUndefined();
      s.recordIntent({ mapping: 'patients', key: 'B', resourceType: 'Patient', hash: 'h', runId: run });
      s.markSeen('patients', ['A', 'B'], run);
      expect([s.serverIdOf('patients', 'A'), s.serverIdOf('patients', 'B')]).toEqual(['a2', undefined]);
      // A write rolled back: the id read inside it is not kept, nor is the one its write replaced.
      expect(() =>
        s.transaction(() => {
          s.recordSynced(synced('B', 'b2'));
          expect(s.serverIdOf('patients', 'B')).toBe('b2');
          throw new Error('rolled back');
        }),
      ).toThrow('rolled back');
      expect(s.serverIdOf('patients', 'B')).toBeUndefined();
    } finally {
      lease.release();
    }
  });

  it('finds the source key of a server id (for $sourceKey in exports)', () => {
    const s = fresh().scope(BASE, 't');
    const run = s.beginRun({ mappingFile: 'm.yaml', dryRun: false });
    s.recordSynced({ mapping: 'patients', key: 'MRN-9', resourceType: 'Patient', serverId: '42', hash: 'h', runId: run });
    s.recordSynced({ mapping: 'practitioners', key: 'NPI-1', resourceType: 'Practitioner', serverId: '42', hash: 'h', runId: run });
    expect(s.keyOfServerId('Patient', '42')).toEqual({ mapping: 'patients', key: 'MRN-9' });
    expect(s.keyOfServerId('Practitioner', '42')).toEqual({ mapping: 'practitioners', key: 'NPI-1' });
    expect(s.keyOfServerId('CareTeam', '42')).toBeUndefined();
  });
});

describe('Ledger file', () => {
  it('keeps a recorded intent across close and a fresh open', () => {
    const path = join(dir, '.care-etl', 'state.db');
    const l1 = Ledger.open(path);
    const s1 = l1.scope(BASE, 't');
    const run = s1.beginRun({ mappingFile: 'm.yaml', dryRun: false });
    s1.recordIntent({ mapping: 'patients', key: 'A', resourceType: 'Patient', hash: 'h', matchValue: 'urn:mrn|A', runId: run });
    s1.setWatermark('w', 'v');
    l1.close();

    const s2 = openLedger(path).scope(BASE, 't');
    expect(s2.pending()).toMatchObject([{ mapping: 'patients', key: 'A', status: 'pending', matchValue: 'urn:mrn|A', lastRunId: run }]);
    expect(s2.getWatermark('w')).toBe('v');
    expect(s2.beginRun({ mappingFile: 'm.yaml', dryRun: false })).toBeGreaterThan(run);
  });

  it('creates the folder 0700 and the db file (and its WAL) 0600 whatever the umask', () => {
    const path = join(dir, 'nested', '.care-etl', 'state.db');
    let previous: number | undefined;
    try {
      previous = process.umask(0o000);
    } catch {
      // worker threads cannot change the umask: the default one still proves the point
    }
    try {
      const l = openLedger(path);
      const s = l.scope(BASE, 't');
      s.recordIntent({ mapping: 'm', key: 'k', resourceType: 'Patient', hash: 'h', runId: s.beginRun({ mappingFile: 'm', dryRun: false }) });
      expect(statSync(path).mode & 0o777).toBe(0o600);
      expect(statSync(dirname(path)).mode & 0o777).toBe(0o700);
      for (const side of ['-wal', '-shm']) {
        if (existsSync(path + side)) expect(statSync(path + side).mode & 0o777).toBe(0o600);
      }
    } finally {
      if (previous !== undefined) process.umask(previous);
    }
  });

  it('lets a second opener of the same file work on another scope (the run lease, src/state/lease.ts, keeps runs of one scope apart)', () => {
    const path = join(dir, 'state.db');
    openLedger(path).scope(BASE, 't1').recordIntent({ mapping: 'm', key: 'k', resourceType: 'Patient', hash: 'h', runId: 1 });
    const second = openLedger(path, { busyTimeoutMs: 50 }).scope(BASE, 't2');
    second.recordIntent({ mapping: 'm', key: 'k', resourceType: 'Patient', hash: 'h', runId: 2 });
    expect(second.get('m', 'k')?.status).toBe('pending');
  });

  it('turns a file that is not a state db into a CareEtlError with a hint', () => {
    const path = join(dir, 'state.db');
    writeFileSync(path, 'this is not sqlite at all, just some text that is long enough'.repeat(100));
    let err: unknown;
    try {
      openLedger(path);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CareEtlError);
    expect((err as CareEtlError).hint).toMatch(/delete or move the state file with --state/);
  });

  it('refuses a state file from a newer schema', async () => {
    const path = join(dir, 'state.db');
    Ledger.open(path).close();
    const { default: Database } = await import('better-sqlite3');
    const raw = new Database(path);
    raw.pragma('user_version = 99');
    raw.close();
    expect(() => openLedger(path)).toThrow(/newer care-etl/);
  });

  it('reports statement failures after close as CareEtlError', () => {
    const l = Ledger.open(':memory:');
    const s = l.scope(BASE, 't');
    l.close();
    expect(() => s.get('m', 'never-prepared')).toThrow(CareEtlError);
  });

  it('finds the intent pending after the writing process is killed with SIGKILL', async () => {
    // Build the real module (ledger.ts + issues.ts) to plain ESM in a temp folder for the child.
    const out = join(dir, 'build');
    const betterSqlite = pathToFileURL(createRequire(import.meta.url).resolve('better-sqlite3')).href;
    for (const rel of [
      'src/state/ledger.ts',
      'src/state/sql-driver.ts',
      'src/state/wal-checkpointer.ts',
      'src/state/state-location.ts',
      'src/state/postgres/pg-driver.ts',
      'src/state/postgres/dialect.ts',
      'src/state/postgres/sync-bridge.ts',
      'src/core/issues.ts',
      'src/core/secret.ts',
      'src/core/secure-fs.ts',
      'src/core/well-formed.ts',
      'src/core/state-text.ts',
    ]) {
      const js = ts
        .transpileModule(readFileSync(join(repo, rel), 'utf8'), {
          compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
        })
        .outputText.replace(/from 'better-sqlite3'/g, `from '${betterSqlite}'`);
      const dest = join(out, rel.replace(/\.ts$/, '.js'));
      mkdirSync(dirname(dest), { recursive: true });
      writeFileSync(dest, js);
    }
    const moduleUrl = pathToFileURL(join(out, 'src/state/ledger.js')).href;
    const path = join(dir, 'killed', 'state.db');

    const child = spawn(process.execPath, [join(here, 'fixtures', 'intent-then-wait.mjs'), moduleUrl, path], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
    await new Promise<void>((resolve, reject) => {
      let stdout = '';
      child.stdout.on('data', (d: Buffer) => {
        stdout += d.toString();
        if (stdout.includes('written')) resolve();
      });
      child.on('exit', (code) => reject(new Error(`child exited (${code}) before writing: ${stderr}`)));
    });

    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');

    const s = openLedger(path).scope(BASE, 'tenant-a');
    expect(s.pending()).toMatchObject([
      { mapping: 'patients', key: 'MRN-001', status: 'pending', resourceType: 'Patient', hash: 'h1', matchValue: 'urn:clinic:mrn|MRN-001' },
    ]);
    expect(statSync(path).mode & 0o777).toBe(0o600);
  }, 30_000);
});

describe('contentHash', () => {
  const patient = {
    resourceType: 'Patient',
    identifier: [{ system: 'urn:mrn', value: '001' }],
    name: [{ family: 'Doe', given: ['J'] }],
    birthDate: '1970-01-01',
    active: true,
  };

  it('is a sha256 hex digest independent of key order at every depth', () => {
    const reordered = {
      active: true,
      birthDate: '1970-01-01',
      name: [{ given: ['J'], family: 'Doe' }],
      identifier: [{ value: '001', system: 'urn:mrn' }],
      resourceType: 'Patient',
    };
    expect(contentHash(patient)).toMatch(/^[0-9a-f]{64}$/);
    expect(contentHash(reordered)).toBe(contentHash(patient));
  });

  it('ignores the top-level id and meta and undefined members', () => {
    expect(contentHash({ ...patient, id: '123', meta: { versionId: '7', lastUpdated: 'x' } })).toBe(contentHash(patient));
    expect(contentHash({ ...patient, gender: undefined })).toBe(contentHash(patient));
  });

  it('changes when a value changes, including nested ids and array order', () => {
    const h = contentHash(patient);
    expect(contentHash({ ...patient, birthDate: '1970-01-02' })).not.toBe(h);
    expect(contentHash({ ...patient, active: false })).not.toBe(h);
    expect(contentHash({ ...patient, name: [{ family: 'Doe', given: ['J', 'K'] }] })).not.toBe(h);
    expect(contentHash({ ...patient, name: [{ id: 'n1', family: 'Doe', given: ['J'] }] })).not.toBe(h);
    expect(contentHash([1, 2])).not.toBe(contentHash([2, 1]));
    expect(contentHash({ a: '1' })).not.toBe(contentHash({ a: 1 }));
  });

  it('serialises like JSON with sorted keys', () => {
    expect(canonicalJson({ b: [1, undefined, 'x'], a: { d: null, c: new Date(0) }, e: undefined })).toBe(
      '{"a":{"c":"1970-01-01T00:00:00.000Z","d":null},"b":[1,null,"x"]}',
    );
  });
});

describe('Ledger on PostgreSQL', () => {
  let url: string;
  let db: string;
  beforeEach(async () => {
    url = await (await pgCluster()).createDatabase();
    db = new URL(url).pathname.slice(1);
  });

  it('keeps its tables in a schema of its own (default care_etl, or ?schema=), versioned', async () => {
    openLedger(url).scope(BASE, 't').beginRun({ mappingFile: 'm.yaml', dryRun: false });
    openLedger(`${url}?schema=tenant_x`).scope(BASE, 't');
    const pg = await pgCluster();
    const tables = await pg.query(db, "SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema LIKE '%' ORDER BY 1, 2");
    const bySchema = (s: string) => tables.rows.filter((r) => r.table_schema === s).map((r) => r.table_name as string);
    expect(bySchema('care_etl')).toEqual(['entries', 'export_delivered', 'leases', 'runs', 'schema_version', 'scopes', 'watermarks']);
    expect(bySchema('tenant_x')).toEqual(bySchema('care_etl'));
    expect(bySchema('public')).toEqual([]);
    expect((await pg.query(db, 'SELECT version FROM care_etl.schema_version')).rows).toEqual([{ version: 3 }]);
    expect((await pg.query(db, 'SELECT count(*)::int AS n FROM care_etl.runs')).rows[0].n).toBe(1);
    expect((await pg.query(db, 'SELECT count(*)::int AS n FROM tenant_x.runs')).rows[0].n).toBe(0);
  });

  it('a lookup-only scope (a plan) of a server and tenant the state does not know writes nothing and reads empty', async () => {
    const s = openLedger(url).scope(BASE, 'unknown-tenant', { lookupOnly: true });
    expect(s.get('patients', 'A')).toBeUndefined();
    expect(s.counts()).toEqual({ pending: 0, synced: 0, rejected: 0 });
    expect((await (await pgCluster()).query(db, 'SELECT count(*)::int AS n FROM care_etl.scopes')).rows[0].n).toBe(0);
  });

  it('refuses a state of a newer schema, and a schema holding tables that are not ours', async () => {
    openLedger(url).close();
    const pg = await pgCluster();
    await pg.query(db, 'UPDATE care_etl.schema_version SET version = 99');
    expect(() => Ledger.open(url)).toThrow(/newer care-etl \(schema 99, this version knows 3\)/);
    await pg.query(db, 'CREATE SCHEMA other; CREATE TABLE other.t (x int)');
    expect(() => Ledger.open(`${url}?schema=other`)).toThrow(/not a care-etl state/);
  });

  it('never shows the password: not in the location, not in a failure (wrong password: exit 2 with a hint)', async () => {
    const pg = await pgCluster();
    const good = pg.passwordUrl(db);
    const l = openLedger(good);
    expect(l.path).not.toContain(PG_PASSWORD);
    expect(l.path).toBe(`postgres://${PG_PASSWORD_ROLE}@127.0.0.1:${pg.port}/${db}`);
    const wrong = good.replace(PG_PASSWORD, `${PG_PASSWORD}-wrong`);
    let err: unknown;
    try {
      Ledger.open(wrong);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CareEtlError);
    const e = err as CareEtlError;
    expect(e.exitCode).toBe(ExitCode.config);
    expect(`${e.message} ${e.hint}`).toMatch(/password authentication failed/);
    expect(`${e.message} ${e.hint}`).not.toContain(PG_PASSWORD);
    expect(e.hint).toMatch(/PGPASSWORD or ~\/\.pgpass/);
  });

  it('a server that does not answer is exit 3, naming the state without its password', () => {
    let err: unknown;
    try {
      Ledger.open(`postgres://someone:${PG_PASSWORD}@127.0.0.1:1/db`);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CareEtlError);
    expect((err as CareEtlError).exitCode).toBe(ExitCode.incomplete);
    expect((err as CareEtlError).message).toMatch(/^State postgres:\/\/someone@127\.0\.0\.1:1\/db: opening failed: .*ECONNREFUSED/);
    expect((err as CareEtlError).message).not.toContain(PG_PASSWORD);
  });

  it('reads PGPASSWORD when the URL has no password', async () => {
    const pg = await pgCluster();
    const bare = pg.passwordUrl(db).replace(`:${PG_PASSWORD}@`, '@');
    const saved = process.env.PGPASSWORD;
    process.env.PGPASSWORD = PG_PASSWORD;
    try {
      openLedger(bare).scope(BASE, 't').setWatermark('w', 'v');
      expect(openLedger(bare).scope(BASE, 't').getWatermark('w')).toBe('v');
    } finally {
      if (saved === undefined) delete process.env.PGPASSWORD;
      else process.env.PGPASSWORD = saved;
    }
  });
});

describe('the synchronous bridge to PostgreSQL', () => {
  it('bounds each call (a clear error, the connection closed after), and passes SQLSTATE codes through', async () => {
    const url = await (await pgCluster()).createDatabase();
    const bridge = new SyncBridge(300);
    try {
      bridge.connect({ connectionString: url }, []);
      expect(bridge.query([{ text: 'SELECT $1::int + 1 AS n', values: [41] }], 'adding')[0]!.rows).toEqual([{ n: 42 }]);
      expect(() => bridge.query([{ text: 'SELECT * FROM no_such_table' }], 'reading')).toThrow(expect.objectContaining({ code: '42P01' }));
      expect(() => bridge.query([{ text: 'SELECT pg_sleep(5)' }], 'sleeping')).toThrow(
        /no answer from the database in 300 ms while sleeping; the connection is closed/,
      );
      expect(() => bridge.query([{ text: 'SELECT 1' }], 'again')).toThrow(/closed/);
    } finally {
      bridge.close();
    }
  });
});
