// Parquet export (issue 27 item 2): N observations (default 1,000,000) exported as CSV and as Parquet in the same
// run, against the same sandbox; Parquet's wall time as a ratio to CSV's, and the peak RSS of each export
// (budget: ≤ 200 MB at 1M observations, the export's memory budget).
//
// Processes (as bench/export-wide.mjs): this one only orchestrates; the sandbox runs in a child (`--sandbox`); every
// export runs in a fresh child (`--export`) that reports `process.resourceUsage().maxRSS` (Linux keeps ru_maxrss
// across execve, so one child per export). CSV and Parquet alternate, REPEAT times each. The Parquet file's row
// count is read back from its footer by hyparquet (the independent reader) as a check.
// Usage: npm run build && node bench/export-parquet.mjs   (env N=1000000 PAGE_SIZE=1000 REPEAT=1 LAYOUT=long|wide)
import { spawn } from 'node:child_process';
import { createWriteStream, openSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { median, serveObservations, startScriptSandbox } from './_patients-fixture.mjs';

const PATIENTS = 5000;
const here = fileURLToPath(import.meta.url);

if (process.argv[2] === '--sandbox') await serveObservations(JSON.parse(process.argv[3]), observationOf);
else if (process.argv[2] === '--export') await exportChild(JSON.parse(process.argv[3]));
else await parent();

async function parent() {
  const N = Number(process.env.N ?? 1_000_000);
  const PAGE_SIZE = Number(process.env.PAGE_SIZE ?? 1000);
  const REPEAT = Number(process.env.REPEAT ?? 1);
  const LAYOUT = process.env.LAYOUT ?? 'long';
  const runs = { csv: [], parquet: [] };
  const sb = await startScriptSandbox(here, { n: N });
  try {
    for (let i = 0; i < REPEAT; i++) {
      // Alternate which format goes first, so a drift in the machine's load hits both alike.
      const order = i % 2 === 0 ? ['csv', 'parquet'] : ['parquet', 'csv'];
      for (const format of order) runs[format].push(await run({ url: sb.url, tenant: 'demo-clinic', pageSize: PAGE_SIZE, layout: LAYOUT, format }));
    }
  } finally {
    sb.stop();
  }
  for (const format of ['csv', 'parquet']) {
    const rs = runs[format];
    console.log(
      JSON.stringify({
        bench: 'export-parquet',
        format,
        layout: LAYOUT,
        observations: N,
        rows: rs[0].rows,
        fileMB: rs[0].fileMB,
        durationMs: rs.map((r) => r.durationMs),
        maxRssMB: rs.map((r) => r.maxRssMB),
      }),
    );
  }
  const parquetMax = Math.max(...runs.parquet.map((r) => r.maxRssMB));
  const summary = {
    bench: 'export-parquet',
    case: 'parquet/csv',
    layout: LAYOUT,
    observations: N,
    wallRatioMedian: Number((median(runs.parquet.map((r) => r.durationMs)) / median(runs.csv.map((r) => r.durationMs))).toFixed(2)),
    sizeRatio: Number((runs.parquet[0].fileMB / runs.csv[0].fileMB).toFixed(2)),
    parquetMaxRssMB: parquetMax,
    csvMaxRssMB: Math.max(...runs.csv.map((r) => r.maxRssMB)),
    parquetRowsInFooter: runs.parquet[0].footerRows,
    parquetRowsChecked: runs.parquet[0].checked,
    withinBudget: parquetMax <= 200,
    node: process.version,
    cpus: os.cpus().length,
    load1: Number(os.loadavg()[0].toFixed(2)),
  };
  console.log(JSON.stringify(summary));
  if (!summary.withinBudget) {
    console.error('export-parquet: Parquet export over 200 MB peak RSS');
    process.exitCode = 1;
  }
  if (LAYOUT === 'long' && (runs.parquet[0].footerRows !== runs.parquet[0].rows || runs.parquet[0].checked !== N)) {
    console.error('export-parquet: the Parquet file read back by hyparquet does not hold every observation with its exact values');
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

/** i-th observation: patient i % 5000, PHQ-9 and GAD-7 alternating weekly visits; one in 50 has no score (a null). */
function observationOf(i) {
  const p = i % PATIENTS;
  const k = Math.floor(i / PATIENTS);
  const phq = k % 2 === 0;
  const day = Date.UTC(2024, 0, 1) + (k >> 1) * 7 * 86_400_000 + (p % 600) * 60_000;
  return {
    resourceType: 'Observation',
    id: `obs-${i}`,
    status: 'final',
    category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'survey', display: 'Survey' }], text: 'Survey' }],
    code: {
      coding: [{ system: 'http://loinc.org', code: phq ? '44261-6' : '70274-6', display: phq ? 'PHQ-9 total score [Reported]' : 'GAD-7 total score' }],
      text: phq ? 'PHQ-9 total score' : 'GAD-7 total score',
    },
    subject: { reference: `Patient/pat-${p}` },
    effectiveDateTime: new Date(day + (k % 2) * 600_000).toISOString().replace('.000Z', 'Z'),
    performer: [{ reference: `Patient/pat-${p}` }],
    ...(i % 50 === 7 ? {} : { valueInteger: i % 22 }),
  };
}

