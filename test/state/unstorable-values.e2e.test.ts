/**
 * Values a state cannot hold never fail a run (and with it every run after it): the built CLI on copies of
 * examples/clinic, over HTTP, on a real PostgreSQL state and on the default SQLite one.
 * - a NUL byte in a key cell (PostgreSQL cannot store it: "invalid message format"), or 3,000 bytes of text
 *   (PostgreSQL cannot index it): the row is rejected (`key-invalid`, its line and column) and the rest loads — then
 *   the next run finds them unchanged;
 * - a gateway's `meta.versionId` that is an object (SQLite read it as named parameters) or holds a NUL: the state
 *   leaves the version out and the run loads.
 * Needs `npm run build` and PostgreSQL server binaries (test/helpers/postgres.ts).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunReport } from '../../src/pipeline/run-report.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { copyTree, runCli } from '../helpers/cli.js';
import { startGatewayServer } from '../helpers/gateway-server.js';
import { startPostgres, type PgCluster } from '../helpers/postgres.js';

let sb: Sandbox;
let pg: PgCluster;
beforeAll(async () => {
  [sb, pg] = await Promise.all([startSandbox({ tenants: ['t-nul-key', 't-long-key'], observationsPerPatient: 0 }), startPostgres()]);
});
afterAll(async () => {
  await Promise.all([sb?.close(), pg?.stop()]);
});

const STATE_SECRET = 'e2e-state-secret-0123456789abcdef';

async function run(mapping: string, baseUrl: string, tenant: string, state: string[]): Promise<{ code: number | null; report: RunReport; stderr: string }> {
  const env = {
    CARE_BASE_URL: baseUrl,
    CARE_API_KEY: sb.credentials.apiKey,
    CARE_EMR_ID: sb.credentials.emrId,
    CARE_TENANT_ID: tenant,
    CARE_STATE_SECRET: STATE_SECRET,
  };
  const r = await runCli(['run', mapping, ...state, '--json', '--progress', 'none'], { env, timeoutMs: 60_000 });
  expect(r.stdout, r.stderr).toMatch(/^\{/);
  return { code: r.code, report: JSON.parse(r.stdout) as RunReport, stderr: r.stderr };
}

/** The clinic's 9 bad rows (examples/clinic/README.md): every run of it rejects them, and exits 1. */
const CLINIC_REJECTS = 9;

describe('values a state cannot hold', () => {
  it.each([
    ['a NUL byte', '000\u00002', 'NUL character (U+0000)', 't-nul-key'],
    // incompressible: PostgreSQL refused the index entry ("index row size … exceeds btree maximum")
    ['3,000 bytes of text', randomBytes(2250).toString('base64'), 'is 3,000 bytes long', 't-long-key'],
  ])(
    '%s in a key cell: that row is rejected by line and column, the rest loads on PostgreSQL, twice',
    async (_what, key, message, tenant) => {
      const dir = copyTree('examples/clinic');
      const patients = join(dir, 'data', 'patients.csv');
      const text = readFileSync(patients, 'utf8');
      expect(text).toContain('\n000002,Liam,');
      writeFileSync(patients, text.replace('\n000002,Liam,', `\n${key},Liam,`));
      const state = ['--state', await pg.freshState()];
      const mapping = join(dir, 'mapping.yaml');

      const first = await run(mapping, sb.url, tenant, state);
      expect(first.code, first.stderr).toBe(1);
      // the patient, and the care teams that refer to it
      expect(first.report.totals.rejected).toBeGreaterThan(CLINIC_REJECTS);
      const rejects = readFileSync(join(dir, '.care-etl', 'rejects.ndjson'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { file: string; line: number; issues: { code: string; message: string; columns?: string[] }[] });
      const nul = rejects.filter((r) => r.issues.some((i) => i.code === 'key-invalid'));
      expect(nul).toHaveLength(1);
      expect(nul[0]).toMatchObject({ file: patients, line: 3 });
      expect(nul[0]!.issues[0]).toMatchObject({ columns: ['MRN'] });
      expect(nul[0]!.issues[0]!.message).toContain(message);
      const created = first.report.totals.created;
      expect(created).toBeGreaterThan(0);
      expect(sb.stats().resources[tenant]?.Patient).toBe(first.report.mappings.patient!.created);

      const again = await run(mapping, sb.url, tenant, state);
      expect(again.code, again.stderr).toBe(1);
      expect(again.report.totals).toMatchObject({ created: 0, unchanged: created, rejected: first.report.totals.rejected });
    },
    60_000,
  );

  it.each([
    ['an object, on the SQLite state', { n: 1 }, 'sqlite'],
    ['a NUL character, on PostgreSQL', 'v\u00001', 'postgres'],
    ['a number, on PostgreSQL', 7, 'postgres'],
  ] as const)(
    "a gateway's meta.versionId that is %s: left out of the state, the run loads, the next finds it unchanged",
    async (_what, versionId, kind) => {
      const gw = await startGatewayServer({ versionId });
      try {
        const mapping = join(copyTree('examples/clinic'), 'mapping.yaml');
        const state = kind === 'postgres' ? ['--state', await pg.freshState()] : [];
        const first = await run(mapping, gw.url, 't', state);
        expect(first.code, first.stderr).toBe(1);
        expect(first.report.totals.rejected).toBe(CLINIC_REJECTS);
        expect(first.report.totals.created).toBe(64);
        expect(gw.stored('Patient')).toHaveLength(30);
        const again = await run(mapping, gw.url, 't', state);
        expect(again.code, again.stderr).toBe(1);
        expect(again.report.totals).toMatchObject({ created: 0, unchanged: 64, rejected: CLINIC_REJECTS });
        expect(gw.creates).toBe(64);
      } finally {
        await gw.close();
      }
    },
    60_000,
  );
});
