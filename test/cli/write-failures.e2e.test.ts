/**
 * A full disk or a folder that cannot be written (issue 25, item 5), through the built CLI against a sandbox on
 * 127.0.0.1: a clean message naming the path, exit 3 once something was sent (2 before), never a stack trace or
 * exit 1; what was loaded stays recorded. ENOSPC comes from the test seam CARE_ETL_TEST_ENOSPC (src/core/secure-fs.ts:
 * the rejects file's writes fail; the state file is capped at its size, SQLite's own "database or disk is full");
 * an unwritable folder is a file standing where the folder should be (tests run as root: chmod does not stop them).
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { copyTree, runCliInProcess } from '../helpers/cli.js';

describe.concurrent('a full disk or a folder that cannot be written', () => {
  const KEY = 'sk-settings-disk-0001';
  let sb: Sandbox;
  beforeAll(async () => {
    sb = await startSandbox({ apiKey: KEY, emrId: 'emr', tenants: ['t-full-rejects', 't-full-state', 't-ro', 't-report'] });
  });
  afterAll(() => sb.close());
  const env = (tenant: string, extra: Record<string, string> = {}) => ({
    CARE_BASE_URL: sb.url,
    CARE_API_KEY: KEY,
    CARE_EMR_ID: 'emr',
    CARE_TENANT_ID: tenant,
    ...extra,
  });
  /** Patients the sandbox holds for the tenant (one page is enough for the clinic's 30). */
  async function patientsOnServer(tenant: string): Promise<number> {
    const res = await fetch(`${sb.url}/Patient?_count=1000`, {
      headers: { 'service-subscriptionkey': KEY, 'service-emrid': 'emr', 'service-tenantid': tenant },
    });
    return ((await res.json()) as { entry?: unknown[] }).entry?.length ?? 0;
  }
  const clean = (r: { stderr: string }) => {
    expect(r.stderr).not.toMatch(/looks like a bug|Unexpected error|\n\s+at /);
  };

  it('ENOSPC writing the rejects file: exit 3 naming the file; what was loaded stays recorded (the re-run creates nothing)', async () => {
    const work = copyTree('examples/clinic', 'care-etl-full-');
    try {
      const rejects = join(work, '.care-etl', 'rejects.ndjson');
      const r = await runCliInProcess(['run', 'mapping.yaml', '--progress', 'none'], {
        env: env('t-full-rejects', { CARE_ETL_TEST_ENOSPC: rejects }),
        cwd: work,
      });
      expect(r.code).toBe(3);
      expect(r.stderr).toContain(`cannot write ${rejects}: the disk is full (ENOSPC)`);
      clean(r);
      expect(await patientsOnServer('t-full-rejects')).toBe(30);
      const again = await runCliInProcess(['run', 'mapping.yaml', '--json'], { env: env('t-full-rejects'), cwd: work });
      expect(again.code).toBe(1); // the clinic's own bad rows
      expect(JSON.parse(again.stdout).mappings.patient).toMatchObject({ created: 0, unchanged: 30 });
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });

  it('the state file filling the disk mid-run (SQLite: database or disk is full): exit 3 naming it; the re-run completes without a second copy', async () => {
    const work = copyTree('examples/clinic', 'care-etl-full-');
    try {
      const state = join(work, '.care-etl', 'state.db');
      const r = await runCliInProcess(['run', 'mapping.yaml', '--progress', 'none'], { env: env('t-full-state', { CARE_ETL_TEST_ENOSPC: state }), cwd: work });
      expect(r.code).toBe(3);
      expect(r.stderr).toMatch(new RegExp(`State file ${state.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: .* failed: database or disk is full`));
      expect(r.stderr).toContain('Free some space');
      clean(r);
      const again = await runCliInProcess(['run', 'mapping.yaml', '--progress', 'none'], { env: env('t-full-state'), cwd: work });
      expect(again.code).toBe(1);
      expect(await patientsOnServer('t-full-state')).toBe(30);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });

  it('a state folder that cannot be written (a file where the folder should be): exit 2 before anything is loaded, naming the path', async () => {
    const work = copyTree('examples/clinic', 'care-etl-ro-');
    try {
      writeFileSync(join(work, 'not-a-folder'), '');
      const r = await runCliInProcess(['run', 'mapping.yaml', '--state', 'not-a-folder/state.db'], { env: env('t-ro'), cwd: work });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('not-a-folder/state.db');
      expect(r.stderr).toContain('Choose a folder you can write to');
      clean(r);
      const rejects = await runCliInProcess(['run', 'mapping.yaml', '--rejects', 'not-a-folder/rejects.ndjson'], { env: env('t-ro'), cwd: work });
      expect(rejects.code).toBe(2);
      expect(rejects.stderr).toContain('not-a-folder/rejects.ndjson: a part of the path is a file, not a folder');
      clean(rejects);
      expect(await patientsOnServer('t-ro')).toBe(0);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });

  it('a report that cannot be written after the run: exit 3 naming it, never exit 1 or a stack trace', async () => {
    const work = copyTree('examples/clinic', 'care-etl-ro-');
    try {
      writeFileSync(join(work, 'not-a-folder'), '');
      const r = await runCliInProcess(['run', 'mapping.yaml', '--progress', 'none', '--report', 'not-a-folder/report.html'], {
        env: env('t-report'),
        cwd: work,
      });
      expect(r.code).toBe(3);
      expect(r.stderr).toContain('cannot write not-a-folder/report.html: a part of the path is a file, not a folder');
      clean(r);
      expect(await patientsOnServer('t-report')).toBe(30);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });

  it("ENOSPC writing a dry run's output: exit 3 naming the file, not a silently short file", async () => {
    const work = copyTree('examples/clinic', 'care-etl-full-');
    try {
      const out = join(work, 'out', 'Patient.ndjson');
      const r = await runCliInProcess(['run', 'mapping.yaml', '--dry-run', '--out', 'out', '--progress', 'none'], {
        env: { CARE_ETL_TEST_ENOSPC: out },
        cwd: work,
      });
      expect(r.code).toBe(3);
      expect(r.stderr).toContain(`cannot write ${out}: the disk is full (ENOSPC)`);
      clean(r);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});
