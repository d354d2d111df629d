/**
 * Issue 28 item 1: a phase's verification listing starts before its creates end, and the guarantee holds (second
 * writer: docs/design/second-writer.md). In-process runs over HTTP through a proxy that shows the order requests
 * reach the server (test/helpers/watch-proxy.ts, 5 ms per request); `indexPageSize: 2` makes the listing long (a page per two resources),
 * so it starts while many rows are still unsent. After the creates the early listing is read again from its last page,
 * and believed only if that shows every key created since it started (else the type is listed again): two writers in
 * lockstep, a server listing newest first, an id the server lacks, a failed re-read; no early start where it cannot help.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import type { RunEvent, RunReport } from '../../src/pipeline/run-report.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { Ledger } from '../../src/state/ledger.js';
import { startGatewayServer } from '../helpers/gateway-server.js';
import { bundleOf, startListingServer, type Stored } from '../helpers/listing-server.js';
import { startWatchProxy, type WatchedRequest, type WatchProxyOptions } from '../helpers/watch-proxy.js';
import { identifierValue, listAll, makePatients, mrn, MRN_SYSTEM } from './helpers.js';

const PATIENTS = 150;
/** Each request's delay in the proxy: round trips of a few ms, a listing of 60 pages clearly longer than the creates' time left. */
const DELAY_MS = 5;
/** A 403's body: never retried, so a listing whose page is refused is not believed. */
const refused = JSON.stringify({ resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'forbidden' }] });
let sb: Sandbox;
beforeAll(async () => {
  sb = await startSandbox({ tenants: ['t-early-dup', 't-early-lockstep', 't-early-alongside', 't-early-follow'], observationsPerPatient: 0 });
});
afterAll(async () => {
  await sb.close();
});

const isList = (r: WatchedRequest, type: string) => r.method === 'GET' && (r.path === `/${type}` || r.path.startsWith(`/${type}?`));
const isCreate = (r: WatchedRequest, type: string) => r.method === 'POST' && r.path === `/${type}`;
/** The MRNs of the creates seen so far. */
const createdMrns = (seen: readonly WatchedRequest[]) =>
  seen.filter((r) => isCreate(r, 'Patient')).map((r) => (JSON.parse(r.body) as { identifier: { value: string }[] }).identifier[0]!.value);

/** The first listing after a create: the verification's (the lookup listing and the preflight come before any create). */
function onVerifyListing(act: (seen: readonly WatchedRequest[]) => Promise<void> | void) {
  let done = false;
  return (seen: () => readonly WatchedRequest[]) => async (r: WatchedRequest) => {
    if (done || !isList(r, 'Patient') || !seen().some((x) => isCreate(x, 'Patient'))) return;
    done = true;
    await act(seen());
  };
}

function runThrough(
  url: string,
  tenantId: string,
  mappingFile: string,
  apiKey = sb.credentials.apiKey,
  emrId = sb.credentials.emrId,
  onEvent?: (e: RunEvent) => void,
): Promise<RunReport> {
  return runPipeline({ mappingFile, env: {}, connection: { baseUrl: url, apiKey, emrId, tenantId }, indexPageSize: 2, onEvent });
}

