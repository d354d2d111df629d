import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { parse } from 'csv-parse/sync';
import { CareClient } from '../../src/api/client.js';
import { resolveConnection } from '../../src/api/connection.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { Ledger } from '../../src/state/ledger.js';
import { runCliInProcess, workerEnv } from '../helpers/cli.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const FIXTURES = fileURLToPath(new URL('../fixtures/export/', import.meta.url));
export const TENANT = 'demo-clinic';

/** A fresh folder holding a copy of the export fixtures (the `.care-etl/` folder is created beside them). */
export function workDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'care-etl-export-'));
  for (const f of readdirSync(FIXTURES)) copyFileSync(join(FIXTURES, f), join(dir, f));
  return dir;
}

export function clientFor(sb: Sandbox, opts: ConstructorParameters<typeof CareClient>[1] = {}): CareClient {
  const settings = resolveConnection({ baseUrl: sb.url, apiKey: sb.credentials.apiKey, emrId: sb.credentials.emrId, tenantId: TENANT });
  return new CareClient(settings, opts);
}

/** CARE_* for the sandbox; every other CARE_* variable of the caller's environment removed, and `CI` (it refuses the embedded sandbox). */
export function envFor(sb: Sandbox | undefined): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(workerEnv())) if (!k.startsWith('CARE_') && k !== 'CI') env[k] = v;
  if (sb) Object.assign(env, { CARE_BASE_URL: sb.url, CARE_API_KEY: sb.credentials.apiKey, CARE_EMR_ID: sb.credentials.emrId, CARE_TENANT_ID: TENANT });
  return env;
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the built CLI (`node bin/run.js …`). */
export function cli(args: string[], opts: { cwd: string; env: NodeJS.ProcessEnv }): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(ROOT, 'bin/run.js'), ...args], { cwd: opts.cwd, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** As `cli`, inside this worker (`runCliInProcess`, test/helpers/cli.ts): `env` is the whole environment, as for `cli`. */
export async function cliInProcess(args: string[], opts: { cwd: string; env: NodeJS.ProcessEnv }): Promise<CliResult> {
  const unset = Object.fromEntries(Object.keys(workerEnv()).map((k) => [k, undefined]));
  const { code, stdout, stderr } = await runCliInProcess(args, { cwd: opts.cwd, env: { ...unset, ...opts.env } });
  return { code, stdout, stderr };
}

export const parseCsv = (text: string): Record<string, string>[] =>
  parse(text, { columns: true, bom: true, skip_empty_lines: true }) as Record<string, string>[];

/** A minimal Observation like the ones the platform stores. */
export function observation(patientId: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    resourceType: 'Observation',
    status: 'final',
    category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'survey' }], text: 'Survey' }],
    code: { coding: [{ system: 'http://loinc.org', code: '44261-6' }], text: 'PHQ-9 total score' },
    subject: { reference: `Patient/${patientId}` },
    effectiveDateTime: '2024-03-01T10:00:00Z',
    performer: [{ reference: `Patient/${patientId}` }],
    valueInteger: 7,
    ...extra,
  };
}

/** N observations with explicit ids and an old `meta.lastUpdated` (as if stored long ago). */
export function oldObservations(n: number, prefix = 'old', patientId = 'p0'): Record<string, unknown>[] {
  return Array.from({ length: n }, (_, i) =>
    observation(patientId, { id: `${prefix}-${i}`, meta: { versionId: '1', lastUpdated: '2024-06-01T00:00:00.000Z' }, valueInteger: i }),
  );
}

/** Collects what an export writes. */
export class Collect extends Writable {
  chunks: Buffer[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.chunks.push(Buffer.from(chunk));
    cb();
  }
  get text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

/**
 * Creates patients through the API and records them in a ledger as the loader would (`recordSynced`):
 * source key (MRN) → server id. Returns MRN → server id.
 */
export async function loadPatients(client: CareClient, ledgerPath: string, scopeUrl: string, mrns: string[]): Promise<Map<string, string>> {
  const ids = new Map<string, string>();
  const ledger = Ledger.open(ledgerPath);
  try {
    const scope = ledger.scope(scopeUrl, TENANT);
    const runId = scope.beginRun({ mappingFile: 'mapping.yaml', dryRun: false });
    for (const mrn of mrns) {
      const p = await client.create('Patient', {
        resourceType: 'Patient',
        identifier: [{ system: 'urn:clinic:mrn', value: mrn }],
        name: [{ family: `F${mrn}` }],
      });
      scope.recordSynced({ mapping: 'patient', key: mrn, resourceType: 'Patient', serverId: p.id, versionId: p.meta?.versionId, hash: 'h', runId });
      ids.set(mrn, p.id);
    }
    scope.finishRun(runId, 'completed');
  } finally {
    ledger.close();
  }
  return ids;
}
