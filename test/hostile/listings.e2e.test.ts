/**
 * Issue 25, item 2, over HTTP against a scripted store on 127.0.0.1 (test/helpers/listing-server.ts): a listing is
 * believed only when it can be. A clinic is loaded, its state lost; the re-run must list the server before creating
 * anything, and a listing whose ids are not FHIR ids (`pat_1`: the schemas' references cannot name them), whose
 * `total` contradicts its entries, whose `entry` is not an array of resources of the type, or which holds a resource
 * nested 10,000 deep stops the run before its first create: exit 3, the reason named, no row rejected, 0 creates.
 * The pipeline runs in-process (fast); one case goes through the built CLI for its exit code and stderr.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import { runCli } from '../helpers/cli.js';
import { bundleOf, startListingServer, type ListingServer, type ListingServerOptions, type Stored } from '../helpers/listing-server.js';
import { makeClinic } from '../sync/helpers.js';

const KEY = 'sk-listings-CANARY-7d21';
const TENANT = 't-listings';
const N = 4; // patients, each with a care team
const M = 2; // practitioners

const servers: ListingServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

const run = (mapping: string, url: string) =>
  runPipeline({
    mappingFile: mapping,
    env: {},
    connection: { baseUrl: url, apiKey: KEY, emrId: 'emr', tenantId: TENANT },
    retry: { baseDelayMs: 1, maxDelayMs: 2 },
  });

/** A clinic loaded into a fresh store (exit 0), then its state lost: the next run knows nothing of what the server holds. */
async function loadedThenLost() {
  const s = await startListingServer();
  servers.push(s);
  const clinic = makeClinic(N, M, 'care-etl-listings-');
  expect((await run(clinic.mapping, s.url)).exitCode).toBe(0);
  expect(s.creates).toBe(N + M + N);
  rmSync(dirname(clinic.state), { recursive: true, force: true });
  return { s, clinic };
}

/** No row was rejected for the listing: no rejects written, none kept from the stopped run. */
function expectNoReject(rejects: string): void {
  for (const f of [rejects, `${rejects}.incomplete`]) if (existsSync(f)) expect(readFileSync(f, 'utf8').trim()).toBe('');
}

const first = (stored: Stored[], change: (r: Stored) => Stored) => stored.map((r, i) => (i === 0 ? change(r) : r));
const entriesOf = (stored: Stored[]) => (JSON.parse(bundleOf(stored)) as { entry: unknown[] }).entry;

const cases: { name: string; listing: NonNullable<ListingServerOptions['listing']>; reason: RegExp }[] = [
  {
    name: 'ids that are not FHIR ids (`pat_1`)',
    listing: (_t, stored) => bundleOf(stored.map((r) => ({ ...r, id: r.id.replace(/^[a-z]+-/, 'pat_') }))),
    reason: /entry 1 has the id "pat_1", which cannot be used \(a FHIR id/,
  },
  { name: 'an id with a slash', listing: (_t, stored) => bundleOf(first(stored, (r) => ({ ...r, id: `a/${r.id}` }))), reason: /entry 1 has the id "a\/[^"]+"/ },
  {
    name: '`total: N` and no `entry`',
    listing: (_t, stored) => JSON.stringify({ resourceType: 'Bundle', type: 'searchset', total: stored.length }),
    reason: /its total says \d resources, its 1 page\(s\) list 0/,
  },
  {
    name: '`total` above the entries listed',
    listing: (_t, stored) => bundleOf(stored.slice(1), { total: stored.length }),
    reason: /its total says \d resources/,
  },
  {
    name: '`entry` an object',
    listing: () => JSON.stringify({ resourceType: 'Bundle', entry: { resource: {} } }),
    reason: /the Bundle's entry is an object, not an array/,
  },
  {
    name: '`entry` a string',
    listing: () => JSON.stringify({ resourceType: 'Bundle', entry: 'Patient' }),
    reason: /the Bundle's entry is a string, not an array/,
  },
  {
    name: 'an entry that is a string',
    listing: (_t, stored) => JSON.stringify({ resourceType: 'Bundle', entry: ['x', ...entriesOf(stored)] }),
    reason: /entry 1 is "x", not an object/,
  },
  {
    name: 'an entry of another type',
    listing: (t, stored) => bundleOf(first(stored, (r) => ({ ...r, resourceType: t === 'Patient' ? 'Practitioner' : 'Patient' }))),
    reason: /entry 1 is a "(Patient|Practitioner)" resource, not a/,
  },
];

/** A listing of everything stored, after one resource nested `depth` arrays deep (written as text: no recursion). */
const deepListing = (depth: number) => (t: string, stored: Stored[]) => {
  const deep = `{"resourceType":"${t}","id":"deep-1","extension":${'['.repeat(depth)}${']'.repeat(depth)}}`;
  return `{"resourceType":"Bundle","type":"searchset","entry":[{"resource":${deep}}${stored.map((r) => `,{"resource":${JSON.stringify(r)}}`).join('')}]}`;
};

describe('after the state is lost, a listing that cannot be believed stops the run before its first create', () => {
  for (const c of cases) {
    it(`${c.name}: refused (exit 3) naming it, 0 creates, no row rejected`, async () => {
      const { s, clinic } = await loadedThenLost();
      s.set({ listing: c.listing });
      const before = s.creates;
      const err = (await run(clinic.mapping, s.url).then(
        () => undefined,
        (e: unknown) => e,
      )) as { exitCode?: number; message?: string } | undefined;
      expect(err?.exitCode, String(err?.message)).toBe(3);
      expect(err?.message).toMatch(c.reason);
      expect(s.creates).toBe(before);
      expectNoReject(clinic.rejects);
    }, 30_000);
  }

  it('a listed resource nested 10,000 deep, through the CLI: exit 3, one clear error, no stack overflow, 0 creates', async () => {
    const { s, clinic } = await loadedThenLost();
    s.set({ listing: deepListing(10_000) });
    const before = s.creates;
    const r = await runCli(['run', clinic.mapping, '--base-url', s.url, '--emr-id', 'emr', '--tenant-id', TENANT, '--progress', 'none'], {
      env: { CARE_API_KEY: KEY },
      timeoutMs: 50_000,
    });
    expect(r.code, r.stderr).toBe(3);
    expect(r.stderr).toMatch(/entry 1 \(id "deep-1"\) is nested more than 64 levels deep/);
    expect(r.stderr.match(/cannot be believed/g)).toHaveLength(1);
    expect(r.stderr).not.toMatch(/Maximum call stack|looks like a bug/);
    expect(s.creates).toBe(before);
    expectNoReject(clinic.rejects);
  }, 60_000);

  it('a listed resource nested 64 deep is believed: nothing created twice', async () => {
    const { s, clinic } = await loadedThenLost();
    s.set({ listing: deepListing(62) });
    const before = s.creates;
    expect((await run(clinic.mapping, s.url)).exitCode).toBe(0);
    expect(s.creates).toBe(before);
  }, 30_000);
});
