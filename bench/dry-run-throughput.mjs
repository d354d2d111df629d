// Dry-run throughput of the mapping pipeline (issues 3 and 15), on the same generated patient CSV:
//   pipeline            runPipeline({ dryRun: true }): stream CSV → key + map → ajv validation → NDJSON file, as shipped
//                       (JSONata expressions compiled to JS closures, the interpreter as fallback: issue 15)
//   pipeline-nocompile  the same with CARE_JSONATA_COMPILE=0: every expression on JSONata's interpreter — the
//                       previous version. Run back to back with `pipeline` in every round (order alternating between
//                       rounds); `compiledVsPrevious` is pipeline / pipeline-nocompile per round, [min, max], and of
//                       the medians. The two NDJSON files are checked byte-identical.
//   compiled            compileMapping(loadMapping(...)): evalKey + evalMap, sequentially, over rows pre-parsed in memory
//   interpreter         the same with the compiler off (JSONata's interpreter alone)
//   handwritten         a plain JS function producing the same resource, csv-parse streaming + JSON.stringify to a file
// Each measurement runs in a fresh child process (no JIT/GC state shared); the handwritten output is checked
// byte-for-byte against the pipeline's NDJSON.
// Usage: npm run build && node bench/dry-run-throughput.mjs [ROWS] [ROUNDS]   (env ROWS / ROUNDS work too;
// CPU_PROF=pipeline,interpreter also profiles one child of each listed mode with --cpu-prof and prints its top
// self-time functions to stderr). Figures: wall-clock rows/s and rows per CPU-second (all threads of the child:
// the CPU figure moves much less than the wall one when other jobs share the machine).
// `stages` (one child per round): CPU µs/row of each stage alone, in memory — source read (openSource), key+map
// compiled as the pipeline runs it (keyMap: keyNow / mapNow, no promise per row; the resource pruned) and on the
// interpreter (keyMapInterpreter), the handwritten mapPatient (handwrittenMap), ajv
// validation, JSON.stringify — to tell what the pipeline adds on top of its parts.
// `pipelineVsHandwrittenWithoutMap` (issue 28 item 5): the same CPU ratio with each side's own mapping taken out
// (pipeline µs/row − keyMap, handwritten µs/row − handwrittenMap, per round): the per-row overhead of the pipeline
// (reading, checks, validation, key index, output) against csv-parse + JSON.stringify, whatever the expressions cost.
// BASELINE_DIST=<dir> (another build's dist/, e.g. the commit before a change) adds `pipeline-baseline` (runPipeline
// from that build, back to back with `pipeline`; its NDJSON checked byte-identical), `pipelineVsBaseline`, and a
// `stages` child of that build per round (`stageCpuUsPerRowBaseline`).
// Expression time limit (issue 11): GUARD_COMPARE=1 adds `pipeline-noguard` / `interpreter-noguard`
// (CARE_EXPRESSION_TIMEOUT_MS=0: time limit off, stack limit kept), back to back with `pipeline-nocompile` /
// `interpreter` (the guard only matters on the interpreter); `guardOnVsOff` is on/off throughput per round.
import { spawnSync } from 'node:child_process';
import { createReadStream, createWriteStream, readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { loadAvg, makePatientFixture, median, profileChild } from './_patients-fixture.mjs';

const self = fileURLToPath(import.meta.url);
const [, , a2, a3, a4] = process.argv;
const BASELINE_DIST = process.env.BASELINE_DIST;

/** Modes run back to back in each round, the pair's order swapped every other round. */
function pairsOf(compareGuard) {
  const pairs = [BASELINE_DIST ? ['pipeline', 'pipeline-nocompile', 'pipeline-baseline'] : ['pipeline', 'pipeline-nocompile'], ['compiled', 'interpreter']];
  if (compareGuard) pairs.push(['pipeline-nocompile', 'pipeline-noguard'], ['interpreter', 'interpreter-noguard']);
  return pairs;
}

async function main() {
  const ROWS = Number(a2 ?? process.env.ROWS ?? 100_000);
  const ROUNDS = Number(a3 ?? process.env.ROUNDS ?? 3);
  const loadBefore = loadAvg();
  const fx = await makePatientFixture(ROWS);
  try {
    const compareGuard = process.env.GUARD_COMPARE === '1';
    const pairs = pairsOf(compareGuard);
    const MODES = [...new Set([...pairs.flat(), 'handwritten'])];
    const wall = Object.fromEntries(MODES.map((m) => [m, []]));
    const cpu = Object.fromEntries(MODES.map((m) => [m, []]));
    const stages = [];
    const stagesBaseline = [];
    for (let round = 0; round < ROUNDS; round++) {
      const ran = new Set();
      const order = [...pairs.flatMap((p) => (round % 2 === 0 ? p : [...p].reverse())), 'handwritten'];
      for (const mode of order) {
        if (ran.has(mode)) continue; // a mode in two pairs runs once per round
        ran.add(mode);
        const r = spawnChild(mode, fx.dir);
        if (r.rows !== ROWS) throw new Error(`${mode}: ${r.rows} rows out of ${ROWS} (${JSON.stringify(r)})`);
        wall[mode].push(r.rowsPerSec);
        cpu[mode].push(r.rowsPerCpuSec);
      }
      if (round === 0) {
        const p = sha256(join(fx.dir, 'out-pipeline', 'Patient.ndjson'));
        if (sha256(join(fx.dir, 'out-pipeline-nocompile', 'Patient.ndjson')) !== p)
          throw new Error('the pipeline with the compiler off produces another NDJSON');
        if (sha256(join(fx.dir, 'out-handwritten.ndjson')) !== p) throw new Error("the handwritten transform does not produce the pipeline's NDJSON");
        if (BASELINE_DIST && sha256(join(fx.dir, 'out-pipeline-baseline', 'Patient.ndjson')) !== p)
          throw new Error('the baseline build produces another NDJSON');
        if (compareGuard && sha256(join(fx.dir, 'out-pipeline-noguard', 'Patient.ndjson')) !== p)
          throw new Error('the pipeline without the time limit produces another NDJSON');
      }
      stages.push(spawnChild('stages', fx.dir).usPerRow);
      if (BASELINE_DIST) stagesBaseline.push(spawnChild('stages-baseline', fx.dir).usPerRow);
    }
    const profiled = (process.env.CPU_PROF ?? '')
      .split(',')
      .filter(Boolean)
      .map((m) => (m === '1' ? 'pipeline' : m));
    for (const m of profiled) profile(m, fx.dir);

    const med = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, Math.round(median(v))]));
    const ratio = (x, y) => Math.round((x / y) * 100) / 100;
    // Ratios per round (the modes ran back to back, under about the same load), reported as [min, max].
    const ratios = (o, x, y) => {
      const r = o[x].map((v, i) => ratio(v, o[y][i]));
      return [Math.min(...r), Math.max(...r)];
    };
    const compare = (x, y) => ({
      wall: ratios(wall, x, y),
      cpu: ratios(cpu, x, y),
      medianWall: ratio(median(wall[x]), median(wall[y])),
      medianCpu: ratio(median(cpu[x]), median(cpu[y])),
    });
    const medians = (st) => Object.fromEntries(Object.keys(st[0]).map((k) => [k, Math.round(median(st.map((s) => s[k])) * 10) / 10]));
    const stageMedians = medians(stages);
    console.log(
      JSON.stringify({
        bench: 'dry-run-throughput',
        rows: ROWS,
        rounds: ROUNDS,
        rowsPerSec: wall,
        rowsPerCpuSec: cpu,
        medianRowsPerSec: med(wall),
        medianRowsPerCpuSec: med(cpu),
        compiledVsPrevious: compare('pipeline', 'pipeline-nocompile'),
        evaluationCompiledVsInterpreter: compare('compiled', 'interpreter'),
        pipelineVsHandwritten: {
          wall: ratios(wall, 'pipeline', 'handwritten'),
          cpu: ratios(cpu, 'pipeline', 'handwritten'),
          medianWall: ratio(median(wall.pipeline), median(wall.handwritten)),
          medianCpu: ratio(median(cpu.pipeline), median(cpu.handwritten)),
        },
        pipelineVsHandwrittenWithoutMap: withoutMap(cpu, stages),
        ...(compareGuard
          ? {
              guardOnVsOff: Object.fromEntries(
                [
                  ['pipeline', 'pipeline-nocompile'],
                  ['interpreter', 'interpreter'],
                ].map(([name, on]) => [name, compare(on, `${name}-noguard`)]),
              ),
            }
          : {}),
        stageCpuUsPerRow: stageMedians,
        ...(BASELINE_DIST
          ? { pipelineVsBaseline: compare('pipeline', 'pipeline-baseline'), stageCpuUsPerRowBaseline: medians(stagesBaseline), baselineDist: BASELINE_DIST }
          : {}),
        outputIdentical: true,
        loadAvg1m: [loadBefore[0], loadAvg()[0]],
        node: process.version,
        cpus: os.cpus().length,
      }),
    );
  } finally {
    fx.cleanup();
  }
}

