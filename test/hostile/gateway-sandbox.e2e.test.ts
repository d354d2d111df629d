/**
 * Issue 24, item 4 (done-when): the sandbox's gateway fault (`gatewayErrorRate`: a create STORED, then answered
 * 502 / 503 / 504 with an HTML page) at 10 % of creates, a ~100-resource clinic loaded by the built CLI. What the
 * server holds afterwards is counted with plain `fetch` over the API (not care-etl's client): every source key
 * exactly once — 0 duplicates, 0 missing — after the run, and after one re-run if the run exited 1.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { runCli } from '../helpers/cli.js';
import { makeClinic, mrn, npi } from '../sync/helpers.js';

const TENANT = 'demo-clinic';
const PATIENTS = 45;
const PRACTITIONERS = 8; // + 45 care teams: 98 creates

let sb: Sandbox;
beforeAll(async () => {
  sb = await startSandbox({ observationsPerPatient: 0, faults: { gatewayErrorRate: 0.1, seed: 24 } });
});
afterAll(async () => {
  await sb?.close();
});

/** Every resource of a type, read with plain fetch, following the `next` links. */
async function fetchAll(type: string): Promise<Record<string, unknown>[]> {
  const headers = { 'Service-SubscriptionKey': sb.credentials.apiKey, 'Service-EmrId': sb.credentials.emrId, 'Service-TenantId': TENANT };
  const out: Record<string, unknown>[] = [];
  let url: string | undefined = `${sb.url}/${type}?_count=1000`;
  while (url) {
    const res = await fetch(url, { headers });
    expect(res.status).toBe(200);
    const bundle = (await res.json()) as { entry?: { resource: Record<string, unknown> }[]; link?: { relation: string; url: string }[] };
    out.push(...(bundle.entry ?? []).map((e) => e.resource));
    url = bundle.link?.find((l) => l.relation === 'next')?.url;
  }
  return out;
}

/** Server copies per value of `key`. */
async function copies(type: string, key: (r: Record<string, unknown>) => string): Promise<Map<string, number>> {
  const m = new Map<string, number>();
  for (const r of await fetchAll(type)) m.set(key(r), (m.get(key(r)) ?? 0) + 1);
  return m;
}

const once = (keys: string[]) => new Map(keys.map((k) => [k, 1]));
const range = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => f(i + 1));

describe('sandbox gateway errors after a committed create, at 10 % of creates', () => {
  it('a run (and one re-run if it exits 1): every key exactly once on the server', async () => {
    const clinic = makeClinic(PATIENTS, PRACTITIONERS, 'care-etl-gateway-sb-');
    const args = ['run', clinic.mapping, '--base-url', sb.url, '--emr-id', sb.credentials.emrId, '--tenant-id', TENANT, '--json', '--progress', 'none'];
    const env = { CARE_API_KEY: sb.credentials.apiKey };
    let r = await runCli(args, { env, timeoutMs: 60_000 });
    expect([0, 1], r.stderr).toContain(r.code);
    if (r.code === 1) r = await runCli(args, { env, timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(sb.stats().gatewayErrors).toBeGreaterThanOrEqual(5); // the fault really happened

    const identifier = (r: Record<string, unknown>) => (r.identifier as { value: string }[])[0]!.value;
    expect(await copies('Patient', identifier)).toEqual(once(range(PATIENTS, mrn)));
    expect(await copies('Practitioner', identifier)).toEqual(once(range(PRACTITIONERS, npi)));
    const patientIds = new Map((await fetchAll('Patient')).map((p) => [p.id as string, identifier(p)]));
    const teamOf = (t: Record<string, unknown>) => patientIds.get((t.subject as { reference: string }).reference.slice('Patient/'.length)) ?? 'unknown patient';
    expect(await copies('CareTeam', teamOf)).toEqual(once(range(PATIENTS, mrn)));
  }, 150_000);
});
