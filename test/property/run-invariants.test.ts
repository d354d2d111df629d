/**
 * Issue 11 item 7 — a permanent adversarial, property-based suite for `runPipeline` (fast-check).
 *
 * Generated CSV / JSON / NDJSON exports — quotes, CR/LF/CRLF/lone CR inside and between records, BOMs, empty and
 * whitespace-only lines, ragged rows, malformed quotes, an unclosed quote at the end, duplicate and missing keys,
 * astral characters, lone surrogates (JSON), 12 k-character cells, 100–300-row files crossing the reader's
 * 64 KiB chunks, id-like numbers (`00123`, `12345678901234567890`, `1E400`), nested objects, duplicate JSON
 * object keys, invalid / non-object / blank NDJSON lines, JSON under `records:` (a path or a JSONata expression);
 * CSV options: `;` tab `|` delimiters, `#` comments, `skipEmptyLines: false`, latin1 — go through small generated
 * mappings: a Patient mapping whose key (`MRN`, `$trim`, `$uppercase`), identifier, name, gender (conditional,
 * `$lookup` with/without default), birthDate (`$date`), extensions (`$string`, and `$string($number(AGE))`, which
 * throws on non-numeric text) and `onMissing` vary, sometimes a map that produces nothing, and optionally a
 * CareTeam mapping per patient key (grouped with `groupBy` or not) referring to the patient with `$ref`.
 *
 * The reading rules (what counts as a record: blank lines, ragged rows, comments, BOMs …) are spelled out at the
 * top of ./generators.ts, which also holds the model: the exact records a reader must yield and what each becomes.
 *
 * Invariants
 *  1. Nothing lost, nothing invented: `read` = the number of records the generator wrote; written (dry run) or
 *     created/updated/unchanged (live) + rejected + skipped (a map producing nothing) = read — for `groupBy` mappings: row-level rejects + one outcome
 *     per group, and the groups' rows add up to the rows read. The rejects file has one NDJSON line per reject,
 *     with non-empty `issues`, at the record, line (CSV/NDJSON) and stage the model expects and, for source
 *     rejects, the record's own `raw` text. The resources written are exactly those the model computes (in order).
 *  2. No uncaught exception or unhandled rejection (process listeners, checked after every run): `runPipeline`
 *     resolves with a report — or, only for the whole-source faults the generator marks `fatal`, rejects with a
 *     CareEtlError (exit code 2) naming the source. Fatal: CSV with a duplicate / empty / blank / `__proto__`
 *     header name, a malformed quote in the header, or (skipEmptyLines off) an empty first line; JSON with a syntax
 *     error anywhere, an empty file, text after the document, a top level that is not an array, a missing `records`
 *     path. Everything else (ragged rows, bad quotes, bad NDJSON lines, non-object elements) is a reject.
 *  3. Idempotent: a second dry run gives the same report and byte-identical output and rejects. Against the
 *     in-process sandbox (fresh tenant per case; a third of the cases with 503s, dropped connections and creates
 *     stored but answered by a reset in the first run): the server holds exactly the mapped patients, each once;
 *     a second run creates, updates and ends nothing; a third run with the state file lost creates nothing.
 * Each property was seen to fail with the invariant deliberately broken; coverage tallies make a property fail
 * when its generator stops reaching the cases listed (checked from 300 runs up).
 *
 * Known product bugs are `it.fails` properties at the end (see their comments): UTF-16LE CSV (issue 16). `"__proto__"` in JSON,
 * found here, is fixed (src/sources/json-source.ts `ownProtoMembers`, `evalKey` reading own fields only).
 *
 * Runs: CARE_PROPERTY_RUNS generated cases in total (default 2000 — the `npm test` count — split over the five
 * properties; ~30 s on this 2-core machine). Seed: CARE_PROPERTY_SEED (default fixed; a failure prints seed and
 * path to replay it). CARE_PROPERTY_DUMP=<folder> keeps a copy of each failing case's folder.
 * The larger count:   CARE_PROPERTY_RUNS=20000 npx vitest run test/property
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CareClient } from '../../src/api/client.js';
import { resolveConnection } from '../../src/api/connection.js';
import { CareEtlError } from '../../src/core/issues.js';
import type { RejectRecord } from '../../src/transform/reject-record.js';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import type { RunReport } from '../../src/pipeline/run-report.js';
import type { RunOptions } from '../../src/pipeline/run-options.js';
import { startSandbox, type FaultOptions, type Sandbox } from '../../src/sandbox/server.js';
import {
  csvCase,
  csvUtf16Case,
  jsonCase,
  mappingSpec,
  mappingYaml,
  model,
  ndjsonCase,
  isWellFormed,
  protoRecords,
  smallCase,
  writeJson,
  type ExpectedRecord,
  type Fate,
  type MappingSpec,
  type ModelResult,
  type SourceCase,
} from './generators.js';

const TOTAL = Math.max(10, Number(process.env.CARE_PROPERTY_RUNS ?? 2000));
const SEED = Number(process.env.CARE_PROPERTY_SEED ?? 20_251_124);
/** A per-format case is run twice (idempotence) one time in four; the mixed property re-runs every case. */
const rerunSometimes = fc.nat({ max: 3 }).map((n) => n === 0);
/** Share of the total per property (sums to 1). */
const SHARE = { csv: 0.34, ndjson: 0.2, json: 0.2, mixed: 0.18, live: 0.08 } as const;
const runsOf = (k: keyof typeof SHARE): number => Math.max(1, Math.round(TOTAL * SHARE[k]));
/** Generous per-test time limit: scales with the count (the suite's own budget is measured, not enforced here). */
const timeoutOf = (k: keyof typeof SHARE): number => Math.max(60_000, runsOf(k) * (k === 'live' ? 600 : 150));