describe('a verification listing started before the phase’s creates end', () => {
  it('overlaps the creates, and still names a copy another writer created during the phase (its key created after the listing started)', async () => {
    const tenant = 't-early-dup';
    const last = mrn(PATIENTS);
    let unsentWhenListed: boolean | undefined;
    let foreignId: string | undefined;
    const headers = {
      'content-type': 'application/json',
      'Service-SubscriptionKey': sb.credentials.apiKey,
      'Service-EmrId': sb.credentials.emrId,
      'Service-TenantId': tenant,
    };
    const hook = onVerifyListing(async (seen) => {
      unsentWhenListed = !createdMrns(seen).includes(last);
      // Another writer (its own state) creates the last patient now, before this run has sent it.
      const res = await fetch(`${sb.url}/Patient`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ resourceType: 'Patient', identifier: [{ system: MRN_SYSTEM, value: last }], active: true }),
      });
      foreignId = ((await res.json()) as { id: string }).id;
    });
    let seen: WatchedRequest[] = [];
    const proxy = await startWatchProxy(sb.url, { onRequest: (r) => hook(() => seen)(r), delayMs: DELAY_MS });
    seen = proxy.seen as WatchedRequest[];
    try {
      const report = await runThrough(proxy.url, tenant, makePatients(PATIENTS, 'care-etl-early-dup-').mapping);
      // The overlap: creates of the type reached the server after its verification listing did.
      const firstVerifyList = seen.findIndex((r, i) => isList(r, 'Patient') && seen.slice(0, i).some((x) => isCreate(x, 'Patient')));
      expect(firstVerifyList, 'a listing after the first create').toBeGreaterThan(0);
      expect(seen.slice(firstVerifyList).filter((r) => isCreate(r, 'Patient')).length, 'creates after the listing started').toBeGreaterThan(0);
      expect(unsentWhenListed, 'the last patient was not sent yet when the listing started').toBe(true);

      const v = report.verification?.find((x) => x.mapping === 'patient');
      expect(v).toMatchObject({ checked: PATIENTS, duplicateCount: 1, missingCount: 0 });
      expect(v!.duplicates[0]!.key).toBe(last);
      expect(v!.duplicates[0]!.serverIds).toContain(foreignId);
      expect(report.mappings.patient!.rejected).toBe(1);
      // Both copies are on the server: the run's and the other writer's.
      expect((await listAll(sb, tenant, 'Patient')).filter((p) => identifierValue(p) === last)).toHaveLength(2);
    } finally {
      await proxy.close();
    }
  }, 30_000);

  it('a create answered, after the listing started, with an id the server lacks: not in the re-read, so listed again — still created-id-missing', async () => {
    const { report, seen, state, url } = await ghostRun();
    const v = report.verification?.find((x) => x.mapping === 'patient');
    expect(v).toMatchObject({ duplicateCount: 0, missingCount: 1, missing: [{ serverId: 'ghost-early' }], fallback: 'not-append-ordered' });
    expect(v!.reread).toBeUndefined();
    expect(
      seen.some((r) => r.method === 'GET' && r.path.startsWith('/Patient/')),
      'no GET by id',
    ).toBe(false);
    expect(report.mappings.patient!.created).toBe(PATIENTS - 1);
    const ledger = Ledger.open(state);
    try {
      expect(ledger.scope(url, 't-ghost').get('patient', v!.missing[0]!.key)?.status).toBe('pending'); // the next run reconciles it
    } finally {
      ledger.close();
    }
  }, 30_000);

  it('the re-read refused (403, not retried): the type listed again after the creates — the missing id still found, exit not 0', async () => {
    let lists = 0;
    // The early listing's request arms the ghost (armedAt: the listings seen by then); the next listing reads it again
    // from its last page — while the creates go on, or at the phase's end — refused: not believed, the type listed again.
    const { report } = await ghostRun((r, armedAt) => (isList(r, 'Patient') && armedAt > 0 && ++lists === 2 ? { status: 403, body: refused } : undefined));
    const v = report.verification?.find((x) => x.mapping === 'patient');
    expect(v).toMatchObject({ checked: PATIENTS, duplicateCount: 0, missingCount: 1, fallback: 'reread-failed' });
    expect(report.exitCode).toBe(1);
  }, 30_000);

  it('a reading from the last page refused while the creates go on: not believed — the type listed again after them, nothing skipped', async () => {
    const asked = new Set<string>();
    let refusedRequest: WatchedRequest | undefined;
    // Pages of 10 and 4 creates at a time: the listing catches up with the creates and follows them (every 32). A page
    // after the first asked for a second time is such a reading from the last page: refused once. (The first page is
    // asked for by the lookup listing too.)
    const answer = (r: WatchedRequest) => {
      if (!isList(r, 'Patient') || !r.path.includes('_cursor=')) return undefined;
      if (!asked.has(r.path) || refusedRequest) return void asked.add(r.path);
      refusedRequest = r;
      return { status: 403, body: refused };
    };
    const proxy = await startWatchProxy(sb.url, { delayMs: DELAY_MS, answer });
    try {
      const n = 400;
      const report = await runPipeline({
        mappingFile: makePatients(n, 'care-etl-early-follow-').mapping,
        env: {},
        connection: { baseUrl: proxy.url, apiKey: sb.credentials.apiKey, emrId: sb.credentials.emrId, tenantId: 't-early-follow' },
        indexPageSize: 10,
        concurrency: 4,
      });
      const seen = proxy.seen;
      expect(refusedRequest, 'a page asked for again').toBeDefined();
      expect(seen.indexOf(refusedRequest!), 'refused before the last create').toBeLessThan(seen.findLastIndex((r) => isCreate(r, 'Patient')));
      const v = report.verification?.find((x) => x.mapping === 'patient');
      expect(v).toMatchObject({ checked: n, duplicateCount: 0, missingCount: 0, fallback: 'reread-failed' });
      expect(v!.resources, 'the type listed again: every patient').toBe(n);
      expect(report.exitCode).toBe(0);
    } finally {
      await proxy.close();
    }
  }, 30_000);

  it.each([
    ['its pages carry a total (a listing read while it grows is refused)', { total: true, concurrency: undefined }],
    ['a window of 2 (nothing can overlap)', { total: false, concurrency: 2 }],
  ])(
    'no early start when %s: the listing comes after the last create, and is believed',
    async (_what, { total, concurrency }) => {
      const server = await startListingServer({ listing: oldestFirst(total) });
      const proxy = await startWatchProxy(server.url, { delayMs: DELAY_MS });
      try {
        const c = makePatients(PATIENTS, 'care-etl-early-none-');
        const report = await runPipeline({
          mappingFile: c.mapping,
          env: {},
          connection: { baseUrl: proxy.url, apiKey: 'k', emrId: 'e', tenantId: 't' },
          indexPageSize: 2,
          concurrency,
        });
        const seen = proxy.seen;
        const lastCreate = seen.findLastIndex((r) => isCreate(r, 'Patient'));
        const firstCreate = seen.findIndex((r) => isCreate(r, 'Patient'));
        expect(
          seen.slice(firstCreate, lastCreate).some((r) => isList(r, 'Patient')),
          'a listing among the creates',
        ).toBe(false);
        const v = report.verification?.find((x) => x.mapping === 'patient');
        expect(v).toMatchObject({ checked: PATIENTS, duplicateCount: 0, missingCount: 0 });
        expect(v!.fallback).toBeUndefined();
      } finally {
        await proxy.close();
        await server.close();
      }
    },
    30_000,
  );

  it('two writers in lockstep: a copy another writer adds after the early listing ended is found by the re-read (the key created last)', async () => {
    const tenant = 't-early-lockstep';
    const { report, foreignId, last } = await lockstepRun(sb.url, tenant, 'care-etl-early-lockstep-');
    const v = report.verification?.find((x) => x.mapping === 'patient');
    expect(v).toMatchObject({ checked: PATIENTS, duplicateCount: 1, missingCount: 0 });
    expect(v!.fallback).toBeUndefined();
    // The copy came with the readings from the last page (while the creates went on, and at the phase's end).
    expect(v!.reread!.resources, 'the other writer’s copy, and this run’s keys created since').toBeGreaterThanOrEqual(2);
    expect(v!.resources + v!.reread!.resources).toBe(PATIENTS + 1);
    expect(v!.duplicates[0]).toMatchObject({ key: last });
    expect(v!.duplicates[0]!.serverIds).toContain(foreignId);
  }, 30_000);

  it('the creates end while the early listing still reads a page: its re-read starts then, from that page, alongside — a copy added then still found', async () => {
    const tenant = 't-early-alongside';
    const first = mrn(1);
    // The early listing's first page is held at the proxy until the same page is asked for again (its re-read), or
    // 5 s: the creates end meanwhile. When the re-read comes, the held page is answered, then another writer creates
    // a copy of the first patient, then the re-read is let through.
    let held: string | undefined;
    let release!: (by: 'reread' | 'timeout') => void;
    const released = new Promise<'reread' | 'timeout'>((resolve) => (release = resolve));
    let foreignId: string | undefined;
    let seen: WatchedRequest[] = [];
    const onRequest = async (r: WatchedRequest) => {
      if (!isList(r, 'Patient') || !seen.some((x) => isCreate(x, 'Patient'))) return;
      if (held === undefined) {
        held = r.path;
        const timer = setTimeout(() => release('timeout'), 5000);
        await released;
        clearTimeout(timer);
      } else if (r.path === held) {
        // The held page is answered first (without the copy), then the copy is made, then this re-read goes on:
        // only the re-read can list the copy (the run's creates are over: the held page is the only 200 to come).
        const served = sb.stats().byStatus['200'] ?? 0;
        release('reread');
        while ((sb.stats().byStatus['200'] ?? 0) <= served) await new Promise((resolve) => setTimeout(resolve, 2));
        foreignId = await foreignPatient(sb.url, tenant, first);
      }
    };
    const proxy = await startWatchProxy(sb.url, { onRequest, delayMs: DELAY_MS });
    seen = proxy.seen as WatchedRequest[];
    try {
      const report = await runThrough(proxy.url, tenant, makePatients(PATIENTS, 'care-etl-early-alongside-').mapping);
      expect(await released, 'the held page released by its re-read, not by the time-out').toBe('reread');
      const heldAt = seen.findIndex((r) => r.path === held);
      expect(seen.slice(heldAt).filter((r) => isCreate(r, 'Patient')).length, 'creates after the held page').toBeGreaterThan(0);
      const v = report.verification?.find((x) => x.mapping === 'patient');
      expect(v).toMatchObject({ checked: PATIENTS, duplicateCount: 1, missingCount: 0 });
      expect(v!.fallback).toBeUndefined();
      // Both readings together: every patient of this run and the other writer's copy (each resource counted by the reading that added it).
      expect(v!.resources + v!.reread!.resources).toBe(PATIENTS + 1);
      expect(v!.duplicates[0]).toMatchObject({ key: first });
      expect(v!.duplicates[0]!.serverIds).toContain(foreignId);
      expect(report.mappings.patient).toMatchObject({ created: PATIENTS, rejected: 1 });
    } finally {
      await proxy.close();
    }
  }, 30_000);

  it('a server listing newest first: the re-read lacks keys created since the listing started, so the type is listed again — the copy still found', async () => {
    const server = await startListingServer({ listing: newestFirst });
    try {
      const { report, foreignId, last } = await lockstepRun(server.url, 't-newest', 'care-etl-early-newest-');
      const v = report.verification?.find((x) => x.mapping === 'patient');
      expect(v).toMatchObject({ checked: PATIENTS, duplicateCount: 1, missingCount: 0, fallback: 'not-append-ordered' });
      expect(v!.duplicates[0]).toMatchObject({ key: last });
      expect(v!.duplicates[0]!.serverIds).toContain(foreignId);
    } finally {
      await server.close();
    }
  }, 30_000);
});

