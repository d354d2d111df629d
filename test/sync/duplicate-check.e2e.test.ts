/**
 * Issue 24 item 3, through the built CLI: without a shared state a second writer is never silent. Two runs of one
 * clinic from two folders (separate local states) started at the same moment (a gate holds their first requests
 * until both arrived) against the sandbox (20 ms latency):
 * every duplicate on the server — counted by a plain `fetch` of the API, not by care-etl — is named with both ids,
 * exit 1. A single run names none and reports the extra listing's cost. A create answered with an id the server does
 * not store is left pending, and the re-run reconciles it without a duplicate. Needs `npm run build`.
 */
import { Agent, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunReport } from '../../src/pipeline/run-report.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { Ledger } from '../../src/state/ledger.js';
import { runCli, type CliResult } from '../helpers/cli.js';
import { startGatewayServer, type GatewayServer } from '../helpers/gateway-server.js';
import { makeClinic } from './helpers.js';

let sb: Sandbox;
let gateway: GatewayServer | undefined;
beforeAll(async () => {
  sb = await startSandbox({ tenants: ['t-dup', 't-single', 't-never'], observationsPerPatient: 0 });
});
afterAll(async () => {
  await sb.close();
  await gateway?.close();
});

const env = (tenant: string) => ({ CARE_BASE_URL: sb.url, CARE_API_KEY: sb.credentials.apiKey, CARE_EMR_ID: sb.credentials.emrId, CARE_TENANT_ID: tenant });

function runJson(mapping: string, envVars: Record<string, string>, extra: string[] = []): Promise<CliResult & { report: RunReport }> {
  return runCli(['run', mapping, '--json', '--progress', 'none', ...extra], { env: envVars, timeoutMs: 60_000 }).then((r) => ({
    ...r,
    report: JSON.parse(r.stdout) as RunReport,
  }));
}

/** Every resource of a type, by a plain fetch of the API (following `next` links). */
async function fetchAll(tenant: string, type: string): Promise<Record<string, unknown>[]> {
  const headers = { 'Service-SubscriptionKey': sb.credentials.apiKey, 'Service-EmrId': sb.credentials.emrId, 'Service-TenantId': tenant };
  const out: Record<string, unknown>[] = [];
  let url: string | undefined = `${sb.url}/${type}?_count=1000`;
  while (url) {
    const res = await fetch(url, { headers });
    expect(res.status).toBe(200);
    const page = (await res.json()) as { entry?: { resource: Record<string, unknown> }[]; link?: { relation: string; url: string }[] };
    out.push(...(page.entry ?? []).map((e) => e.resource));
    url = page.link?.find((l) => l.relation === 'next')?.url;
  }
  return out;
}

/** Sorted id groups of the server's copies sharing one identity (identifier value; a care team's subject), of size > 1. */
async function serverDuplicates(tenant: string): Promise<string[][]> {
  const groups: string[][] = [];
  for (const type of ['Patient', 'Practitioner', 'CareTeam']) {
    const byIdentity = new Map<string, string[]>();
    for (const r of await fetchAll(tenant, type)) {
      const identity = type === 'CareTeam' ? (r.subject as { reference: string }).reference : (r.identifier as { system: string; value: string }[])[0]!.value;
      byIdentity.set(identity, [...(byIdentity.get(identity) ?? []), `${type}:${String(r.id)}`]);
    }
    for (const ids of byIdentity.values()) if (ids.length > 1) groups.push(ids.sort());
  }
  return groups.sort();
}

/** Every duplicate a run named, as sorted id groups. */
function named(report: RunReport): string[][] {
  return (report.verification ?? []).flatMap((v) => v.duplicates.map((d) => d.serverIds.map((id) => `${v.resourceType}:${id}`).sort()));
}

/**
 * A pass-through proxy to the sandbox that holds every request until `n` have arrived: the first request of each of
 * `n` runs (their preflight), so the runs start at the same moment however late the machine starts one process.
 */
async function startGate(target: string, n: number): Promise<{ url: string; close(): Promise<void> }> {
  const t = new URL(target);
  const agent = new Agent({ keepAlive: true });
  const held: (() => void)[] = [];
  let open = false;
  const server = createServer((req, res) => {
    const forward = () => {
      const up = request({ host: t.hostname, port: t.port, method: req.method, path: req.url, headers: req.headers, agent }, (ur) => {
        res.writeHead(ur.statusCode!, ur.headers);
        ur.pipe(res);
      });
      up.on('error', () => res.destroy());
      req.pipe(up);
    };
    if (open) return forward();
    held.push(forward);
    if (held.length < n) return;
    open = true;
    for (const go of held.splice(0)) go();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
        agent.destroy();
      }),
  };
}