let base: string;
let caseNo = 0;
const unhandled: unknown[] = [];
const onUnhandled = (e: unknown): void => {
  unhandled.push(e);
};

beforeAll(() => {
  base = mkdtempSync(join(tmpdir(), 'care-etl-property-'));
  process.on('unhandledRejection', onUnhandled);
  process.on('uncaughtException', onUnhandled);
});
afterAll(() => {
  process.off('unhandledRejection', onUnhandled);
  process.off('uncaughtException', onUnhandled);
  rmSync(base, { recursive: true, force: true });
});

// ------------------------------------------------------------------------------------------------ running

interface CaseDir {
  dir: string;
  mapping: string;
  out: string;
  rejects: string;
  state: string;
}

function writeCase(src: SourceCase, spec: MappingSpec): CaseDir {
  const dir = join(base, `case-${++caseNo}`);
  mkdirSync(dir);
  writeFileSync(join(dir, src.fileName), Buffer.from(src.text, src.encoding ?? 'utf8'));
  const mapping = join(dir, 'mapping.yaml');
  writeFileSync(mapping, mappingYaml(spec, src));
  return { dir, mapping, out: join(dir, 'out'), rejects: join(dir, 'rejects.ndjson'), state: join(dir, 'state.db') };
}

type Outcome = { report: RunReport; error?: undefined } | { report?: undefined; error: unknown };

async function run(opts: RunOptions): Promise<Outcome> {
  try {
    return { report: await runPipeline({ env: {}, ...opts }) };
  } catch (error) {
    return { error };
  }
}

/** One line of the rejects file, as src/pipeline/rejects.ts writes it. */
type RejectLine = RejectRecord;

const readLines = (file: string): string[] =>
  existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l !== '')
    : [];
const rejectsOf = (file: string): RejectLine[] => readLines(file).map((l) => JSON.parse(l) as RejectLine);

/** CARE_PROPERTY_DUMP=<folder>: failing cases' folders (export, mapping, outputs) are copied there. */
function dump(cd: CaseDir): string {
  const to = process.env.CARE_PROPERTY_DUMP;
  if (!to) return '';
  const dest = join(to, `${cd.dir.split('/').pop()}-${Date.now()}`);
  cpSync(cd.dir, dest, { recursive: true });
  return `\n(case folder copied to ${dest})`;
}

function describeCase(src: SourceCase, spec: MappingSpec): string {
  return `${src.label}\n--- mapping ---\n${mappingYaml(spec, src)}--- source (JSON-escaped) ---\n${JSON.stringify(src.text).slice(0, 1500)}`;
}

function assertNoUnhandled(): void {
  if (unhandled.length) {
    const e = unhandled.splice(0);
    throw new Error(`unhandled rejection / uncaught exception during the run: ${e.map((x) => (x instanceof Error ? x.stack : String(x))).join('\n')}`);
  }
}

/** A whole-source fault must reject with a CareEtlError naming the source; anything else must resolve. */
function checkFatal(src: SourceCase, o: Outcome): o is { error: unknown } {
  if (src.fatal) {
    if (o.report) throw new Error(`expected a fatal CareEtlError (${src.fatal}), got a report: ${JSON.stringify(o.report.mappings)}`);
    if (!(o.error instanceof CareEtlError))
      throw new Error(`expected a CareEtlError (${src.fatal}), got ${o.error instanceof Error ? o.error.stack : String(o.error)}`);
    expect(o.error.message).toContain('Source `src`');
    expect(o.error.exitCode).toBe(2);
    return true;
  }
  if (o.error)
    throw new Error(
      `the run failed: ${o.error instanceof CareEtlError ? o.error.describe() : o.error instanceof Error ? (o.error.stack ?? o.error.message) : String(o.error)}`,
    );
  return false;
}