describe('a server that ignores `_count` and pages by 50 (`countParam: ignore`)', () => {
  it('the listing starts early while the page size is unknown, and follows the creates: the phase’s end reads a few pages, not the list', async () => {
    const n = 2 * PATIENTS;
    const small = await startSandbox({ tenants: ['t-small-pages'], observationsPerPatient: 0, countParam: 'ignore', pageSize: 50 });
    const proxy = await startWatchProxy(small.url, { delayMs: DELAY_MS });
    try {
      const c = makePatients(n, 'care-etl-early-small-');
      const report = await runPipeline({
        mappingFile: c.mapping,
        env: {},
        connection: { baseUrl: proxy.url, apiKey: small.credentials.apiKey, emrId: small.credentials.emrId, tenantId: 't-small-pages' },
      });
      const seen = proxy.seen;
      const lastCreate = seen.findLastIndex((r) => isCreate(r, 'Patient'));
      const firstCreate = seen.findIndex((r) => isCreate(r, 'Patient'));
      const listsAmongCreates = seen.slice(firstCreate, lastCreate).filter((r) => isList(r, 'Patient')).length;
      const listsAfter = seen.slice(lastCreate).filter((r) => isList(r, 'Patient')).length;
      // 300 patients are 6 pages of 50: read while the creates went on, not after them (a listing estimated at the 1,000
      // asked for starts at the last creates and reads them all after).
      expect(listsAmongCreates, 'listing pages among the creates').toBeGreaterThanOrEqual(3);
      // (the tail of a re-read in flight at the last create, and the phase's end re-read: at most two pages each)
      expect(listsAfter, 'listing pages after the last create').toBeLessThanOrEqual(4);
      const v = report.verification?.find((x) => x.mapping === 'patient');
      expect(v).toMatchObject({ checked: n, duplicateCount: 0, missingCount: 0 });
      expect(v!.fallback).toBeUndefined();
      expect(report.mappings.patient).toMatchObject({ created: n, rejected: 0 });
      expect(report.exitCode).toBe(0);
    } finally {
      await proxy.close();
      await small.close();
    }
  }, 30_000);
});

