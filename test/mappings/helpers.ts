import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CareClient } from '../../src/api/client.js';
import { resolveConnection, type ConnectionInput } from '../../src/api/connection.js';
import type { Resource } from '../../src/api/types.js';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import type { RunReport } from '../../src/pipeline/run-report.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';

/** An in-process sandbox, a connection to its first tenant, and temp state/rejects paths. */
export interface MappingRun {
  sb: Sandbox;
  connection: ConnectionInput;
  dir: string;
  run(mappingFile: string): Promise<RunReport>;
  client(): CareClient;
  close(): Promise<void>;
}

export async function startMappingRun(): Promise<MappingRun> {
  const sb = await startSandbox({ observationsPerPatient: 0 });
  const connection: ConnectionInput = { baseUrl: sb.url, apiKey: sb.credentials.apiKey, emrId: sb.credentials.emrId, tenantId: sb.credentials.tenants[0] };
  const dir = mkdtempSync(join(tmpdir(), 'care-etl-mappings-'));
  // The shipped mappings must not depend on the caller's CARE_* variables (the connection wins anyway).
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CARE_')));
  const clients: CareClient[] = [];
  return {
    sb,
    connection,
    dir,
    run: (mappingFile) => runPipeline({ mappingFile, env, connection, statePath: join(dir, 'state.db'), rejectsFile: join(dir, 'rejects.ndjson') }),
    client() {
      const c = new CareClient(resolveConnection(connection));
      clients.push(c);
      return c;
    },
    async close() {
      await Promise.all(clients.map((c) => c.close()));
      await sb.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function all(client: CareClient, type: 'Patient' | 'Practitioner' | 'CareTeam'): Promise<Resource[]> {
  const out: Resource[] = [];
  for await (const r of client.list(type, { pageSize: 200 })) out.push(r);
  return out;
}

/** Every CareTeam subject and member points at a stored Patient / Practitioner; returns the participant count. */
export function checkReferences(patients: Resource[], practitioners: Resource[], teams: Resource[]): { participants: number; dangling: string[] } {
  const patientIds = new Set(patients.map((p) => `Patient/${p.id}`));
  const practitionerIds = new Set(practitioners.map((p) => `Practitioner/${p.id}`));
  const dangling: string[] = [];
  let participants = 0;
  for (const t of teams) {
    const subject = (t.subject as { reference?: string } | undefined)?.reference;
    if (!subject || !patientIds.has(subject)) dangling.push(`${t.id}: subject ${subject}`);
    for (const p of (t.participant as { member?: { reference?: string } }[] | undefined) ?? []) {
      participants++;
      const m = p.member?.reference;
      if (!m || !practitionerIds.has(m)) dangling.push(`${t.id}: member ${m}`);
    }
  }
  return { participants, dangling };
}
