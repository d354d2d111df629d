/**
 * Issue 13 item 4: `--since last` stays at-least-once, but what the previous export delivered (same id and
 * version) inside the overlap window is not delivered again; it is counted instead.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CareClient } from '../../src/api/client.js';
import type { Bundle, Resource } from '../../src/api/types.js';
import { exportObservations, versionFingerprint, type ExportObservationsOptions } from '../../src/export/observation-exporter.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { Ledger, type LedgerScope } from '../../src/state/ledger.js';
import { clientFor, Collect, observation, parseCsv, TENANT } from './helpers.js';

let ledger: Ledger;
let scope: LedgerScope;
beforeEach(() => {
  ledger = Ledger.open(':memory:');
  scope = ledger.scope('http://fake.test', TENANT);
});
afterEach(() => ledger.close());

/** A server whose clock and observations the test sets: one page, stamped with `now`. */
class FakeServer {
  now = Date.UTC(2024, 5, 1, 12);
  readonly obs = new Map<string, Resource>();
  put(id: string, version: number, updatedOffsetMs: number | undefined, value = 1): void {
    const meta =
      updatedOffsetMs === undefined
        ? { versionId: String(version) }
        : { versionId: String(version), lastUpdated: new Date(this.now + updatedOffsetMs).toISOString() };
    this.obs.set(id, observation('p', { id, meta, valueInteger: value }) as Resource);
  }
  client(): CareClient {
    const self = this;
    return {
      async *pages() {
        const bundle: Bundle<Resource> = {
          resourceType: 'Bundle',
          type: 'searchset',
          meta: { lastUpdated: new Date(self.now).toISOString() },
          entry: [...self.obs.values()].map((resource) => ({ resource })),
        } as Bundle<Resource>;
        yield bundle;
      },
    } as unknown as CareClient;
  }
}

async function sinceLast(server: FakeServer, opts: Partial<ExportObservationsOptions> = {}) {
  const out = new Collect();
  const report = await exportObservations({ client: server.client(), scope, output: out, since: 'last', ...opts });
  return { report, ids: parseCsv(out.text).map((r) => `${r.id}@${r.version}`) };
}

