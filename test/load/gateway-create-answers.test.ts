/**
 * Issue 24, item 4, in the loader (the real pipeline in-process over HTTP to the gateway of
 * test/helpers/gateway-server.ts, the ledger read back):
 * - a create STORED, then answered 200 with no usable body (empty, or an HTML page) is ambiguous: reconciled
 *   through a listing, never re-POSTed blindly — every key once on the server, after the run and a re-run;
 * - a create answered with an id the state RECORDS for another key is not recorded: with `--reconcile never` no
 *   listing came before the create (the other check, "listed before", cannot fire), so only the ledger can tell.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import type { ReconcilePolicy } from '../../src/mapping/types.js';
import { startGatewayServer, type GatewayOptions, type GatewayServer } from '../helpers/gateway-server.js';
import { makeClinic, mrn, patientsCsv, withLedger } from '../sync/helpers.js';

const TENANT = 't-gateway';
let server: GatewayServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function serve(opts: GatewayOptions): Promise<GatewayServer> {
  server = await startGatewayServer(opts);
  return server;
}

function run(s: GatewayServer, mappingFile: string, reconcile?: ReconcilePolicy) {
  return runPipeline({
    mappingFile,
    env: {},
    connection: { baseUrl: s.url, apiKey: 'k-gateway', emrId: 'emr', tenantId: TENANT },
    retry: { baseDelayMs: 1, maxDelayMs: 2 },
    reconcile,
  });
}

const entries = (state: string, s: GatewayServer) =>
  withLedger(state, s, TENANT, (scope) => ['patient', 'practitioner', 'careteam'].flatMap((m) => [...scope.entries(m)]));

/** The source key a stored resource carries (identifier value; a care team: its subject). */
const keyOf = (r: Record<string, unknown>) => (r.identifier as { value: string }[] | undefined)?.[0]?.value ?? (r.subject as { reference: string }).reference;

describe('a create stored, then answered 200 with no usable body', () => {
  for (const body of ['empty', 'html'] as const) {
    it(`${body === 'empty' ? 'an empty body' : 'an HTML page'} on every 3rd create: every key once, after the run and a re-run`, async () => {
      const s = await serve({ commitThen: { status: 200, every: 3, body } });
      const clinic = makeClinic(8, 2, 'care-etl-gateway-2xx-');
      expect([0, 1]).toContain((await run(s, clinic.mapping)).exitCode);
      expect((await run(s, clinic.mapping)).exitCode).toBe(0);
      expect(s.creates).toBeGreaterThanOrEqual(6); // the fault really happened, twice at least
      for (const [type, n] of [
        ['Patient', 8],
        ['Practitioner', 2],
        ['CareTeam', 8],
      ] as const) {
        expect(new Set(s.stored(type).map(keyOf)).size).toBe(n);
        expect(s.stored(type)).toHaveLength(n);
      }
      for (const e of entries(clinic.state, s)) {
        expect(e.status).toBe('synced');
        expect(s.stored(e.resourceType).some((x) => x.id === e.serverId)).toBe(true);
      }
    });
  }
});

describe('a create answered with an id the state records for another key', () => {
  it('is not recorded (no listing before it: --reconcile never); the row is reconciled to its own copy', async () => {
    const s = await serve({});
    const clinic = makeClinic(4, 2, 'care-etl-gateway-recorded-');
    expect((await run(s, clinic.mapping)).exitCode).toBe(0);
    const taken = entries(clinic.state, s).find((e) => e.resourceType === 'Patient' && e.key === mrn(1))!.serverId!;
    // A fifth patient: its create is stored under its own id, but answered with the id recorded for patient 1.
    clinic.writePatients(patientsCsv(5));
    s.answerIdOnce('Patient', taken);
    expect((await run(s, clinic.mapping, 'never')).exitCode).toBe(0);
    const patients = entries(clinic.state, s).filter((e) => e.resourceType === 'Patient');
    expect(patients).toHaveLength(5);
    expect(patients.find((e) => e.key === mrn(1))!.serverId).toBe(taken);
    for (const e of patients) {
      expect(e.status).toBe('synced');
      expect(keyOf(s.stored('Patient').find((x) => x.id === e.serverId)!)).toBe(e.key);
    }
    expect(s.stored('Patient')).toHaveLength(5);
  });
});
