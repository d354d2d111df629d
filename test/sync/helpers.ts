/**
 * Issue 4 (safe re-runs) test helpers: generated clinic exports in temp folders, the server's resources
 * listed over HTTP, and the ledger read back. Nothing here stands in for the behaviour under test.
 */
import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CareClient } from '../../src/api/client.js';
import { resolveConnection } from '../../src/api/connection.js';
import type { Resource } from '../../src/api/types.js';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import type { RunReport } from '../../src/pipeline/run-report.js';
import type { RunOptions } from '../../src/pipeline/run-options.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { Ledger, type LedgerScope } from '../../src/state/ledger.js';
import { ROOT } from '../helpers/cli.js';

export const FIXTURES = join(ROOT, 'test', 'fixtures', 'sync');
export const MRN_SYSTEM = 'urn:sync-test:mrn';

const FIRST = ['Sofia', 'Liam', 'Ethan', 'Tomas', 'Amara', 'Noah', 'Mei', 'Olivia', 'Lucas', 'Ava'];
const LAST = ['Yilmaz', 'Moreau', 'Lindqvist', 'Nakamura', 'Okafor', 'Garcia', 'Kowalski', 'Haddad'];
const ROLES = ['Psychiatrist', 'Clinical Psychologist', 'Licensed Clinical Social Worker', 'Psychiatric Nurse Practitioner'];

export const mrn = (i: number): string => String(i).padStart(6, '0');
export const npi = (j: number): string => `19${String(j).padStart(8, '0')}`;

/** Patient row i (1-based), columns MRN,FIRST,LAST,DOB,SEX,PHONE; `rev` changes the phone number (a content change). */
export function patientRow(i: number, rev = 0): string[] {
  const r = (i * 2654435761) >>> 0;
  const dob = `${String(1 + (r % 12)).padStart(2, '0')}/${String(1 + ((r >>> 5) % 28)).padStart(2, '0')}/${1940 + ((r >>> 10) % 60)}`;
  const phone = `555-${String(200 + ((r >>> 3) % 700))}-${String((i + rev * 7919) % 10000).padStart(4, '0')}`;
  return [mrn(i), FIRST[i % FIRST.length]!, LAST[(r >>> 4) % LAST.length]!, dob, ['F', 'M', 'U'][i % 3]!, phone];
}

export function patientsCsv(n: number, rev: (i: number) => number = () => 0): string {
  let s = 'MRN,FIRST,LAST,DOB,SEX,PHONE\n';
  for (let i = 1; i <= n; i++) s += `${patientRow(i, rev(i)).join(',')}\n`;
  return s;
}

export function practitionersCsv(m: number): string {
  let s = 'NPI,FIRST,LAST,ROLE\n';
  for (let j = 1; j <= m; j++) s += `${npi(j)},${FIRST[(j + 3) % FIRST.length]},${LAST[j % LAST.length]},${ROLES[j % ROLES.length]}\n`;
  return s;
}

export interface Assignment {
  mrn: string;
  npi: string;
  role: string;
  start: string;
  end?: string;
}

/** 1–3 practitioners per patient, deterministic. */
export function defaultAssignments(n: number, m: number): Assignment[] {
  const out: Assignment[] = [];
  for (let i = 1; i <= n; i++) {
    const js = [i % m, (i + 1) % m, (i + 2) % m].slice(0, 1 + (i % 3)).map((j) => j + 1);
    for (const j of js) out.push({ mrn: mrn(i), npi: npi(j), role: ROLES[j % ROLES.length]!, start: `2025-0${1 + (j % 9)}-1${j % 10}` });
  }
  return out;
}

export function assignmentsCsv(rows: Assignment[]): string {
  return `MRN;NPI;ROLE;START;END\n${rows.map((a) => `${a.mrn};${a.npi};${a.role};${a.start};${a.end ?? ''}`).join('\n')}\n`;
}

export interface ClinicDir {
  dir: string;
  mapping: string;
  state: string;
  rejects: string;
  writePatients(csv: string): void;
  writePractitioners(csv: string): void;
  writeAssignments(rows: Assignment[]): void;
}

