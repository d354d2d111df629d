// Wide layout (issue 13): 100,000 observations exported in the long layout and in the wide layout in the same
// run, against the same sandbox; peak RSS and wall time of the wide export as ratios to the long one.
//
// Processes (as bench/export-observations.mjs, for the same reason: Linux keeps ru_maxrss across execve): this
// one only orchestrates; the sandbox runs in a child (`--sandbox`); every export runs in a fresh child
// (`--export`) that reports `process.resourceUsage().maxRSS`. Long and wide alternate, REPEAT times each.
// Data: 5,000 patients × 20 observations (10 visit days × PHQ-9 + GAD-7, one visit in 10 answering PHQ-9 twice),
// so the wide file has ~50,000 rows of 2 instruments. Wide spools to an SQLite file in a private folder under
// the OS temp folder (SPOOL_DIR to choose another; it must not be a tmpfs for the RSS figure to mean "disk").
// Usage: npm run build && node bench/export-wide.mjs   (env N=100000 PAGE_SIZE=1000 REPEAT=3)
import { spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync, openSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PATIENTS = 5000;
import { median, serveObservations, startScriptSandbox } from './_patients-fixture.mjs';
const here = fileURLToPath(import.meta.url);

if (process.argv[2] === '--sandbox') await serveObservations(JSON.parse(process.argv[3]), observationOf);
else if (process.argv[2] === '--export') await exportChild(JSON.parse(process.argv[3]));
else await parent();

async function parent() {
  const N = Number(process.env.N ?? 100_000);
  const PAGE_SIZE = Number(process.env.PAGE_SIZE ?? 1000);
  const REPEAT = Number(process.env.REPEAT ?? 3);
  const runs = { long: [], wide: [] };
  const sb = await startScriptSandbox(here, { n: N });
  try {
    for (let i = 0; i < REPEAT; i++) {
      // Alternate which layout goes first, so a drift in the machine's load hits both alike.
      const order = i % 2 === 0 ? ['long', 'wide'] : ['wide', 'long'];
      for (const layout of order) runs[layout].push(await run({ url: sb.url, tenant: 'demo-clinic', pageSize: PAGE_SIZE, layout }));
    }
  } finally {
    sb.stop();
  }
  const best = (rs, k) => Math.min(...rs.map((r) => r[k]));
  const ratio = (a, b) => Number((a / b).toFixed(2));
  for (const layout of ['long', 'wide']) {
    const rs = runs[layout];
    console.log(
      JSON.stringify({
        bench: 'export-wide',
        layout,
        observations: N,
        pageSize: PAGE_SIZE,
        rows: rs[0].rows,
        fileMB: rs[0].fileMB,
        durationMs: rs.map((r) => r.durationMs),
        maxRssMB: rs.map((r) => r.maxRssMB),
        spoolMB: rs.map((r) => r.spoolMB),
      }),
    );
  }
  const summary = {
    bench: 'export-wide',
    case: 'wide/long',
    observations: N,
    rssRatioBest: ratio(best(runs.wide, 'maxRssMB'), best(runs.long, 'maxRssMB')),
    rssRatioMedian: ratio(median(runs.wide.map((r) => r.maxRssMB)), median(runs.long.map((r) => r.maxRssMB))),
    wallRatioBest: ratio(best(runs.wide, 'durationMs'), best(runs.long, 'durationMs')),
    wallRatioMedian: ratio(median(runs.wide.map((r) => r.durationMs)), median(runs.long.map((r) => r.durationMs))),
    wideMaxRssMB: Math.max(...runs.wide.map((r) => r.maxRssMB)),
    withinBudget: Math.max(...runs.wide.map((r) => r.maxRssMB)) <= 200,
    node: process.version,
    cpus: os.cpus().length,
    load1: Number(os.loadavg()[0].toFixed(2)),
  };
  console.log(JSON.stringify(summary));
  // Budget: the wide export stays within the export's memory budget (200 MB, bench/export-observations.mjs).
  if (!summary.withinBudget) {
    console.error('export-wide: wide export over 200 MB peak RSS');
    process.exitCode = 1;
  }
}

function run(cfg) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [here, '--export', JSON.stringify(cfg)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.setEncoding('utf8').on('data', (d) => (out += d));
    p.on('error', reject);
    p.on('close', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').pop())) : reject(new Error(`export child exited ${code}`))));
  });
}