/** Per round: (handwritten − its map) / (pipeline − keyMap), in CPU µs per row; [min, max] and of the medians. */
function withoutMap(cpu, stages) {
  const us = (rowsPerCpuSec) => 1e6 / rowsPerCpuSec;
  const r = stages.map((st, i) => (us(cpu.handwritten[i]) - st.handwrittenMap) / (us(cpu.pipeline[i]) - st.keyMap));
  const round2 = (x) => Math.round(x * 100) / 100;
  const medUs = (mode, stage) => us(median(cpu[mode])) - median(stages.map((st) => st[stage]));
  return { cpu: [round2(Math.min(...r)), round2(Math.max(...r))], medianCpu: round2(medUs('handwritten', 'handwrittenMap') / medUs('pipeline', 'keyMap')) };
}

function spawnChild(mode, dir, extraArgs = []) {
  const r = spawnSync(process.execPath, [...extraArgs, self, '--child', mode, dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (r.status !== 0) throw new Error(`${mode} child failed (${r.status})`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

function sha256(file) {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

/** One extra child of `mode` under --cpu-prof; prints its top self-time functions (stderr). */
function profile(mode, dir) {
  profileChild(mode, (nodeArgs) => spawnChild(mode, dir, nodeArgs));
}

// ------------------------------------------------------------------------------------------- children

/** Wall-clock and CPU (all threads of the process: GC helpers and libuv included) rows/s since t0/c0. */
function timing(t0, c0, rows) {
  const seconds = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  const cpuSeconds = (c.user + c.system) / 1e6;
  return { rows, seconds, rowsPerSec: Math.round(rows / seconds), cpuSeconds, rowsPerCpuSec: Math.round(rows / cpuSeconds) };
}

async function child(modeArg, dir) {
  const mappingFile = join(dir, 'mapping.yaml');
  // -noguard: the expression time limit off (CARE_EXPRESSION_TIMEOUT_MS=0; JSONata's stack limit stays)
  const noGuard = modeArg.endsWith('-noguard');
  const mode = modeArg.replace(/-(noguard|nocompile|baseline)$/, '');
  const dist = modeArg.endsWith('-baseline') ? pathToFileURL(`${resolve(BASELINE_DIST)}/`).href : new URL('../dist/', import.meta.url).href;
  // the previous version: every expression on the interpreter (the -noguard modes measure the interpreter too)
  const compileExpressions = mode === 'compiled' || mode === 'stages' || modeArg === 'pipeline' || modeArg === 'pipeline-baseline';
  if (!compileExpressions) process.env.CARE_JSONATA_COMPILE = '0';
  const env = noGuard ? { CARE_EXPRESSION_TIMEOUT_MS: '0' } : {};
  if (mode === 'pipeline') {
    const { runPipeline } = await import(`${dist}pipeline/run-pipeline.js`);
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    const report = await runPipeline({
      mappingFile,
      dryRun: true,
      outDir: join(dir, `out-${modeArg}`),
      rejectsFile: join(dir, 'rejects.ndjson'),
      statePath: join(dir, 'state.db'),
      env,
    });
    const done = timing(t0, c0, report.totals.written);
    const c = report.totals;
    if (c.rejected) throw new Error(`${c.rejected} rows rejected: see ${report.rejectsFile}`);
    return { mode: modeArg, ...done };
  }

  if (mode === 'interpreter' || mode === 'compiled') {
    const { loadMapping } = await import(`${dist}mapping/load-mapping.js`);
    const { compileMapping } = await import(`${dist}mapping/compile-mapping.js`);
    const { parse } = await import('csv-parse/sync');
    const mapping = await loadMapping(mappingFile, { env });
    if (mapping.limits.expressionTimeoutMs !== (noGuard ? 0 : 5000)) throw new Error(`unexpected limits ${JSON.stringify(mapping.limits)}`);
    const compiled = compileMapping(mapping, { compileExpressions });
    const map = compiled.expressions.find((e) => e.role === 'map');
    if (map.compiled !== compileExpressions) throw new Error(`the map expression is ${map.compiled ? '' : 'not '}compiled in mode ${modeArg}`);
    const res = compiled.resources.get('patient');
    const rows = parse(readFileSync(join(dir, 'patients.csv')), { columns: true });
    const ctx = {
      now: new Date(),
      resolveRef() {
        throw new Error('no $ref in this mapping');
      },
    };
    let n = 0;
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    for (const row of rows) {
      const key = await res.evalKey(row);
      const resource = await res.evalMap(row, ctx);
      if (key && resource) n++;
    }
    return { mode: modeArg, ...timing(t0, c0, n) };
  }

  if (mode === 'stages') {
    const { loadMapping } = await import(`${dist}mapping/load-mapping.js`);
    const { compileMapping } = await import(`${dist}mapping/compile-mapping.js`);
    const { openSource } = await import(`${dist}sources/open-source.js`);
    const { validateResource } = await import(`${dist}validate/resource-validator.js`);
    const mapping = await loadMapping(mappingFile, { env: {} });
    const res = compileMapping(mapping, { compileExpressions: true }).resources.get('patient');
    const resInterpreted = compileMapping(mapping, { compileExpressions: false }).resources.get('patient');
    const ctx = { now: new Date(), resolveRef: () => undefined };
    const usPerRow = {};
    const stage = async (name, fn) => {
      const c0 = process.cpuUsage();
      const n = await fn();
      const c = process.cpuUsage(c0);
      usPerRow[name] = (c.user + c.system) / n;
    };
    const rows = [];
    await stage('source', async () => {
      for await (const item of openSource(mapping.sources.patients)) if (item.ok) rows.push(item.data);
      return rows.length;
    });
    // as the pipeline calls them (transform-source.ts): keyNow / mapNow, awaited only when they answer a promise;
    // the resources are dropped as the pipeline drops them (kept, 100k of them were copied by every scavenge)
    const keyMap = async (row) => {
      if (!res.keyNow) return (await res.evalKey(row), await res.evalMap(row, ctx)); // a baseline build before them
      const key = res.keyNow(row);
      if (typeof key !== 'string') await key;
      const resource = res.mapNow(row, ctx);
      return resource instanceof Promise ? await resource : resource;
    };
    await stage('keyMap', async () => {
      for (const row of rows) if (!(await keyMap(row))) throw new Error('no resource');
      return rows.length;
    });
    await stage('handwrittenMap', async () => {
      for (const row of rows) if (!mapPatient(row)) throw new Error('no resource');
      return rows.length;
    });
    await stage('keyMapInterpreter', async () => {
      for (const row of rows) {
        await resInterpreted.evalKey(row);
        await resInterpreted.evalMap(row, ctx);
      }
      return rows.length;
    });
    const resources = [];
    for (const row of rows) resources.push(await keyMap(row)); // for the next stages, not timed
    await stage('validate', async () => {
      for (const r of resources) if (validateResource('Patient', r).length) throw new Error('invalid');
      return resources.length;
    });
    let bytes = 0;
    await stage('stringify', async () => {
      for (const r of resources) bytes += `${JSON.stringify(r)}\n`.length;
      return resources.length;
    });
    return { mode, rows: rows.length, usPerRow, bytesPerRow: bytes / resources.length };
  }

  if (mode === 'handwritten') {
    const { parse } = await import('csv-parse');
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    const out = createWriteStream(join(dir, 'out-handwritten.ndjson'));
    const seen = new Set();
    let n = 0;
    for await (const row of createReadStream(join(dir, 'patients.csv')).pipe(parse({ columns: true, bom: true }))) {
      const key = row.MRN.trim();
      if (!key || seen.has(key)) throw new Error(`bad or duplicate key at row ${n + 1}`);
      seen.add(key);
      if (!out.write(`${JSON.stringify(mapPatient(row))}\n`)) await once(out, 'drain');
      n++;
    }
    out.end();
    await once(out, 'finish');
    return { mode, ...timing(t0, c0, n) };
  }
  throw new Error(`unknown mode ${mode}`);
}

// --------------------------------------------------- the example's `patient` mapping, written by hand

const GENDER = { M: 'male', F: 'female', U: 'unknown' };
const clean = (s) => (s && s.trim()) || undefined;

function name(v) {
  const s = v.replace(/\s+/g, ' ').trim();
  if (!s) return undefined;
  if (!/\p{Lu}/u.test(s) || /\p{Ll}/u.test(s)) return s;
  return s
    .toLowerCase()
    .replace(/(^|[\s\-'’])(\p{Ll})/gu, (_m, sep, ch) => sep + ch.toUpperCase())
    .replace(/(^|[\s\-'’])Mc(\p{Ll})/gu, (_m, sep, ch) => `${sep}Mc${ch.toUpperCase()}`);
}

function date(v) {
  const m = /^(\d{2})\/(\d{2})\/(\d{4})$/.exec(v.trim());
  if (!m) throw new Error('date-invalid');
  const [, mm, dd, yyyy] = m;
  const d = new Date(Date.UTC(+yyyy, +mm - 1, +dd));
  if (d.getUTCMonth() !== +mm - 1 || d.getUTCDate() !== +dd) throw new Error('date-invalid');
  return `${yyyy}-${mm}-${dd}`;
}

function phone(v) {
  const s = v.trim().replace(/\s*(?:ext\.?|extension|x|#)\s*\d{1,6}\s*$/i, '');
  if (!/^\+?[\d\s().\-/]+$/.test(s)) throw new Error('phone-invalid');
  const digits = s.replace(/\D/g, '');
  if (s.startsWith('+')) return `+${digits}`;
  if (digits.length === 10) return `+1${digits}`;
  if (digits.length === 11 && digits[0] === '1') return `+${digits}`;
  throw new Error('phone-invalid');
}

function mapPatient(r) {
  const p = { resourceType: 'Patient', identifier: [{ system: 'urn:lakeside:mrn', value: r.MRN }], active: true };
  const family = name(r.LAST);
  const given = name(r.FIRST);
  const n = { use: 'official' };
  if (family) n.family = family;
  if (given) n.given = [given];
  p.name = [n];
  const gender = GENDER[r.SEX];
  if (gender === undefined && clean(r.SEX)) throw new Error('lookup-miss');
  if (gender) p.gender = gender;
  if (clean(r.DOB)) p.birthDate = date(r.DOB);
  const telecom = [];
  if (clean(r.PHONE)) telecom.push({ system: 'phone', value: phone(r.PHONE), use: 'home' });
  const email = clean(r.EMAIL);
  if (email) telecom.push({ system: 'email', value: email });
  if (telecom.length) p.telecom = telecom;
  if (clean(r.ADDRESS)) {
    const a = { use: 'home', line: [r.ADDRESS] };
    if (clean(r.CITY)) a.city = r.CITY;
    if (clean(r.STATE)) a.state = r.STATE;
    if (clean(r.ZIP)) a.postalCode = r.ZIP;
    a.country = 'US';
    p.address = [a];
  }
  return p;
}

// Last, so that every module-level const above is initialised.
if (a2 === '--child') process.stdout.write(`${JSON.stringify(await child(a3, a4))}\n`);
else await main();