describe('two runs at once, each with its own local state', () => {
  it('every duplicate they made on the server is named with both ids; a run that named one exits 1', async () => {
    const tenant = 't-dup';
    const gate = await startGate(sb.url, 2);
    sb.setFaults({ latencyMs: 20 });
    try {
      const [a, b] = [makeClinic(20, 4, 'care-etl-dup-a-'), makeClinic(20, 4, 'care-etl-dup-b-')];
      const runs = await Promise.all([a, b].map((c) => runJson(c.mapping, { ...env(tenant), CARE_BASE_URL: gate.url }, ['--concurrency', '2'])));
      const onServer = await serverDuplicates(tenant);
      expect(onServer.length, 'the two runs made duplicates').toBeGreaterThan(0);
      // The run that checked last saw both copies of every key; the other one those made before its own check.
      const all = [...new Set(runs.flatMap((r) => named(r.report).map((g) => g.join(' '))))].sort();
      expect(all).toEqual(onServer.map((g) => g.join(' ')));
      for (const r of runs) {
        expect(r.code, r.stderr).toBe(named(r.report).length ? 1 : 0);
        if (named(r.report).length) expect(r.report.warnings.join('\n')).toMatch(/use a shared state \(--state postgres:\/\/…\) or a CI concurrency group/);
      }
      expect(runs.some((r) => r.code === 1)).toBe(true);
    } finally {
      sb.setFaults(undefined);
      await gate.close();
    }
  }, 60_000);
});

describe('a single run', () => {
  it('names no duplicate; the extra listing and its cost are in the --json summary; a re-run creates nothing and lists nothing again', async () => {
    const c = makeClinic(6, 2, 'care-etl-dup-single-');
    const first = await runJson(c.mapping, env('t-single'));
    expect(first.code, first.stderr).toBe(0);
    const v = first.report.verification ?? [];
    expect(v.map((x) => x.mapping)).toEqual(['patient', 'practitioner', 'careteam']);
    for (const x of v) {
      expect(x).toMatchObject({ duplicateCount: 0, missingCount: 0, duplicates: [], missing: [] });
      expect(x.checked).toBe(first.report.mappings[x.mapping]!.created);
      expect(x.pages).toBeGreaterThanOrEqual(1);
      expect(x.resources + (x.reread?.resources ?? 0), 'listed, at first or read again from the last page').toBe(x.checked);
      expect(x.durationMs).toBeGreaterThanOrEqual(0);
    }
    expect(await serverDuplicates('t-single')).toEqual([]);
    const again = await runJson(c.mapping, env('t-single'));
    expect(again.code, again.stderr).toBe(0);
    expect(again.report.verification ?? []).toEqual([]);
  }, 60_000);

  it('--verify-after-load never: no listing after the creates', async () => {
    const never = await runJson(makeClinic(3, 1, 'care-etl-dup-never-').mapping, env('t-never'), ['--verify-after-load', 'never']);
    expect(never.code, never.stderr).toBe(0);
    expect(never.report.mappings.patient!.created).toBe(3);
    expect(never.report.verification ?? []).toEqual([]);
  }, 30_000);
});

describe('a create answered with an id the server does not store', () => {
  it('is not left synced (created-id-missing, exit 1); the re-run reconciles it without a duplicate', async () => {
    gateway = await startGatewayServer({ answerIdOnce: { type: 'Patient', id: 'ghost-1' } });
    const c = makeClinic(4, 2, 'care-etl-dup-ghost-');
    const gw = { CARE_BASE_URL: gateway.url, CARE_API_KEY: 'sk-dup-ghost', CARE_EMR_ID: 'emr', CARE_TENANT_ID: 't-ghost' };
    const first = await runJson(c.mapping, gw);
    expect(first.code, first.stderr).toBe(1);
    const patients = first.report.verification?.find((v) => v.mapping === 'patient');
    expect(patients).toMatchObject({ missingCount: 1, duplicateCount: 0, missing: [{ serverId: 'ghost-1' }] });
    const key = patients!.missing[0]!.key;
    const entry = entryOf(c.state, gateway.url, 't-ghost', key);
    expect(entry?.status).toBe('pending');
    expect(entry?.serverId).toBeUndefined();

    const again = await runJson(c.mapping, gw);
    expect(again.code, again.stderr).toBe(0);
    expect(gateway.stored('Patient')).toHaveLength(4); // each key once: the stored copy was adopted, not created again
    const adopted = entryOf(c.state, gateway.url, 't-ghost', key);
    expect(adopted?.status).toBe('synced');
    expect(gateway.stored('Patient').some((p) => p.id === adopted?.serverId)).toBe(true);
  }, 60_000);
});

function entryOf(state: string, url: string, tenant: string, key: string) {
  const ledger = Ledger.open(state);
  try {
    return ledger.scope(url, tenant).get('patient', key);
  } finally {
    ledger.close();
  }
}