// ------------------------------------------------------------------------------------------------ checks

/** Rejects file lines are well formed: one per reject, non-empty issues, this mapping/source. */
function checkRejectShape(rs: RejectLine[], mapping: string): void {
  for (const r of rs) {
    expect(r.mapping).toBe(mapping);
    expect(r.source).toBe('src');
    expect(['source', 'transform', 'validate', 'load']).toContain(r.stage);
    expect(Array.isArray(r.issues) && r.issues.length > 0, `reject without issues: ${JSON.stringify(r)}`).toBe(true);
    for (const i of r.issues) {
      expect(typeof i.code === 'string' && i.code.length > 0).toBe(true);
      expect(typeof i.message === 'string' && i.message.length > 0).toBe(true);
    }
  }
}

/** Rejects of an ungrouped mapping against the model's fates, record by record. */
function checkRowFates(fates: Fate[], expected: ExpectedRecord[], rs: RejectLine[], what: string): void {
  const got = [...rs].sort((a, b) => (a.record ?? 0) - (b.record ?? 0));
  const gotCode = (record: number) => got.find((g) => g.record === record)?.issues[0]?.code;
  const fmt = (x: { record?: number; stage: string; code?: string }[]) => x.map((r) => `#${r.record} ${r.stage}${r.code ? `/${r.code}` : ''}`).join(', ');
  // Codes are compared where the model pins them (source, key, duplicate, $ref); a map error's code depends on
  // which field JSONata evaluates first, so there the reject's own code is taken.
  const want = fates.flatMap((f, i) => (f.kind === 'rejected' ? [{ record: i + 1, stage: f.stage, code: f.code ?? gotCode(i + 1) }] : []));
  expect(fmt(got.map((r) => ({ record: r.record, stage: r.stage, code: r.issues[0]?.code }))), `${what}: rejected records`).toBe(fmt(want));
  for (const r of got) {
    const e = expected[(r.record ?? 0) - 1];
    if (e?.line !== undefined) expect(r.line, `${what}: line of record #${r.record}`).toBe(e.line);
    // A source reject keeps the record's own text, for re-processing.
    if (e && !e.ok && e.raw !== undefined) expect(r.raw, `${what}: raw text of rejected record #${r.record}`).toBe(e.raw);
  }
}