describe('--since last remembers what it delivered inside the overlap window', () => {
  it('an immediate repeat returns nothing new and says how many were skipped; a new version is delivered again', async () => {
    const s = new FakeServer();
    s.put('A', 1, -10_000);
    s.put('B', 1, -10_000);
    s.put('C', 1, undefined); // no lastUpdated: always re-read
    s.put('OLD', 1, -3_600_000); // long before the window

    const first = await sinceLast(s);
    expect(first.ids).toEqual(['A@1', 'B@1', 'C@1', 'OLD@1']);
    expect(first.report).toMatchObject({ rows: 4, alreadyDelivered: 0, remembered: 3, since: null });

    s.now += 5_000;
    s.put('B', 2, -3_000, 9); // changed on the server
    const second = await sinceLast(s);
    expect(second.ids).toEqual(['B@2']);
    expect(second.report).toMatchObject({ rows: 1, alreadyDelivered: 2, remembered: 3, undated: 1 });

    s.now += 120_000; // two minutes later: the window moved past A and B
    const third = await sinceLast(s);
    expect(third.ids).toEqual([]);
    expect(third.report).toMatchObject({ rows: 0, alreadyDelivered: 3, remembered: 1 }); // only C (undated) stays remembered

    s.now += 1_000;
    const fourth = await sinceLast(s);
    expect(fourth.ids).toEqual([]);
    expect(fourth.report).toMatchObject({ rows: 0, scanned: 4, alreadyDelivered: 1 });
  });

  it('repeats three times in a row against the sandbox: the whole tenant once, then only what is new', async () => {
    const sb: Sandbox = await startSandbox({ observationsPerPatient: 0, pageSize: 10 });
    const c = clientFor(sb, { retry: false });
    const real = ledger.scope(sb.url, TENANT);
    try {
      sb.addObservations(
        TENANT,
        Array.from({ length: 25 }, (_, i) => observation('p', { id: `n${i}` })),
      );
      const rows: number[] = [];
      const skipped: number[] = [];
      for (let i = 0; i < 3; i++) {
        // An hour of overlap: everything stays inside the window however slow the machine (no timing in the test).
        const r = await exportObservations({ client: c, scope: real, output: new Collect(), since: 'last', overlapMs: 3_600_000 });
        rows.push(r.rows);
        skipped.push(r.alreadyDelivered);
      }
      expect(rows).toEqual([25, 0, 0]);
      expect(skipped).toEqual([0, 25, 25]);
      sb.addObservations(TENANT, [observation('p', { id: 'late' })]);
      const out = new Collect();
      const fourth = await exportObservations({ client: c, scope: real, output: out, since: 'last', overlapMs: 3_600_000 });
      expect(parseCsv(out.text).map((r) => r.id)).toEqual(['late']);
      expect(fourth.alreadyDelivered).toBe(25);
    } finally {
      await c.close();
      await sb.close();
    }
  });

  it('a failed export changes neither the delivered set nor the watermark; what a crashed one staged is dropped', async () => {
    const s = new FakeServer();
    s.put('A', 1, -1_000);
    await sinceLast(s);
    const watermark = scope.getWatermark('export:default');
    s.now += 1_000;
    s.put('B', 1, -500);
    await expect(
      sinceLast(s, {
        finalize: async () => {
          throw new Error('rename failed');
        },
      }),
    ).rejects.toMatchObject({ exitCode: 3 });
    expect(scope.getWatermark('export:default')).toBe(watermark);
    expect(scope.deliveredVersion('export:default', 'B')).toBeUndefined();
    expect((await sinceLast(s)).ids).toEqual(['B@1']);

    // A process killed mid-export leaves staged rows: the next export drops them instead of adopting them.
    scope.stageDelivered('export:default', [{ id: 'GHOST', version: '1|x' }]);
    s.now += 1_000;
    await sinceLast(s);
    expect(scope.deliveredVersion('export:default', 'GHOST')).toBeUndefined();
    expect(scope.deliveredVersion('export:default', 'A')).toBe(versionFingerprint(s.obs.get('A')!));
  });

  it('a filtered or explicit-date export neither reads nor writes the delivered set', async () => {
    const s = new FakeServer();
    s.put('A', 1, -1_000);
    await sinceLast(s);
    const explicit = await exportObservations({ client: s.client(), scope, output: new Collect(), since: '2024-01-01' });
    expect(explicit).toMatchObject({ rows: 1, alreadyDelivered: 0, remembered: 0 });
    expect(scope.deliveredCount('export:default')).toBe(1);
  });

  it('fingerprints a version by versionId + lastUpdated, else by content', () => {
    expect(versionFingerprint({ resourceType: 'Observation', meta: { versionId: '2', lastUpdated: '2024-01-01T00:00:00Z' } })).toBe('2|2024-01-01T00:00:00Z');
    const a = versionFingerprint({ resourceType: 'Observation', id: 'x', valueInteger: 1 });
    expect(a).toMatch(/^sha256:/);
    expect(versionFingerprint({ resourceType: 'Observation', id: 'x', valueInteger: 2 })).not.toBe(a);
    // text the state cannot hold (a NUL failed every `--since last` on PostgreSQL; a megabyte its index): by content
    for (const versionId of ['2\u0000', 'v'.repeat(300)])
      expect(versionFingerprint({ resourceType: 'Observation', id: 'x', meta: { versionId, lastUpdated: '2024-01-01T00:00:00Z' } })).toMatch(/^sha256:/);
  });
});

describe('ledger schema 2', () => {
  it('upgrades a schema-1 state file in place, keeping its watermarks', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'care-etl-ledger-v1-')), 'state.db');
    const l = Ledger.open(file);
    l.scope('http://x.test', TENANT).setWatermark('export:default', '2024-01-01T00:00:00.000Z');
    l.close();
    // What a schema-1 care-etl left: no export_delivered table, user_version 1.
    const raw = new Database(file);
    raw.exec('DROP TABLE export_delivered; DROP TABLE leases'); // leases: schema 3 (the run lease)
    raw.pragma('user_version = 1');
    raw.close();

    const upgraded = Ledger.open(file);
    try {
      const s = upgraded.scope('http://x.test', TENANT);
      expect(s.getWatermark('export:default')).toBe('2024-01-01T00:00:00.000Z');
      expect(s.deliveredCount('export:default')).toBe(0);
      s.stageDelivered('export:default', [{ id: 'a', version: '1|t' }]);
      s.commitDelivered('export:default');
      expect(s.deliveredVersion('export:default', 'a')).toBe('1|t');
    } finally {
      upgraded.close();
    }
    const check = new Database(file, { readonly: true });
    expect(check.pragma('user_version', { simple: true })).toBe(3);
    check.close();
  });
});