/**
 * A run against a store behind a gateway (test/helpers/gateway-server.ts) whose first create answered after the
 * verification listing reached it is answered with `ghost-early`, an id it does not store.
 */
async function ghostRun(answer?: (r: WatchedRequest, armedAt: number) => ReturnType<NonNullable<WatchProxyOptions['answer']>>) {
  const gateway = await startGatewayServer({});
  let armed = false;
  let armedAt = 0;
  const hook = onVerifyListing((seen) => {
    gateway.answerIdOnce('Patient', 'ghost-early'); // the next create is stored under its own id, answered with this one
    armed = true;
    armedAt = seen.filter((r) => isList(r, 'Patient')).length;
  });
  let seen: WatchedRequest[] = [];
  const proxy = await startWatchProxy(gateway.url, { onRequest: (r) => hook(() => seen)(r), delayMs: DELAY_MS, answer: answer && ((r) => answer(r, armedAt)) });
  seen = proxy.seen as WatchedRequest[];
  const c = makePatients(PATIENTS, 'care-etl-early-ghost-');
  try {
    const report = await runThrough(proxy.url, 't-ghost', c.mapping, 'sk-early-ghost', 'emr');
    expect(armed).toBe(true);
    expect(gateway.stored('Patient')).toHaveLength(PATIENTS);
    return { report, seen, state: c.state, url: proxy.url };
  } finally {
    await proxy.close();
    await gateway.close();
  }
}