function checkDryRun(src: SourceCase, spec: MappingSpec, m: ModelResult, report: RunReport, cd: CaseDir): void {
  const expected = src.expected!;
  const rejects = rejectsOf(cd.rejects);
  const p = report.mappings.patient!;
  expect(p.read, 'patient: rows read = records generated').toBe(expected.length);
  expect(p.written + p.rejected + p.skipped, 'patient: written + rejected + skipped = read').toBe(p.read);
  expect(p.skipped, 'patient: rows whose map produced nothing are skipped').toBe(m.patient.filter((f) => f.kind === 'skipped').length);
  expect(p.created + p.updated + p.unchanged + p.adopted + p.ended, 'dry run loads nothing').toBe(0);
  const pRejects = rejects.filter((r) => r.mapping === 'patient');
  expect(pRejects.length, 'patient: one rejects line per rejected row').toBe(p.rejected);
  checkRejectShape(pRejects, 'patient');
  checkRowFates(m.patient, expected, pRejects, 'patient');
  const patients = readLines(join(cd.out, 'Patient.ndjson')).map((l) => JSON.parse(l) as unknown);
  const wantPatients = m.patient.flatMap((f) => (f.kind === 'written' ? [f.resource] : []));
  expect(patients.length, 'patient: resources written = written').toBe(p.written);
  expect(patients, 'patient: the resources written are the mapped rows, in order').toEqual(JSON.parse(JSON.stringify(wantPatients)));

  let outcomes = p.written + p.rejected + p.skipped;
  if (spec.team && m.team) {
    const t = report.mappings.team!;
    const tRejects = rejects.filter((r) => r.mapping === 'team');
    expect(t.read, 'team: rows read').toBe(expected.length);
    expect(tRejects.length, 'team: one rejects line per rejected row/group').toBe(t.rejected);
    checkRejectShape(tRejects, 'team');
    const teams = readLines(join(cd.out, 'CareTeam.ndjson')).map((l) => JSON.parse(l) as { name: string; subject: { reference: string } });
    expect(teams.length).toBe(t.written);
    for (const team of teams) expect(team.subject.reference).toMatch(/^Patient\/[A-Za-z0-9\-.]{1,64}$/);
    if (!m.team.grouped) {
      expect(t.written + t.rejected, 'team: written + rejected = read').toBe(t.read);
      checkRowFates(m.team.fates, expected, tRejects, 'team');
      expect(teams.map((x) => x.name)).toEqual(m.team.fates.filter((f) => f.kind === 'written').map(() => 'Team'));
    } else {
      const rowRejects = tRejects.filter((r) => r.lines === undefined);
      const groupRejects = tRejects.filter((r) => r.lines !== undefined);
      const wantRow = m.team.rows.flatMap((r, i) => (r.kind === 'rejected' ? [`#${i + 1} ${r.stage}/${r.code}`] : []));
      expect(rowRejects.map((r) => `#${r.record} ${r.stage}/${r.issues[0]!.code}`).sort(), 'team: row-level rejects').toEqual(wantRow.sort());
      const written = m.team.groups.filter((g) => g.fate === 'written');
      const rejectedGroups = m.team.groups.filter((g) => g.fate === 'rejected');
      expect(t.written, 'team: one resource per group written').toBe(written.length);
      expect(groupRejects.map((r) => r.key).sort(), 'team: rejected groups').toEqual(rejectedGroups.map((g) => g.key).sort());
      for (const r of groupRejects) {
        const g = rejectedGroups.find((x) => x.key === r.key)!;
        const where = g.records.map((rec) => expected[rec - 1]!.line ?? rec);
        expect(r.lines, `team: lines of group ${r.key}`).toEqual(where);
        expect(r.issues[0]!.code).toBe(g.refRejected ? 'ref-rejected' : 'ref-missing');
      }
      // Every row read is in exactly one place: a row-level reject, a rejected group or a written group.
      const rowsInGroups = groupRejects.reduce((n, r) => n + r.lines!.length, 0) + written.reduce((n, g) => n + g.size, 0);
      expect(rowRejects.length + rowsInGroups, 'team: rows accounted for').toBe(t.read);
      expect(
        teams.map((x) => x.name),
        'team: groups written, in first-seen order, with their sizes',
      ).toEqual(written.map((g) => `Team of ${g.size}`));
    }
    outcomes += t.written + t.rejected;
  }
  expect(report.totals.written + report.totals.rejected + report.totals.skipped).toBe(outcomes);
  expect(rejects.length, 'the rejects file holds every reject and nothing else').toBe(report.totals.rejected);
  expect(report.exitCode).toBe(report.totals.rejected > 0 ? 1 : 0);
}

const countsOf = (r: RunReport) => JSON.stringify(r.mappings);

/** What the generated cases exercised (checked at the end of each property so the generators cannot drift into triviality). */
type Tally = Map<string, number>;
const note = (t: Tally | undefined, k: string): void => {
  t?.set(k, (t.get(k) ?? 0) + 1);
};
function noteCase(t: Tally | undefined, src: SourceCase, spec: MappingSpec, m: ModelResult, rejects: RejectLine[]): void {
  if (!t) return;
  for (const r of rejects) note(t, `${r.stage}/${r.issues[0]?.code}`);
  for (const f of m.patient) if (f.kind === 'written') note(t, isWellFormed(f.key) ? 'written' : 'written: key with a lone surrogate');
  if (src.text.length > 50_000) note(t, 'file > 50 kB');
  if (m.team?.grouped && m.team.groups.some((g) => g.size > 1 && g.fate === 'written')) note(t, 'group of several rows written');
  if (spec.skip) note(t, 'map may produce nothing');
  if (m.patient.some((f) => f.kind === 'skipped')) note(t, 'patient skipped');
}
function checkCoverage(t: Tally, runs: number, want: string[]): void {
  if (runs < 300) return; // small counts (e.g. CARE_PROPERTY_RUNS=100 while debugging) need not reach everything
  const missing = want.filter((k) => !t.get(k));
  expect(missing, `the generated cases never exercised: ${missing.join(', ')} (seen: ${JSON.stringify(Object.fromEntries(t))})`).toEqual([]);
}

