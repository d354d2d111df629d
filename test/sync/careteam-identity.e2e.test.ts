/**
 * Issue 10: a CareTeam mapping with no `match:` — one care team per assignment row, as a user following the
 * README writes it — stays exactly-once under server faults, under `kill -9` of the built CLI at several
 * points, and when the state is lost between kills. The default CareTeam identity (subject + members) is what
 * finds a create whose answer was lost. Real HTTP to the sandbox on 127.0.0.1. Needs `npm run build`.
 * The two scenarios run side by side, each on its own sandbox (faults are set per sandbox): most of their time is
 * waiting on the rate limit and the server's latency.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Resource } from '../../src/api/types.js';
import type { RunReport } from '../../src/pipeline/run-report.js';
import { startSandbox, type FaultOptions, type Sandbox } from '../../src/sandbox/server.js';
import { BIN, ROOT } from '../helpers/cli.js';
import { countBy, duplicates, identifierValue, listAll, makeClinic, run, until } from './helpers.js';

/** A sandbox of its own for the scenarios of one `describe` (faults are set per sandbox). */
function useSandbox(tenant: string): { readonly sb: Sandbox } {
  const holder = {} as { sb: Sandbox };
  beforeAll(async () => {
    holder.sb = await startSandbox({ tenants: [tenant], observationsPerPatient: 0 });
  });
  afterAll(async () => {
    await holder.sb?.close();
  });
  return holder;
}

/** One key per care team on the server: `MRN-NPI` read back through the patients and practitioners. */
async function teamKeys(sb: Sandbox, tenant: string): Promise<string[]> {
  const mrnOf = new Map((await listAll(sb, tenant, 'Patient')).map((p) => [`Patient/${p.id}`, identifierValue(p)]));
  const npiOf = new Map((await listAll(sb, tenant, 'Practitioner')).map((p) => [`Practitioner/${p.id}`, identifierValue(p)]));
  return (await listAll(sb, tenant, 'CareTeam')).map((t: Resource) => {
    const members = (t.participant as { member: { reference: string } }[]).map((p) => npiOf.get(p.member.reference));
    return `${mrnOf.get((t.subject as { reference: string }).reference)}-${members.join(',')}`;
  });
}

function expectExactlyOnce(keys: string[], expected: string[]): void {
  expect(duplicates(countBy(keys, (k) => k))).toEqual([]);
  expect(keys.sort()).toEqual([...expected].sort());
}

describe.concurrent('care teams without match: under faults', () => {
  const box = useSandbox('t-ct-faults');
  it('15 % 503, 5 % resets, 3 % ambiguous creates, 50 req/s: every care team exactly once, exit 0', async () => {
    const sb = box.sb;
    const clinic = makeClinic(100, 8, 'care-etl-ct-faults-', 'clinic-per-row-mapping.yaml');
    sb.setFaults({ error503Rate: 0.15, dropRate: 0.05, ambiguousCreateRate: 0.03, rateLimitPerSecond: 50, seed: 21 });
    let report: RunReport;
    try {
      report = await run(sb, 't-ct-faults', clinic.mapping, {
        statePath: clinic.state,
        rejectsFile: clinic.rejects,
        retry: { attempts: 12, baseDelayMs: 50, maxDelayMs: 2000 },
      });
    } finally {
      sb.setFaults(undefined);
    }
    expect(sb.stats().ambiguousCreates).toBeGreaterThan(3);
    expect(report.exitCode).toBe(0);
    expect(report.mappings.careteam).toMatchObject({ created: clinic.assignments.length, rejected: 0 });
    expectExactlyOnce(
      await teamKeys(sb, 't-ct-faults'),
      clinic.assignments.map((a) => `${a.mrn}-${a.npi}`),
    );
  }, 120_000);
});

describe.concurrent('care teams without match: kill -9 and a lost state', () => {
  const box = useSandbox('t-ct-kill');
  const clinic = makeClinic(150, 8, 'care-etl-ct-kill-', 'clinic-per-row-mapping.yaml');
  const expected = clinic.assignments.map((a) => `${a.mrn}-${a.npi}`);
  const count = (type: string) => box.sb.stats().resources['t-ct-kill']?.[type] ?? 0;

  function spawnRun(): { child: ReturnType<typeof spawn>; done: Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string; stdout: string }> } {
    const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CARE_')));
    const child = spawn(process.execPath, [BIN, 'run', clinic.mapping, '--progress', 'none', '--json'], {
      cwd: ROOT,
      env: { ...base, CARE_BASE_URL: box.sb.url, CARE_API_KEY: box.sb.credentials.apiKey, CARE_EMR_ID: box.sb.credentials.emrId, CARE_TENANT_ID: 't-ct-kill' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let stdout = '';
    child.stdout!.on('data', (d) => ((out += d), (stdout += d)));
    child.stderr!.on('data', (d) => (out += d));
    return {
      child,
      done: once(child, 'close').then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null, out, stdout })),
    };
  }

  async function killWhen(cond: () => boolean, faults: FaultOptions): Promise<void> {
    box.sb.setFaults(faults);
    try {
      const { child, done } = spawnRun();
      let exited = false;
      void done.then(() => (exited = true));
      await until(() => exited || cond(), 2);
      child.kill('SIGKILL');
      const r = await done;
      expect(r.signal, `the run ended before the kill point: ${r.out}`).toBe('SIGKILL');
      // Let the server finish what the dead client left in flight.
      await new Promise((r) => setTimeout(r, 300));
    } finally {
      box.sb.setFaults(undefined);
    }
  }

  it('killed three times in the care-team phase (ambiguous creates on), the state deleted once, then a run to the end', async () => {
    const faults = { latencyMs: 15, ambiguousCreateRate: 0.1 };
    await killWhen(() => count('CareTeam') >= 30, { ...faults, seed: 31 });
    await killWhen(() => count('CareTeam') >= 90, { ...faults, seed: 32 });
    rmSync(dirname(clinic.state), { recursive: true, force: true }); // a fresh runner: no state at all
    await killWhen(() => count('CareTeam') >= 150, { ...faults, seed: 33 });
    expect(duplicates(countBy(await teamKeys(box.sb, 't-ct-kill'), (k) => k))).toEqual([]);

    const { done } = spawnRun();
    const r = await done;
    expect(r.code, r.out).toBe(0);
    const report = JSON.parse(r.stdout) as RunReport;
    expect(report.totals.rejected).toBe(0);
    expectExactlyOnce(await teamKeys(box.sb, 't-ct-kill'), expected);
    expect(duplicates(countBy(await listAll(box.sb, 't-ct-kill', 'Patient'), identifierValue))).toEqual([]);
    expect(count('Patient')).toBe(150);
    expect(count('Practitioner')).toBe(8);
  }, 120_000);
});