async function exportChild(cfg) {
  const [{ CareClient }, { resolveConnection }, { exportObservations }, { Ledger }, hyparquet] = await Promise.all([
    import('../dist/api/client.js'),
    import('../dist/api/connection.js'),
    import('../dist/export/observation-exporter.js'),
    import('../dist/state/ledger.js'),
    import('hyparquet'),
  ]);
  const client = new CareClient(resolveConnection({ baseUrl: cfg.url, apiKey: 'sandbox-key', emrId: 'sandbox-emr', tenantId: cfg.tenant }));
  const ledger = Ledger.open(':memory:');
  const scope = ledger.scope(cfg.url, cfg.tenant);
  const runId = scope.beginRun({ mappingFile: 'bench', dryRun: false });
  scope.transaction(() => {
    for (let i = 0; i < PATIENTS; i++)
      scope.recordSynced({ mapping: 'patient', key: String(i).padStart(8, '0'), resourceType: 'Patient', serverId: `pat-${i}`, hash: 'h', runId });
  });
  const file = join(os.tmpdir(), `care-etl-bench-export-parquet-${process.pid}.${cfg.format}`);
  const output = createWriteStream(file, { fd: openSync(file, 'w', 0o600) });
  const report = await exportObservations({ client, scope, output, pageSize: cfg.pageSize, layout: cfg.layout, format: cfg.format, tempDir: os.tmpdir() });
  const maxRssMB = Math.round(process.resourceUsage().maxRSS / 1024); // before the check reads the footer
  const bytes = statSync(file).size;
  const check = cfg.format === 'parquet' && cfg.layout === 'long' ? await checkParquet(hyparquet, file) : undefined;
  rmSync(file, { force: true });
  await client.close();
  ledger.close();
  console.log(
    JSON.stringify({
      format: cfg.format,
      rows: report.rows,
      durationMs: report.durationMs,
      fileMB: Number((bytes / 1048576).toFixed(1)),
      maxRssMB,
      ...check,
    }),
  );
}

/**
 * The long Parquet file read back by hyparquet (the independent reader), 100k rows at a time: every row's score,
 * effective instant and LOINC code equal to the observation it came from (its id names it). Runs after maxRSS is read.
 */
async function checkParquet({ asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects }, file) {
  const buf = await asyncBufferFromFile(file);
  const meta = await parquetMetadataAsync(buf);
  const footerRows = Number(meta.num_rows);
  const seen = new Set();
  for (let start = 0; start < footerRows; start += 100_000) {
    const rows = await parquetReadObjects({
      file: buf,
      metadata: meta,
      rowStart: start,
      rowEnd: Math.min(footerRows, start + 100_000),
      columns: ['id', 'loinc', 'effective', 'value'],
    });
    for (const r of rows) {
      const i = Number(r.id.slice(4));
      const o = observationOf(i);
      const want = o.valueInteger === undefined ? null : BigInt(o.valueInteger);
      if (r.value !== want || r.effective.getTime() !== Date.parse(o.effectiveDateTime) || r.loinc !== o.code.coding[0].code || seen.has(i))
        throw new Error(`export-parquet: row of ${r.id} differs from its observation`);
      seen.add(i);
    }
  }
  return { footerRows, checked: seen.size };
}