async function dryRunProperty(src: SourceCase, spec: MappingSpec, rerun: boolean, tally?: Tally): Promise<void> {
  const cd = writeCase(src, spec);
  try {
    const opts: RunOptions = { mappingFile: cd.mapping, dryRun: true, outDir: cd.out, rejectsFile: cd.rejects };
    const first = await run(opts);
    assertNoUnhandled();
    if (checkFatal(src, first)) {
      note(tally, 'fatal');
      return;
    }
    const m = model(spec, src.expected!);
    checkDryRun(src, spec, m, first.report!, cd);
    noteCase(tally, src, spec, m, rejectsOf(cd.rejects));
    if (rerun) {
      const snapshot = ['Patient.ndjson', 'CareTeam.ndjson'].map((f) => readLines(join(cd.out, f)).join('\n'));
      const rejects = readFileSync(cd.rejects, 'utf8');
      const second = await run(opts);
      assertNoUnhandled();
      if (second.error) throw second.error;
      expect(countsOf(second.report!), 'second dry run: same counts').toBe(countsOf(first.report!));
      expect(
        ['Patient.ndjson', 'CareTeam.ndjson'].map((f) => readLines(join(cd.out, f)).join('\n')),
        'second dry run: same output',
      ).toEqual(snapshot);
      expect(readFileSync(cd.rejects, 'utf8'), 'second dry run: same rejects (rewritten, not appended)').toBe(rejects);
    }
  } catch (err) {
    throw new Error(`${err instanceof Error ? err.message : String(err)}${dump(cd)}\n=== case ===\n${describeCase(src, spec)}`, { cause: err });
  } finally {
    rmSync(cd.dir, { recursive: true, force: true });
  }
}

// ------------------------------------------------------------------------------------------------ properties

const params = (k: keyof typeof SHARE): fc.Parameters<unknown> => ({ seed: SEED + Object.keys(SHARE).indexOf(k), numRuns: runsOf(k) });

const COMMON = [
  'written',
  'transform/duplicate-key',
  'transform/key-missing',
  'transform/jsonata',
  'transform/ref-rejected',
  'group of several rows written',
  'file > 50 kB',
  'map may produce nothing',
  'patient skipped',
];

describe('run invariants (dry run): every record accounted for exactly once, nothing altered, idempotent', () => {
  it(`CSV exports (${runsOf('csv')} cases)`, { timeout: timeoutOf('csv') }, async () => {
    const t: Tally = new Map();
    await fc.assert(
      fc.asyncProperty(csvCase, mappingSpec, rerunSometimes, (src, spec, rerun) => dryRunProperty(src, spec, rerun, t)),
      params('csv'),
    );
    checkCoverage(t, runsOf('csv'), [...COMMON, 'fatal', 'source/csv-ragged', 'source/csv-syntax', 'transform/date-invalid', 'transform/lookup-miss']);
  });

  it(`NDJSON exports (${runsOf('ndjson')} cases)`, { timeout: timeoutOf('ndjson') }, async () => {
    const t: Tally = new Map();
    await fc.assert(
      fc.asyncProperty(ndjsonCase, mappingSpec, rerunSometimes, (src, spec, rerun) => dryRunProperty(src, spec, rerun, t)),
      params('ndjson'),
    );
    checkCoverage(t, runsOf('ndjson'), [...COMMON, 'source/json-syntax', 'source/not-object', 'transform/key-invalid', 'written: key with a lone surrogate']);
  });

  it(`JSON exports (${runsOf('json')} cases)`, { timeout: timeoutOf('json') }, async () => {
    const t: Tally = new Map();
    await fc.assert(
      fc.asyncProperty(jsonCase, mappingSpec, rerunSometimes, (src, spec, rerun) => dryRunProperty(src, spec, rerun, t)),
      params('json'),
    );
    checkCoverage(t, runsOf('json'), [...COMMON, 'fatal', 'source/not-object', 'transform/key-invalid', 'written: key with a lone surrogate']);
  });

  it(`any format, small exports, always re-run (${runsOf('mixed')} cases)`, { timeout: timeoutOf('mixed') }, async () => {
    await fc.assert(
      fc.asyncProperty(smallCase, mappingSpec, async (src, spec) => dryRunProperty(src, spec, true)),
      params('mixed'),
    );
  });
});

// ------------------------------------------------------------------------------------------------ live

/** Server content as the mapping produced it: id and meta dropped, `null`s a server filled in dropped, keys sorted. */
function canonical(v: unknown): string {
  const sort = (x: unknown): unknown =>
    Array.isArray(x)
      ? x.map(sort)
      : x !== null && typeof x === 'object'
        ? Object.fromEntries(
            Object.keys(x)
              .filter((k) => (x as Record<string, unknown>)[k] !== null)
              .sort()
              .map((k) => [k, sort((x as Record<string, unknown>)[k])]),
          )
        : x;
  const { id: _id, meta: _meta, ...rest } = v as Record<string, unknown>;
  return JSON.stringify(sort(rest));
}

