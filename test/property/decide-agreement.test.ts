/**
 * Issue 23 item 1, Done-when: what `plan` says = what the run then does = what `state check` reports, per key.
 *
 * Each generated case is a handful of source keys, each with a ledger state (absent, synced, synced with an older
 * hash, pending intent of an earlier run, ended, rejected), a server state (absent, an equal copy, a changed copy,
 * two identical copies, an equal and a changed one, two changed ones) and a mapped resource (valid, or one its
 * `match:` rejects), under a reconcile policy. The copies are created over HTTP in the in-process sandbox; the
 * ledger is a real state file. Then `ResourceSync` plans every key, checks it (`inspect`) and runs it — each a
 * fresh instance, as the commands make them — and the three per-key verdicts are compared:
 *  - plan = run, always (kind, server id, reject code);
 *  - check = plan under `--reconcile always`; under `auto`/`never` too, except the keys where the run leaves the
 *    server alone by policy: `unchanged` with drift, and `never`'s creates without looking (check verifies the
 *    server as `always` would — that is its job).
 * Runs: CARE_PROPERTY_RUNS · 2 % cases (default 40). Seed: CARE_PROPERTY_SEED (default fixed).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CareClient } from '../../src/api/client.js';
import { resolveConnection } from '../../src/api/connection.js';
import type { Resource } from '../../src/api/types.js';
import { contentHash } from '../../src/core/content-hash.js';
import { AdaptiveLimiter } from '../../src/load/adaptive-concurrency.js';
import { ResourceSync, type Inspection, type PlanOutcome, type SyncOutcome } from '../../src/load/resource-sync.js';
import { matchRuleOf, ServerIndexes } from '../../src/load/server-index.js';
import { compileMapping, type CompiledResource } from '../../src/mapping/compile-mapping.js';
import { loadMapping } from '../../src/mapping/load-mapping.js';
import type { ReconcilePolicy } from '../../src/mapping/types.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { Ledger, type LedgerScope } from '../../src/state/ledger.js';
import type { MappedResource } from '../../src/transform/transform-source.js';

const TOTAL = Math.max(50, Number(process.env.CARE_PROPERTY_RUNS ?? 2000));
const RUNS = Math.round(TOTAL * 0.02);
const SEED = Number(process.env.CARE_PROPERTY_SEED ?? 20_251_125);
const TENANT = 't-decide';
const SYSTEM = 'urn:care-etl-decide:mrn';

const LEDGER = ['absent', 'synced', 'synced-old', 'pending', 'ended', 'rejected'] as const;
const SERVER = ['absent', 'equal', 'changed', 'dup-equal', 'dup-mixed', 'dup-changed'] as const;
type KeySpec = { ledger: (typeof LEDGER)[number]; server: (typeof SERVER)[number]; badMatch: boolean };
const keySpec: fc.Arbitrary<KeySpec> = fc.record({
  ledger: fc.constantFrom(...LEDGER),
  server: fc.constantFrom(...SERVER),
  badMatch: fc.nat({ max: 9 }).map((n) => n < 2),
});
const caseSpec = fc.record({ keys: fc.array(keySpec, { minLength: 1, maxLength: 6 }), policy: fc.constantFrom<ReconcilePolicy>('auto', 'always', 'never') });

/** One verdict in a vocabulary the three modes share. */
type Verdict = { kind: 'create' | 'update' | 'unchanged' | 'adopt' | 'adopt-update' | 'reject'; serverId?: string; code?: string };

const ofPlan = (o: PlanOutcome): Verdict | undefined =>
  o.kind === 'deferred'
    ? undefined
    : o.kind === 'rejected'
      ? { kind: 'reject', code: o.issues[0]?.code }
      : o.kind === 'create'
        ? { kind: 'create' }
        : { kind: o.adopted ? (o.kind === 'update' ? 'adopt-update' : 'adopt') : o.kind, serverId: o.serverId };