/** Oldest first, two per page, a cursor in each `next` link; `total` on every page when asked for. */
function oldestFirst(withTotal: boolean) {
  return (type: string, stored: Stored[], url: URL): string => {
    const count = Number(url.searchParams.get('_count') ?? 2);
    const after = Number(url.searchParams.get('_after') ?? 0);
    const page = stored.slice(after, after + count);
    const link = after + count < stored.length ? [{ relation: 'next', url: `/${type}?_count=${count}&_after=${after + count}` }] : [];
    return bundleOf(page, { link, ...(withTotal ? { total: stored.length } : {}) });
  };
}

/** Another writer's copy of the patient `value` in `tenant`, straight at the server: its id. */
async function foreignPatient(target: string, tenant: string, value: string): Promise<string> {
  const res = await fetch(`${target}/Patient`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'Service-SubscriptionKey': sb.credentials.apiKey,
      'Service-EmrId': sb.credentials.emrId,
      'Service-TenantId': tenant,
    },
    body: JSON.stringify({ resourceType: 'Patient', identifier: [{ system: MRN_SYSTEM, value }], active: true }),
  });
  return ((await res.json()) as { id: string }).id;
}

/**
 * Two writers in lockstep (issue 24: the same export, two CI jobs): the run's create of the last patient is held at
 * the proxy until its verification listing (started early) was read; then another writer creates that patient, and
 * the run's create goes on — both copies added after the listing ended.
 */
async function lockstepRun(target: string, tenant: string, prefix: string) {
  const last = mrn(PATIENTS);
  let listed!: () => void;
  const verifyListed = new Promise<void>((resolve) => (listed = resolve));
  let foreignId: string | undefined;
  const foreignCreate = async () => {
    foreignId = await foreignPatient(target, tenant, last);
  };
  const hold = async (r: WatchedRequest) => {
    if (!isCreate(r, 'Patient') || !r.body.includes(`"${last}"`)) return;
    await verifyListed;
    await foreignCreate();
  };
  const proxy = await startWatchProxy(target, { onRequest: hold, delayMs: DELAY_MS });
  const onEvent = (e: RunEvent) => {
    if (e.type === 'index' && e.phase === 'end' && (e as { purpose?: string }).purpose === 'verify') listed();
  };
  try {
    const report = await runThrough(proxy.url, tenant, makePatients(PATIENTS, prefix).mapping, undefined, undefined, onEvent);
    expect(foreignId).toBeDefined();
    return { report, foreignId: foreignId!, last };
  } finally {
    await proxy.close();
  }
}

/** Newest first, two per page, a cursor (the position of the page's last resource) in each `next` link. */
function newestFirst(type: string, stored: Stored[], url: URL): string {
  const count = Number(url.searchParams.get('_count') ?? 2);
  const before = Number(url.searchParams.get('_before') ?? stored.length);
  const page: Stored[] = [];
  for (let i = before - 1; i >= 0 && page.length < count; i--) page.push(stored[i]!);
  const from = before - page.length;
  const link = from > 0 ? [{ relation: 'next', url: `/${type}?_count=${count}&_before=${from}` }] : [];
  return bundleOf(page, { link });
}