async function listAll(sb: Sandbox, tenantId: string, type: 'Patient' | 'CareTeam'): Promise<Record<string, unknown>[]> {
  const client = new CareClient(resolveConnection({ baseUrl: sb.url, apiKey: sb.credentials.apiKey, emrId: sb.credentials.emrId, tenantId }), { retry: false });
  try {
    const out: Record<string, unknown>[] = [];
    for await (const r of client.list(type, { pageSize: 1000 })) out.push(r as Record<string, unknown>);
    return out;
  } finally {
    await client.close();
  }
}

describe('run invariants (live, in-process sandbox): load outcomes, idempotent re-runs, lost state', () => {
  let sb: Sandbox;
  let tenantNo = 0;
  let sandboxNo = 0;
  const TENANTS = Array.from({ length: 64 }, (_, i) => `prop-${i}`);
  /** Every other sandbox fills every absent optional field with `null` in list results, as some servers do. */
  const newSandbox = () =>
    startSandbox({ port: 0, host: '127.0.0.1', tenants: TENANTS, observationsPerPatient: 0, listNulls: sandboxNo++ % 2 === 0 ? 'spec' : 'all' });
  beforeAll(async () => {
    sb = await newSandbox();
  });
  afterAll(async () => {
    await sb?.close();
  });

  /** A tenant nobody used yet (a fresh sandbox when the list runs out). */
  async function freshTenant(): Promise<string> {
    if (tenantNo === TENANTS.length) {
      await sb.close();
      sb = await newSandbox();
      tenantNo = 0;
    }
    return TENANTS[tenantNo++]!;
  }

  const liveTally: Tally = new Map();
  async function liveProperty(src: SourceCase, spec: MappingSpec, faults: FaultOptions | undefined): Promise<void> {
    const cd = writeCase(src, spec);
    const tenantId = await freshTenant();
    const connection = { baseUrl: sb.url, apiKey: sb.credentials.apiKey, emrId: sb.credentials.emrId, tenantId };
    // Retries fast (Retry-After capped at a few ms) and many: a fault must not exhaust them by chance.
    const retry = { attempts: 20, baseDelayMs: 1, maxDelayMs: 10, retryAfterCapMs: 5 };
    const opts = (state: string): RunOptions => ({ mappingFile: cd.mapping, connection, statePath: state, rejectsFile: cd.rejects, concurrency: 4, retry });
    try {
      // Run 1, with the generated server faults (503s, dropped connections, creates stored but answered by a reset).
      const before = sb.stats();
      sb.setFaults(faults);
      const first = await run(opts(cd.state)).finally(() => sb.setFaults(undefined));
      assertNoUnhandled();
      const after = sb.stats();
      if (after.ambiguousCreates > before.ambiguousCreates) note(liveTally, 'ambiguous creates');
      if (after.dropped > before.dropped) note(liveTally, 'dropped connections');
      if ((after.byStatus[503] ?? 0) > (before.byStatus[503] ?? 0)) note(liveTally, '503s');
      if (checkFatal(src, first)) return;
      const expected = src.expected!;
      const m = model(spec, expected);
      const wantPatients = m.patient.flatMap((f) => (f.kind === 'written' ? [f.resource] : []));
      const wantTeams = !m.team
        ? 0
        : m.team.grouped
          ? m.team.groups.filter((g) => g.fate === 'written').length
          : m.team.fates.filter((f) => f.kind === 'written').length;
      const serverPatients = async () => (await listAll(sb, tenantId, 'Patient')).map(canonical).sort();
      const want = wantPatients.map(canonical).sort();

      const check = async (r: RunReport, label: string) => {
        const p = r.mappings.patient!;
        expect(p.read, `${label}: patient rows read`).toBe(expected.length);
        expect(p.created + p.updated + p.unchanged + p.rejected + p.skipped, `${label}: patient outcomes = read`).toBe(p.read);
        expect(p.written, `${label}: nothing "written" in a live run`).toBe(0);
        const rejects = rejectsOf(cd.rejects);
        expect(rejects.length, `${label}: rejects lines`).toBe(r.totals.rejected);
        checkRejectShape(
          rejects.filter((x) => x.mapping === 'patient'),
          'patient',
        );
        if (spec.team) {
          const t = r.mappings.team!;
          expect(t.read, `${label}: team rows read`).toBe(expected.length);
          checkRejectShape(
            rejects.filter((x) => x.mapping === 'team'),
            'team',
          );
          const groups = m.team!.grouped ? m.team!.rows.filter((x) => x.kind === 'rejected').length + m.team!.groups.length : expected.length;
          expect(t.created + t.updated + t.unchanged + t.rejected, `${label}: team outcomes`).toBe(groups);
        }
        return rejects;
      };

      // Run 1: a fresh tenant — every mapped row created once (faults or not), the model's rejects and no other.
      const r1 = first.report!;
      const rej1 = await check(r1, 'run 1');
      checkRowFates(
        m.patient,
        expected,
        rej1.filter((x) => x.mapping === 'patient'),
        'run 1 patient',
      );
      if (m.team && !m.team.grouped)
        checkRowFates(
          m.team.fates,
          expected,
          rej1.filter((x) => x.mapping === 'team'),
          'run 1 team',
        );
      if (m.team?.grouped) {
        const groupRejects = rej1.filter((x) => x.mapping === 'team' && x.lines !== undefined).map((x) => x.key);
        expect(groupRejects.sort(), 'run 1: rejected team groups').toEqual(
          m.team.groups
            .filter((g) => g.fate === 'rejected')
            .map((g) => g.key)
            .sort(),
        );
      }
      // A create whose answer was lost is found again and adopted (counted created or unchanged): with faults
      // only the sum is fixed.
      if (faults)
        expect(r1.mappings.patient!.created + r1.mappings.patient!.unchanged + r1.mappings.patient!.updated, 'run 1: one outcome per patient key mapped').toBe(
          wantPatients.length,
        );
      else expect(r1.mappings.patient!.created, 'run 1: one create per patient key mapped').toBe(wantPatients.length);
      expect(await serverPatients(), 'run 1: the server holds exactly the mapped patients').toEqual(want);
      if (spec.team && !faults) expect(r1.mappings.team!.created, 'run 1: team creates').toBe(wantTeams);
      expect(sb.stats().resources[tenantId]?.CareTeam ?? 0).toBe(wantTeams);

      // Run 2: same input, same state — nothing sent, nothing ended.
      const second = await run(opts(cd.state));
      assertNoUnhandled();
      if (second.error) throw second.error;
      const r2 = second.report!;
      const rej2 = await check(r2, 'run 2');
      expect(r2.totals.created, 'run 2: created').toBe(0);
      expect(r2.totals.updated, 'run 2: updated').toBe(0);
      expect(r2.totals.ended, 'run 2: ended').toBe(0);
      expect(r2.mappings.patient!.unchanged).toBe(wantPatients.length);
      expect(rej2.map((x) => `${x.mapping}#${x.record}/${x.key}`).sort(), 'run 2: same rejects').toEqual(
        rej1.map((x) => `${x.mapping}#${x.record}/${x.key}`).sort(),
      );
      expect(await serverPatients(), 'run 2: server unchanged').toEqual(want);

      // Run 3: the state file is lost — the server is the system of record: nothing created twice.
      const third = await run(opts(join(cd.dir, 'lost-state.db')));
      assertNoUnhandled();
      if (third.error) throw third.error;
      const r3 = third.report!;
      await check(r3, 'run 3');
      if (r1.totals.adopted > 0) note(liveTally, 'run 1 adopted (lost answers)');
      if (r3.totals.adopted > 0) note(liveTally, 'run 3 adopted (lost state)');
      if (wantPatients.length > 0) note(liveTally, 'patients loaded');
      if (r1.totals.rejected > 0) note(liveTally, 'rows rejected');
      expect(r3.totals.created, 'run 3 (lost state): created').toBe(0);
      expect(r3.totals.ended, 'run 3 (lost state): ended').toBe(0);
      expect(await serverPatients(), 'run 3: server still holds exactly the mapped patients').toEqual(want);
      expect(sb.stats().resources[tenantId]?.CareTeam ?? 0).toBe(wantTeams);
    } catch (err) {
      throw new Error(
        `${err instanceof Error ? err.message : String(err)}${dump(cd)}\n=== case (tenant ${tenantId}, faults ${JSON.stringify(faults)}) ===\n${describeCase(src, spec)}`,
        { cause: err },
      );
    } finally {
      rmSync(cd.dir, { recursive: true, force: true });
    }
  }

  /** One case in three: the first run meets server faults (seeded; with 4 requests in flight the interleaving may still vary). */
  const faultsArb: fc.Arbitrary<FaultOptions | undefined> = fc.oneof(
    { weight: 2, arbitrary: fc.constant(undefined) },
    {
      weight: 1,
      arbitrary: fc.record({
        error503Rate: fc.constantFrom(0, 0.1, 0.2),
        dropRate: fc.constantFrom(0, 0.05, 0.1),
        ambiguousCreateRate: fc.constantFrom(0.1, 0.3, 0.5),
        seed: fc.integer({ min: 1, max: 1_000_000 }),
      }),
    },
  );

  it(`any format against the sandbox, three runs each (${runsOf('live')} cases)`, { timeout: timeoutOf('live') }, async () => {
    await fc.assert(fc.asyncProperty(smallCase, mappingSpec, faultsArb, liveProperty), params('live'));
    checkCoverage(liveTally, runsOf('live') * 3, [
      'ambiguous creates',
      'dropped connections',
      '503s',
      'run 1 adopted (lost answers)',
      'run 3 adopted (lost state)',
      'patients loaded',
      'rows rejected',
    ]);
  });
});

