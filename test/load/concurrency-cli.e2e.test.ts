/**
 * `care-etl run` (built CLI) and its concurrency: discovered within `--max-concurrency` by default, pinned by
 * `--concurrency`; what it settled on is in the summary and in `--json`. What was really in flight is read from the
 * sandbox's own counters (`stats().capacity.maxInFlight`), never from timings.
 */
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import type { RunReport } from '../../src/pipeline/run-report.js';
import { copyTree, ROOT, runCliInProcess } from '../helpers/cli.js';

let sb: Sandbox | undefined;
const start = async () => {
  sb = await startSandbox({ tenants: ['t-conc'], observationsPerPatient: 0, faults: { latencyMs: 10 } });
  return { CARE_BASE_URL: sb.url, CARE_API_KEY: sb.credentials.apiKey, CARE_EMR_ID: sb.credentials.emrId, CARE_TENANT_ID: 't-conc' };
};
beforeAll(() => {
  if (!existsSync(join(ROOT, 'dist/commands/run.js'))) throw new Error('dist/ is missing: run `npm run build` first');
});
afterEach(async () => {
  await sb?.close();
  sb = undefined;
});

const mapping = () => join(copyTree('examples/clinic'), 'mapping.yaml');

describe('care-etl run: concurrency', () => {
  it('by default discovers it, never above --max-concurrency at the server, and says where it settled', async () => {
    const env = await start();
    const res = await runCliInProcess(['run', mapping(), '--max-concurrency', '2', '--json', '--progress', 'none'], { env });
    expect(res.code, res.stderr).toBe(1); // the example has deliberately bad rows
    const report = JSON.parse(res.stdout) as RunReport;
    expect(report.totals.created).toBe(64);
    expect(report.concurrency).toMatchObject({ mode: 'discovered', ceiling: 2 });
    expect(report.concurrency!.maxInFlight).toBeLessThanOrEqual(2);
    expect(report.concurrency!.settled).toBeGreaterThanOrEqual(1);
    expect(sb!.stats().capacity.maxInFlight).toBeLessThanOrEqual(2);
  });

  it('--concurrency pins it; the summary line says so', async () => {
    const env = await start();
    const res = await runCliInProcess(['run', mapping(), '--concurrency', '3', '--progress', 'none'], { env });
    expect(res.code, res.stderr).toBe(1);
    expect(res.stdout).toMatch(/^Concurrency: pinned at 3 \(--concurrency\); [1-3] request\(s\) in flight at most/m);
    expect(sb!.stats().capacity.maxInFlight).toBeLessThanOrEqual(3);
  });

  it('the summary of a discovered run names the ceiling, and the run it started from', async () => {
    const env = await start();
    const file = mapping();
    const res = await runCliInProcess(['run', file, '--progress', 'none'], { env });
    expect(res.code, res.stderr).toBe(1);
    expect(res.stdout).toMatch(
      /^Concurrency: settled at \d+ request\(s\) in flight \(discovered from 4; largest window \d+, ceiling 32: --max-concurrency\)$/m,
    );
    // The same target again (same state): the discovery starts where the first run settled, and the summary says so.
    const again = await runCliInProcess(['run', file, '--progress', 'none'], { env });
    expect(again.code, again.stderr).toBe(1);
    const settled = /settled at (\d+) request/.exec(res.stdout)![1];
    expect(again.stdout).toMatch(
      new RegExp(`^Concurrency: settled at \\d+ request\\(s\\) in flight \\(discovered from ${settled}, where run 1 settled; `, 'm'),
    );
  });

  it('refuses a --max-concurrency below 1, and --concurrency with --max-concurrency (exit 2)', async () => {
    const bad = await runCliInProcess(['run', mapping(), '--max-concurrency', '0']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('Expected `--max-concurrency` to be an integer ≥ 1, got `0`');
    const both = await runCliInProcess(['run', mapping(), '--concurrency', '2', '--max-concurrency', '8']);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/--max-concurrency=8 cannot also be provided when using --concurrency|cannot also be provided/);
  });
});
