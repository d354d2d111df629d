/**
 * Issue 28 item 3: the loader commits the create intents of one event-loop turn together (`recordBatch`). The
 * guarantee that makes a kill at any point safe must hold for every create: when a POST reaches the server, its
 * key's intent is already committed in the state file. A loopback proxy in front of the sandbox reads the state
 * through its own SQLite connection (committed data only) as each POST /Patient arrives, before forwarding it.
 */
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CareEtlError, ExitCode } from '../../src/core/issues.js';
import { MatchDigest } from '../../src/load/match-digest.js';
import { Ledger } from '../../src/state/ledger.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import { startWatchProxy } from '../helpers/watch-proxy.js';
import { connectionOf, identifierValue, listAll, makePatients, MRN_SYSTEM } from './helpers.js';

const N = 150;
const TENANT = 't-intent-first';
let sb: Sandbox;

beforeAll(async () => {
  sb = await startSandbox({ tenants: [TENANT], observationsPerPatient: 0, faults: { latencyMs: 5 } });
});
afterAll(async () => {
  await sb.close();
});

/** A proxy that, per POST /Patient, looks the key's entry up in the state file and notes what it found (before forwarding it). */
async function startCheckingProxy(statePath: string): Promise<{ url: string; seen: Map<string, string>; close(): Promise<void> }> {
  const digest = new MatchDigest(); // these runs have no CARE_STATE_SECRET: unkeyed digests
  const seen = new Map<string, string>(); // MRN → the entry's status when its POST arrived
  let db: Database.Database | undefined;
  const proxy = await startWatchProxy(sb.url, {
    onRequest(r) {
      if (r.method !== 'POST' || r.path !== '/Patient') return;
      const mrn = identifierValue(JSON.parse(r.body));
      db ??= new Database(statePath, { readonly: true, fileMustExist: true });
      const row = db.prepare('SELECT status FROM entries WHERE match_value = ?').get(digest.of(`${MRN_SYSTEM}|${mrn}`)) as { status: string } | undefined;
      seen.set(mrn, row?.status ?? 'absent');
    },
  });
  return {
    url: proxy.url,
    seen,
    close: async () => {
      db?.close();
      await proxy.close();
    },
  };
}

describe('create intents committed in batches', () => {
  it('every POST reaches the server after its intent is committed — also when the state fills the disk mid-run (no POST for an intent not recorded)', async () => {
    const p = makePatients(N, 'care-etl-intent-first-');
    // Room for some entries only: pages freed by a former tenant's entries, reused until they run out.
    const before = Ledger.open(p.state);
    const other = before.scope('http://127.0.0.1:1', 'gone');
    const keys = Array.from({ length: 60 }, (_, i) => `k${i}`);
    for (const key of keys)
      other.recordIntent({ mapping: 'patient', key, resourceType: 'Patient', hash: 'h'.repeat(64), matchValue: 'm'.repeat(70), runId: 1 });
    for (const key of keys) other.forget('patient', key);
    before.close();
    const proxy = await startCheckingProxy(p.state);
    // The test seam of issue 25 (src/core/secure-fs.ts): the state file cannot grow past its size at open, so
    // the batch of intents that needs a new page fails; its creates must never be sent.
    process.env.CARE_ETL_TEST_ENOSPC = p.state;
    try {
      const outcome = await runPipeline({
        mappingFile: p.mapping,
        env: {},
        connection: { ...connectionOf(sb, TENANT), baseUrl: proxy.url },
        statePath: p.state,
        rejectsFile: `${p.dir}/rejects.ndjson`,
        concurrency: 16,
      }).then(
        (report) => report.exitCode,
        (err: unknown) => (err as CareEtlError).exitCode,
      );
      expect(outcome).toBe(ExitCode.incomplete);
      expect(proxy.seen.size).toBeGreaterThan(0); // the disk filled mid-run, not before the first create
      expect(proxy.seen.size).toBeLessThan(N);
      expect([...proxy.seen].filter(([, status]) => status !== 'pending' && status !== 'synced')).toEqual([]);
      const onServer = await listAll(sb, TENANT, 'Patient');
      expect(onServer).toHaveLength(proxy.seen.size);
    } finally {
      delete process.env.CARE_ETL_TEST_ENOSPC;
      await proxy.close();
    }
  }, 30_000);
});