// ------------------------------------------------------------------------------------------------ known bugs

/**
 * BUG (found by this suite): in a JSON source read by the streaming reader (no `records`, or a plain path), a
 * member named `"__proto__"` whose value is an object becomes the record's prototype instead of a field
 * (stream-json's Assembler assigns `current[key] = value`; src/sources/json-source.ts yields that object as is).
 * Its fields then leak in through inheritance: the key fast path of `evalKey` (src/mapping/compile-mapping.ts,
 * `(row as Record<string, unknown>)[keyField]`) reads an inherited `MRN`, while JSONata and the rejects file's
 * `row` (JSON.stringify) do not see it. The same records as NDJSON (JSON.parse: an own `__proto__` property)
 * behave differently. Reproduction: data.json `[{"__proto__": {"MRN": "00123"}, "LAST": "Doe"}, {"MRN": "00123"}]`,
 * mapping `key: MRN`, map `{ "identifier": [{ "system": "urn:x", "value": MRN }], "name": [{ "family": LAST }] }`,
 * dry run: record 1 (which has no MRN of its own) is written as key `00123` — a Patient whose identifier has no
 * value — and the real `00123` (record 2) is rejected as a duplicate key; as NDJSON record 1 is rejected
 * (key-missing) and record 2 written. TODO: remove `.fails` once json-source.ts builds records with own
 * properties only (e.g. a reviver / defineProperty for `__proto__`) and `evalKey` reads own properties only.
 */