const ofRun = (o: SyncOutcome): Verdict | undefined =>
  o.kind === 'deferred'
    ? undefined
    : o.kind === 'rejected'
      ? { kind: 'reject', code: o.issues[0]?.code }
      : o.kind === 'created'
        ? { kind: 'create' }
        : { kind: o.adopted ? (o.kind === 'updated' ? 'adopt-update' : 'adopt') : o.kind === 'updated' ? 'update' : 'unchanged', serverId: o.serverId };
const ofCheck = (o: Inspection): Verdict | undefined =>
  o.kind === 'deferred'
    ? undefined
    : o.kind === 'rejected'
      ? { kind: 'reject', code: o.issues[0]?.code }
      : o.kind === 'absent'
        ? { kind: 'create' }
        : { kind: o.via === 'match' ? (o.equal ? 'adopt' : 'adopt-update') : o.equal ? 'unchanged' : 'update', serverId: o.serverId };

let sb: Sandbox;
let client: CareClient;
let res: CompiledResource;
let dir: string;
let caseNo = 0;
/** Coverage: the verdicts (and reject codes) the cases reached — the property fails if the generator stops reaching one. */
const reached = new Set<string>();

beforeAll(async () => {
  sb = await startSandbox({ tenants: [TENANT], observationsPerPatient: 0 });
  client = new CareClient(resolveConnection({ baseUrl: sb.url, apiKey: sb.credentials.apiKey, emrId: sb.credentials.emrId, tenantId: TENANT }), {
    retry: false,
  });
  dir = mkdtempSync(join(tmpdir(), 'care-etl-decide-'));
  writeFileSync(join(dir, 'patients.csv'), 'MRN\n');
  // A JSONata `match:` so that a mapped resource with two MRNs is rejected by its rule (`match-invalid`).
  writeFileSync(
    join(dir, 'mapping.yaml'),
    `version: 1\nsources:\n  patients: { path: patients.csv }\nresources:\n  - name: patient\n    type: Patient\n    from: patients\n    key: MRN\n    match: identifier[system="${SYSTEM}"].value\n    map: '{ "identifier": [{ "system": "${SYSTEM}", "value": MRN }] }'\n`,
  );
  res = compileMapping(await loadMapping(join(dir, 'mapping.yaml'), { env: {} })).resources.get('patient')!;
});
afterAll(async () => {
  await sb?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const patient = (mrn: string, family: string, extraMrn = false): Resource => ({
  resourceType: 'Patient',
  identifier: [{ system: SYSTEM, value: mrn }, ...(extraMrn ? [{ system: SYSTEM, value: `${mrn}-bis` }] : [])],
  name: [{ family }],
  active: true,
});

/** Writes the case's server copies and ledger entries; returns the mapped items. */
async function arrange(keys: KeySpec[], scope: LedgerScope, earlierRun: number): Promise<MappedResource[]> {
  const items: MappedResource[] = [];
  const rule = matchRuleOf(res);
  for (const [i, k] of keys.entries()) {
    const key = `c${caseNo}-k${i}`;
    const mapped = patient(key, 'Now', k.badMatch);
    const copies = {
      absent: [],
      equal: ['Now'],
      changed: ['Then'],
      'dup-equal': ['Now', 'Now'],
      'dup-mixed': ['Now', 'Then'],
      'dup-changed': ['Then', 'Else'],
    }[k.server];
    const ids: string[] = [];
    for (const family of copies) ids.push((await client.create('Patient', patient(key, family))).id);
    const base = { mapping: 'patient', key, resourceType: 'Patient', runId: earlierRun };
    const serverId = ids[0] ?? `gone-${key}`;
    if (k.ledger === 'synced' || k.ledger === 'ended') scope.recordSynced({ ...base, serverId, hash: contentHash(mapped) });
    if (k.ledger === 'synced-old') scope.recordSynced({ ...base, serverId, hash: contentHash(patient(key, 'Before')) });
    if (k.ledger === 'ended') scope.markEnded('patient', key, '2026-01-01T00:00:00.000Z');
    if (k.ledger === 'pending') scope.recordIntent({ ...base, hash: contentHash(mapped), matchValue: await rule.ofMapped(patient(key, 'Now')) });
    if (k.ledger === 'rejected') scope.recordRejected({ ...base, reason: 'refused earlier' });
    items.push({
      ok: true,
      mapping: 'patient',
      type: 'Patient',
      key,
      resource: mapped,
      origin: { source: 'patients', file: 'patients.csv', line: i + 2, record: i + 1 },
    });
  }
  return items;
}

function newSync(scope: LedgerScope, policy: ReconcilePolicy, runId: number, keepBodies: boolean): ResourceSync {
  const indexes = new ServerIndexes(client, new Map([['Patient', new Map([['patient', matchRuleOf(res)]])]]), { keepBodies, retry: { attempts: 1 } });
  return new ResourceSync(res, {
    client,
    scope,
    runId,
    limiter: AdaptiveLimiter.forRun({ concurrency: 2 }),
    retry: { attempts: 1 },
    now: new Date(),
    indexes,
    policy,
  });
}

async function verdicts(keys: KeySpec[], policy: ReconcilePolicy) {
  caseNo++;
  const ledger = Ledger.open(join(dir, `state-${caseNo}.db`));
  try {
    const scope = ledger.scope(sb.url, TENANT);
    const items = await arrange(keys, scope, scope.beginRun({ mappingFile: 'mapping.yaml', dryRun: false }));
    const plan = new Map<string, Verdict | undefined>();
    const drift = new Set<string>();
    const planner = newSync(scope, policy, 0, true);
    const tallyPlan = (item: MappedResource, o: PlanOutcome) => {
      if (o.kind === 'unchanged' && o.drift) drift.add(item.key);
      if (o.kind !== 'deferred') plan.set(item.key, ofPlan(o));
    };
    for (const item of items) tallyPlan(item, await planner.plan(item));
    for await (const { item, outcome } of planner.settleAmbiguousPlans()) tallyPlan(item, outcome);

    const check = new Map<string, Verdict | undefined>();
    const checker = newSync(scope, policy, 0, false);
    for (const item of items) {
      const v = ofCheck(await checker.inspect(item, false));
      if (v) check.set(item.key, v);
    }
    for await (const { item, inspection } of checker.settleAmbiguousInspections(false)) check.set(item.key, ofCheck(inspection));

    const run = new Map<string, Verdict | undefined>();
    const runner = newSync(scope, policy, scope.beginRun({ mappingFile: 'mapping.yaml', dryRun: false }), false);
    await runner.prepare();
    for (const item of items) {
      const v = ofRun(await runner.sync(item));
      if (v) run.set(item.key, v);
    }
    for await (const { item, outcome } of runner.reconcile()) run.set(item.key, ofRun(outcome));
    runner.flush();
    return { items, plan, check, run, drift };
  } finally {
    ledger.close();
  }
}

describe('decide(): plan = run = state check, per key (in-process sandbox)', () => {
  it(`${RUNS} random ledger × server × mapped states`, async () => {
    await fc.assert(
      fc.asyncProperty(caseSpec, async ({ keys, policy }) => {
        const { items, plan, check, run, drift } = await verdicts(keys, policy);
        for (const [i, item] of items.entries()) {
          const k = keys[i]!;
          const where = `${item.key} ${JSON.stringify(k)} policy ${policy}`;
          expect(plan.get(item.key), `plan = run: ${where}`).toEqual(run.get(item.key));
          expect(run.get(item.key), `every key decided: ${where}`).toBeDefined();
          reached.add(run.get(item.key)!.code ?? run.get(item.key)!.kind);
          const blind = policy === 'never' && (k.ledger === 'absent' || k.ledger === 'rejected');
          if (policy === 'always' || !(drift.has(item.key) || blind)) expect(check.get(item.key), `check = plan: ${where}`).toEqual(plan.get(item.key));
        }
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    );
    expect([...reached].sort()).toEqual(['adopt', 'adopt-update', 'create', 'duplicate-on-server', 'match-invalid', 'unchanged', 'update']);
  }, 120_000);
});
