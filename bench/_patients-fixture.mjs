// Shared by the mapping-pipeline benches (issue 3); the `_` prefix keeps run-all.js from running it.
// makePatientFixture writes a synthetic patient CSV (the columns of examples/clinic/data/patients.csv, every row valid) and a
// mapping with only the example's `patient` resource, into a fresh folder under os.tmpdir().
import { createWriteStream, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import os from 'node:os';
import { join } from 'node:path';

export const PATIENT_MAP = `{
  "identifier": [{ "system": "urn:lakeside:mrn", "value": MRN }],
  "active": true,
  "name": [{ "use": "official", "family": $name(LAST), "given": [$name(FIRST)] }],
  "gender": $lookup($gender, SEX),
  "birthDate": $date(DOB, "MM/DD/YYYY"),
  "telecom": [
    PHONE ? { "system": "phone", "value": $phone(PHONE), "use": "home" },
    EMAIL ? { "system": "email", "value": $clean(EMAIL) }
  ],
  "address": ADDRESS ? [{ "use": "home", "line": [ADDRESS], "city": CITY, "state": STATE, "postalCode": ZIP, "country": "US" }]
}`;

/** The `patient` resource of a mapping (under `resources:`), reading the source `patients`. */
export const PATIENT_RESOURCE_YAML = `  - name: patient
    type: Patient
    from: patients
    key: MRN
    map: |
${PATIENT_MAP.split('\n')
  .map((l) => `      ${l}`)
  .join('\n')}
`;

/** Patients, practitioners and care teams referring to both with `$ref` (run-window.mjs, slow-start.mjs). */
export const THREE_TYPE_MAPPING = `version: 1
sources:
  patients: { path: patients.csv }
  staff: { path: practitioners.csv }
  teams: { path: teams.csv }
lookups:
  gender: { M: male, F: female, U: unknown }
resources:
${PATIENT_RESOURCE_YAML}  - name: practitioner
    type: Practitioner
    from: staff
    key: NPI
    map: |
      { "identifier": [{ "system": "http://hl7.org/fhir/sid/us-npi", "value": NPI }], "active": true, "name": [{ "family": LAST, "given": [FIRST] }] }
  - name: careteam
    type: CareTeam
    from: teams
    key: TEAM
    match: name
    map: |
      {
        "status": "active",
        "name": "Care team " & TEAM,
        "subject": { "reference": $ref("patient", MRN) },
        "participant": [{ "member": { "reference": $ref("practitioner", NPI) } }]
      }
`;

export const MAPPING_YAML = `version: 1
sources:
  patients: { path: patients.csv }
lookups:
  gender: { M: male, F: female, U: unknown }
resources:
${PATIENT_RESOURCE_YAML}`;

const FIRST = ['Sofia', 'Liam', 'Ethan', 'Tomas', 'Amara', 'Noah', 'Mei', 'Olivia', 'Lucas', 'Ava', 'Mateo', 'Zoe', 'JAMES', 'Anne-Marie'];
const LAST = ['Yilmaz', 'Moreau', 'Lindqvist', 'Nakamura', 'Okafor', 'Garcia', "O'BRIEN", 'SMITH-JONES', 'McDonald', 'van der Berg', 'Kowalski', 'Haddad'];
const STREETS = ['Lakeview Dr', 'Elm Ct', 'Maple Ave', 'Oak St', 'Cedar Ln', 'Birch Rd'];
const CITIES = [
  ['Springfield', 'IL', '62704'],
  ['Madison', 'WI', '53703'],
  ['Columbus', 'OH', '43215'],
  ['Portland', 'OR', '97205'],
];
const SEX = ['F', 'M', 'F', 'M', 'U'];

/** Deterministic row i (1-based) — same file for the same N. */
export function patientRow(i) {
  const r = (i * 2654435761) >>> 0;
  const first = FIRST[r % FIRST.length];
  const last = LAST[(r >>> 4) % LAST.length];
  const mm = String(1 + ((r >>> 8) % 12)).padStart(2, '0');
  const dd = String(1 + ((r >>> 12) % 28)).padStart(2, '0');
  const yyyy = 1930 + ((r >>> 16) % 90);
  const a = String(200 + ((r >>> 3) % 800));
  const b = String((r >>> 7) % 10000).padStart(4, '0');
  const phone = [`555.${a}.${b}`, `(555) ${a}-${b}`, `555-${a}-${b}`, `+1 555 ${a} ${b}`][(r >>> 20) % 4];
  const [city, state, zip] = CITIES[(r >>> 22) % CITIES.length];
  return [
    String(i).padStart(8, '0'),
    first,
    last,
    `${mm}/${dd}/${yyyy}`,
    SEX[(r >>> 24) % SEX.length],
    phone,
    `${first.toLowerCase()}.${i}@example.org`,
    `${1 + ((r >>> 5) % 999)} ${STREETS[(r >>> 9) % STREETS.length]}`,
    city,
    state,
    zip,
  ];
}

export const HEADER = ['MRN', 'FIRST', 'LAST', 'DOB', 'SEX', 'PHONE', 'EMAIL', 'ADDRESS', 'CITY', 'STATE', 'ZIP'];

/** Creates `<tmp>/care-etl-bench-*` with patients.csv (n rows) and mapping.yaml; returns paths and a cleanup. */
export async function makePatientFixture(n, prefix = 'care-etl-bench-') {
  const dir = mkdtempSync(join(os.tmpdir(), prefix));
  const csv = join(dir, 'patients.csv');
  const mapping = join(dir, 'mapping.yaml');
  writeFileSync(mapping, MAPPING_YAML);
  const out = createWriteStream(csv);
  let chunk = `${HEADER.join(',')}\n`;
  for (let i = 1; i <= n; i++) {
    // ADDRESS never contains a comma or a quote: no quoting needed.
    chunk += `${patientRow(i).join(',')}\n`;
    if (chunk.length > 1 << 16) {
      if (!out.write(chunk)) await once(out, 'drain');
      chunk = '';
    }
  }
  out.end(chunk);
  await once(out, 'finish');
  return { dir, csv, mapping, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Machine load for the JSON line (1-minute load average) — other jobs share this machine. */
export function loadAvg() {
  return os.loadavg().map((x) => Math.round(x * 100) / 100);
}

export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Top self-time functions of the one .cpuprofile in `dir` (written by `node --cpu-prof --cpu-prof-dir dir`). */
/**
 * One extra child under --cpu-prof (`spawnChild(extraNodeArgs)` runs it and returns its `rowsPerSec`); prints its top
 * self-time functions to stderr.
 */
export function profileChild(label, spawnChild) {
  const profDir = mkdtempSync(join(os.tmpdir(), 'care-etl-prof-'));
  try {
    const r = spawnChild(['--cpu-prof', '--cpu-prof-dir', profDir]);
    process.stderr.write(`\n--cpu-prof of one ${label} run (${r.rowsPerSec} rows/s under the profiler), top self time:\n${summarizeCpuProfile(profDir)}\n`);
  } finally {
    rmSync(profDir, { recursive: true, force: true });
  }
}

export function summarizeCpuProfile(dir, top = 25) {
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  const prof = JSON.parse(readFileSync(join(dir, file), 'utf8'));
  const self = new Map(); // node id → self µs
  for (let i = 0; i < prof.samples.length; i++) self.set(prof.samples[i], (self.get(prof.samples[i]) ?? 0) + (prof.timeDeltas[i] ?? 0));
  const byFn = new Map();
  let total = 0;
  for (const n of prof.nodes) {
    const us = self.get(n.id) ?? 0;
    total += us;
    const cf = n.callFrame;
    const where = cf.url ? `${cf.url.replace(/^.*\/(node_modules|dist)\//, '$1/')}:${cf.lineNumber + 1}` : '';
    const name = `${cf.functionName || '(anonymous)'} ${where}`.trim();
    byFn.set(name, (byFn.get(name) ?? 0) + us);
  }
  return [...byFn]
    .sort((x, y) => y[1] - x[1])
    .slice(0, top)
    .map(([name, us]) => `${((100 * us) / total).toFixed(1).padStart(5)} %  ${(us / 1000).toFixed(0).padStart(6)} ms  ${name}`)
    .join('\n');
}

/**
 * `care-etl sandbox` in a child process (in-memory, no generated Observations, `latencyMs` per request).
 * Returns the runPipeline connection and `stop()`.
 */
export async function startSandboxProcess(latencyMs) {
  const { spawn } = await import('node:child_process');
  const { createInterface } = await import('node:readline');
  const { fileURLToPath } = await import('node:url');
  const root = fileURLToPath(new URL('..', import.meta.url));
  const child = spawn(process.execPath, ['bin/run.js', 'sandbox', '--port', '0', '--json', '--latency', String(latencyMs), '--observations-per-patient', '0'], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = await once(createInterface({ input: child.stdout }), 'line');
  const sb = JSON.parse(line);
  return {
    connection: { baseUrl: sb.url, apiKey: sb.apiKey, emrId: sb.emrId, tenantId: sb.tenantId },
    async stop() {
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}

/** The server's view of the benches' patients: how many, and how many were ever written twice (versionId ≠ 1). */
export async function serverPatientVersions(connection) {
  const { CareClient } = await import('../dist/api/client.js');
  const { resolveConnection } = await import('../dist/api/connection.js');
  const client = new CareClient(resolveConnection(connection), { retry: false });
  let count = 0;
  let notV1 = 0;
  try {
    for await (const p of client.list('Patient', { pageSize: 1000 })) {
      count++;
      if (p.meta?.versionId !== '1') notV1++;
    }
  } finally {
    await client.close();
  }
  return { count, notV1 };
}

/**
 * Runs `script --sandbox <cfg JSON>` (a bench's own sandbox mode, e.g. with generated Observations) and waits for
 * the URL line it prints. `stop()` closes its stdin, which the child takes as the end.
 */
export async function startScriptSandbox(script, cfg) {
  const { spawn } = await import('node:child_process');
  const { createInterface } = await import('node:readline');
  const p = spawn(process.execPath, [script, '--sandbox', JSON.stringify(cfg)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const rl = createInterface({ input: p.stdout });
  const line = await new Promise((resolve, reject) => {
    rl.once('line', resolve);
    p.once('exit', (code) => reject(new Error(`sandbox child exited ${code}`)));
  });
  return { url: JSON.parse(line).url, stop: () => p.stdin.end() };
}

/** Runs `node …args` (a bench's own child mode) and resolves with the JSON of the last line it prints; rejects on a non-zero exit. */
export async function runJsonChild(args) {
  const { spawn } = await import('node:child_process');
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    c.stdout.on('data', (d) => (out += d));
    c.on('error', reject);
    c.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').pop())) : reject(new Error(`child ${args.join(' ')} exited ${code}`))));
  });
}

/**
 * The `--sandbox` child of the export benches (`startScriptSandbox`'s other half): an in-process sandbox holding
 * `cfg.n` Observations made by `observationOf(i)` (added in batches of 5,000), optional `cfg.latencyMs`; prints its
 * URL as one JSON line and closes when its stdin ends.
 */
export async function serveObservations(cfg, observationOf) {
  const { startSandbox } = await import('../dist/sandbox/server.js');
  const sb = await startSandbox({ observationsPerPatient: 0 });
  for (let done = 0; done < cfg.n;) {
    const batch = [];
    for (let i = 0; i < 5000 && done < cfg.n; i++, done++) batch.push(observationOf(done));
    sb.addObservations('demo-clinic', batch);
  }
  if (cfg.latencyMs) sb.setFaults({ latencyMs: cfg.latencyMs });
  console.log(JSON.stringify({ url: sb.url }));
  process.stdin.resume();
  process.stdin.on('end', () => void sb.close().then(() => process.exit(0)));
}