/**
 * Fixed (found by this suite): UTF-16LE CSV sources (a UTF-16LE BOM, or `csv.encoding: utf-16le`) were parsed
 * wrongly — csv-parse 7 matches the delimiter, quote and line breaks byte by byte, so two characters whose bytes
 * straddle into `0A 00` / `22 00` / `2C 00` were taken for a line break / quote / comma (`1,Tamil ਅĀ Jones` was
 * cut in two), and its `raw` for UTF-16 was garbled (wrong rejects' raw and line numbers). src/sources/
 * decode-stream.ts now transcodes every encoding to UTF-8 before the quote guard and csv-parse.
 */
describe('known bugs', () => {
  it('UTF-16LE CSV: records, lines and raw text are read as written (fixed: transcoded to UTF-8 before csv-parse)', async () => {
    await fc.assert(
      fc.asyncProperty(csvUtf16Case, mappingSpec, (src, spec) => dryRunProperty(src, spec, false)),
      { seed: SEED, numRuns: 50, endOnFailure: true },
    );
  });

  it('a JSON record is read as the same NDJSON record is, even with a "__proto__" member (fixed: it stays an own member)', async () => {
    await fc.assert(
      fc.asyncProperty(protoRecords, async (records) => {
        const outcome = async (format: 'json' | 'ndjson') => {
          const text =
            format === 'json'
              ? `[${records.map((r) => writeJson(r, { ws: [''], escapeAll: false })).join(',')}]`
              : records.map((r) => writeJson(r, { ws: [''], escapeAll: false })).join('\n');
          const src: SourceCase = { format, fileName: `data.${format}`, text, expected: [], label: format };
          const spec: MappingSpec = {
            key: 'field',
            id: 'string',
            name: { family: 'raw', given: 'raw' },
            birthDate: false,
            age: false,
            skip: false,
            onMissing: 'ignore',
          };
          const cd = writeCase(src, spec);
          try {
            const o = await run({ mappingFile: cd.mapping, dryRun: true, outDir: cd.out, rejectsFile: cd.rejects });
            if (o.error) throw o.error;
            return {
              counts: o.report!.mappings.patient,
              written: readLines(join(cd.out, 'Patient.ndjson')),
              rejected: rejectsOf(cd.rejects).map((r) => `#${r.record} ${r.stage}/${r.issues[0]?.code}`),
              // The rows kept for re-processing hold the "__proto__" member as data, both ways.
              rows: rejectsOf(cd.rejects).map((r) => JSON.stringify((r as { row?: unknown }).row)),
            };
          } finally {
            rmSync(cd.dir, { recursive: true, force: true });
          }
        };
        expect(await outcome('json')).toEqual(await outcome('ndjson'));
      }),
      { seed: SEED, numRuns: 20, endOnFailure: true },
    );
  });
});
