/** `care-etl runs` / `runs show`: the run history kept in the state ledger (issue 14 item 2). */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { copyTree, runCli, runCliInProcess } from '../helpers/cli.js';

const KEY = 'runs-history-key-1234';
let sb: Sandbox;
beforeAll(async () => {
  sb = await startSandbox({ apiKey: KEY, emrId: 'emr-runs', tenants: ['t-runs'] });
});
afterAll(async () => {
  await sb.close();
});

interface Listed {
  statePath: string;
  runs: {
    id: number;
    outcome: string;
    baseUrl: string;
    tenantId: string;
    summary: {
      exitCode: number;
      totals: Record<string, number>;
      mappings: Record<string, Record<string, number>>;
      flags: Record<string, unknown>;
      host: string;
      concurrency?: Record<string, unknown>;
    };
  }[];
  exitCode: number;
}

describe('care-etl runs', () => {
  it('lists every run with its counts, outcome and exit code; `runs show N` shows one; no secret is kept', async () => {
    const dir = copyTree('examples/clinic');
    const mapping = join(dir, 'mapping.yaml');
    const env = { CARE_BASE_URL: sb.url, CARE_API_KEY: KEY, CARE_EMR_ID: 'emr-runs', CARE_TENANT_ID: 't-runs' };
    expect((await runCli(['run', mapping], { env })).code).toBe(1);
    expect((await runCliInProcess(['run', mapping, '--max-errors', '3', '--concurrency', '2'], { env })).code).toBe(1);

    const listed = await runCliInProcess(['runs', mapping, '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const history = JSON.parse(listed.stdout) as Listed;
    expect(history.runs.map((r) => [r.id, r.outcome, r.summary.exitCode])).toEqual([
      [2, 'aborted', 1],
      [1, 'completed', 1],
    ]);
    const [second, first] = history.runs;
    expect(first!.summary.totals).toMatchObject({ created: 64, rejected: 9 });
    expect(first!.summary.mappings.patient).toMatchObject({ read: 35, created: 30, rejected: 5 });
    expect(second!.summary.flags).toMatchObject({ maxErrors: 3, concurrency: 2 });
    // the first run discovered its concurrency: what it settled on is kept, as the flags do not say it
    expect(first!.summary.concurrency).toMatchObject({ mode: 'discovered', ceiling: 32 });
    expect(second!.summary.totals.rejected).toBe(3);
    expect(first).toMatchObject({ baseUrl: sb.url, tenantId: 't-runs' });
    expect(typeof first!.summary.host).toBe('string');
    expect(listed.stdout).not.toContain(KEY);

    const text = await runCliInProcess(['runs', mapping]);
    expect(text.stdout).toMatch(/^\s*2\s.*aborted\s+1\b/m);
    expect(text.stdout).toMatch(/^\s*1\s.*completed\s+1\s+64\b/m);

    const shown = await runCliInProcess(['runs', 'show', mapping, '1']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain('outcome   completed, exit 1');
    expect(shown.stdout).toMatch(
      /^ {2}requests {2}settled at \d+ request\(s\) in flight \(discovered from \d+(, where run \d+ settled)?; largest window \d+, ceiling 32/m,
    );
    expect(shown.stdout).toMatch(/patient\s+35\s+30\s+0\s+0\s+0\s+5/);

    const missing = await runCliInProcess(['runs', 'show', mapping, '99', '--json']);
    expect(missing.code).toBe(2);
    expect(JSON.parse(missing.stdout)).toMatchObject({ exitCode: 2, error: { message: expect.stringContaining('No run 99') } });
  }, 60_000);

  it('says there is no state file instead of creating one', async () => {
    const dir = copyTree('examples/clinic');
    const r = await runCliInProcess(['runs', join(dir, 'mapping.yaml')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/No state file/);
  });
});