/** A temp folder with a copy of clinic-mapping.yaml and data/*.csv (n patients, m practitioners). */
export function makeClinic(n: number, m: number, prefix = 'care-etl-sync-', mappingFixture = 'clinic-mapping.yaml'): ClinicDir & { assignments: Assignment[] } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  mkdirSync(join(dir, 'data'));
  copyFileSync(join(FIXTURES, mappingFixture), join(dir, 'mapping.yaml'));
  const c: ClinicDir = {
    dir,
    mapping: join(dir, 'mapping.yaml'),
    state: join(dir, '.care-etl', 'state.db'),
    rejects: join(dir, '.care-etl', 'rejects.ndjson'),
    writePatients: (csv) => writeFileSync(join(dir, 'data', 'patients.csv'), csv),
    writePractitioners: (csv) => writeFileSync(join(dir, 'data', 'practitioners.csv'), csv),
    writeAssignments: (rows) => writeFileSync(join(dir, 'data', 'assignments.csv'), assignmentsCsv(rows)),
  };
  const assignments = defaultAssignments(n, m);
  c.writePatients(patientsCsv(n));
  c.writePractitioners(practitionersCsv(m));
  c.writeAssignments(assignments);
  return { ...c, assignments };
}

/** A temp folder with a copy of patients-mapping.yaml and patients.csv. */
export function makePatients(n: number, prefix = 'care-etl-sync-p-'): { dir: string; mapping: string; state: string; writePatients(csv: string): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  copyFileSync(join(FIXTURES, 'patients-mapping.yaml'), join(dir, 'mapping.yaml'));
  const writePatients = (csv: string) => writeFileSync(join(dir, 'patients.csv'), csv);
  writePatients(patientsCsv(n));
  return { dir, mapping: join(dir, 'mapping.yaml'), state: join(dir, '.care-etl', 'state.db'), writePatients };
}

export function connectionOf(sb: Sandbox, tenantId: string) {
  return { baseUrl: sb.url, apiKey: sb.credentials.apiKey, emrId: sb.credentials.emrId, tenantId };
}

/** runPipeline in-process against the sandbox; no CARE_* from the outer environment. */
export function run(sb: Sandbox, tenantId: string, mappingFile: string, extra: Partial<RunOptions> = {}): Promise<RunReport> {
  return runPipeline({ mappingFile, env: {}, connection: connectionOf(sb, tenantId), ...extra });
}

/** Every resource of a type on the server (call with faults off). */
export async function listAll(sb: Sandbox, tenantId: string, type: 'Patient' | 'Practitioner' | 'CareTeam'): Promise<Resource[]> {
  const client = new CareClient(resolveConnection(connectionOf(sb, tenantId)), { retry: false });
  try {
    const out: Resource[] = [];
    for await (const r of client.list(type, { pageSize: 1000 })) out.push(r);
    return out;
  } finally {
    await client.close();
  }
}

export const identifierValue = (r: Resource): string => (r.identifier as { value: string }[])[0]!.value;

/** identifier value → how many resources on the server carry it. */
export function countBy<T>(items: T[], key: (t: T) => string): Map<string, number> {
  const m = new Map<string, number>();
  for (const it of items) m.set(key(it), (m.get(key(it)) ?? 0) + 1);
  return m;
}

export const duplicates = (m: Map<string, number>): string[] => [...m].filter(([, n]) => n > 1).map(([k]) => k);

/** Opens the ledger of (server, tenant), runs `fn`, closes it; the file must not be in use (exclusive lock). */
export function withLedger<T>(statePath: string, server: { url: string }, tenantId: string, fn: (scope: LedgerScope) => T): T {
  const ledger = Ledger.open(statePath);
  try {
    return fn(ledger.scope(server.url, tenantId));
  } finally {
    ledger.close();
  }
}

/** Polls `cond` every `everyMs` until true (no timing assertion: the test's own timeout bounds it). */
export async function until(cond: () => boolean, everyMs = 5): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, everyMs));
}

/**
 * A loopback HTTP proxy in front of the sandbox that records `METHOD /path?query` of every request, so a
 * test can tell which stage a run is in (e.g. the reconciliation's `GET /CareTeam?_count=500`). Bodies and
 * answers pass through untouched; a connection the sandbox drops is dropped towards the client too.
 */
export async function startRecordingProxy(target: string): Promise<{ url: string; log: string[]; timeline: string[]; close(): Promise<void> }> {
  const { createServer, request, Agent } = await import('node:http');
  const t = new URL(target);
  const agent = new Agent({ keepAlive: true });
  const log: string[] = [];
  /** `> METHOD /path?query` when a request arrives, `< METHOD /path?query` when its answer has been sent: the order the server saw. */
  const timeline: string[] = [];
  const server = createServer((req, res) => {
    log.push(`${req.method} ${req.url}`);
    timeline.push(`> ${req.method} ${req.url}`);
    res.once('finish', () => timeline.push(`< ${req.method} ${req.url}`));
    const up = request({ host: t.hostname, port: t.port, method: req.method, path: req.url, headers: req.headers, agent }, (ur) => {
      res.writeHead(ur.statusCode!, ur.headers);
      ur.pipe(res);
      ur.on('error', () => res.destroy());
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    log,
    timeline,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
        agent.destroy();
      }),
  };
}