/** i-th observation: patient i % 5000; per patient, visit v = k >> 1 (weekly), PHQ-9 then GAD-7; 1 visit in 10 repeats PHQ-9. */
function observationOf(i) {
  const p = i % PATIENTS;
  const k = Math.floor(i / PATIENTS);
  const visit = k >> 1;
  const phq = k % 2 === 0 || (visit % 10 === 3 && k % 4 === 3);
  const day = Date.UTC(2024, 0, 1) + visit * 7 * 86_400_000 + (p % 600) * 60_000;
  return {
    resourceType: 'Observation',
    status: 'final',
    category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'survey', display: 'Survey' }], text: 'Survey' }],
    code: {
      coding: [
        { system: 'http://loinc.org', code: phq ? '44261-6' : '70274-6', display: phq ? 'PHQ-9 total score [Reported]' : 'GAD-7 total score [Reported.PHQ]' },
      ],
      text: phq ? 'PHQ-9 total score' : 'GAD-7 total score',
    },
    subject: { reference: `Patient/pat-${p}` },
    effectiveDateTime: new Date(day + (k % 2) * 600_000).toISOString().replace('.000Z', 'Z'),
    performer: [{ reference: `Patient/pat-${p}` }],
    valueInteger: i % 22,
  };
}

async function exportChild(cfg) {
  const [{ CareClient }, { resolveConnection }, { exportObservations }, { Ledger }] = await Promise.all([
    import('../dist/api/client.js'),
    import('../dist/api/connection.js'),
    import('../dist/export/observation-exporter.js'),
    import('../dist/state/ledger.js'),
  ]);
  const client = new CareClient(resolveConnection({ baseUrl: cfg.url, apiKey: 'sandbox-key', emrId: 'sandbox-emr', tenantId: cfg.tenant }));
  const ledger = Ledger.open(':memory:');
  const scope = ledger.scope(cfg.url, cfg.tenant);
  const runId = scope.beginRun({ mappingFile: 'bench', dryRun: false });
  scope.transaction(() => {
    for (let i = 0; i < PATIENTS; i++)
      scope.recordSynced({ mapping: 'patient', key: String(i).padStart(8, '0'), resourceType: 'Patient', serverId: `pat-${i}`, hash: 'h', runId });
  });
  const spoolParent = mkdtempSync(join(process.env.SPOOL_DIR ?? os.tmpdir(), 'care-etl-bench-wide-'));
  const file = join(os.tmpdir(), `care-etl-bench-export-wide-${process.pid}.csv`);
  const output = createWriteStream(file, { fd: openSync(file, 'w', 0o600) });
  // The spool's size, read while the rows are written (it is removed when the export ends).
  let spoolMB = 0;
  const sizer = setInterval(() => {
    try {
      for (const d of readdirSync(spoolParent)) spoolMB = Math.max(spoolMB, Number((statSync(join(spoolParent, d, 'spool.db')).size / 1048576).toFixed(1)));
    } catch {
      // not there yet / already gone
    }
  }, 50);
  const report = await exportObservations({ client, scope, output, pageSize: cfg.pageSize, layout: cfg.layout, tempDir: spoolParent });
  clearInterval(sizer);
  const bytes = statSync(file).size;
  rmSync(file, { force: true });
  rmSync(spoolParent, { recursive: true, force: true });
  await client.close();
  ledger.close();
  console.log(
    JSON.stringify({
      layout: cfg.layout,
      rows: report.rows,
      observations: report.observations,
      pages: report.pages,
      durationMs: report.durationMs,
      fileMB: Number((bytes / 1048576).toFixed(1)),
      spoolMB: cfg.layout === 'wide' ? spoolMB : 0,
      maxRssMB: Math.round(process.resourceUsage().maxRSS / 1024),
    }),
  );
}
