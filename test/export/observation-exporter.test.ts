import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CareClient } from '../../src/api/client.js';
import { CareEtlError } from '../../src/core/issues.js';
import { defaultExport, DEFAULT_COLUMNS } from '../../src/export/default-columns.js';
import { exportObservations, parseSince, watermarkNameOf, type ExportObservationsOptions } from '../../src/export/observation-exporter.js';
import { parseReference } from '../../src/export/references.js';
import { csvCell } from '../../src/core/csv-cell.js';
import { compileMapping } from '../../src/mapping/compile-mapping.js';
import { loadMapping } from '../../src/mapping/load-mapping.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { Ledger, type LedgerScope } from '../../src/state/ledger.js';
import { clientFor, Collect, FIXTURES, observation, oldObservations, parseCsv, TENANT } from './helpers.js';

let ledger: Ledger;
let scope: LedgerScope;

async function run(opts: Partial<ExportObservationsOptions> & { client: CareClient }) {
  const out = new Collect();
  const report = await exportObservations({ output: out, ...opts });
  return { report, text: out.text };
}

describe('exportObservations against the sandbox over HTTP', () => {
  let fresh: Sandbox;
  let c: CareClient;
  beforeEach(async () => {
    fresh = await startSandbox({ observationsPerPatient: 0, pageSize: 10 });
    c = clientFor(fresh, { retry: false });
    ledger = Ledger.open(':memory:');
    scope = ledger.scope(fresh.url, TENANT);
  });
  afterEach(async () => {
    ledger.close();
    await c.close();
    await fresh.close();
  });

  it('follows next links across more than 3 pages: exactly one row per observation', async () => {
    fresh.addObservations(TENANT, oldObservations(47));
    const { report, text } = await run({ client: c, scope });
    const rows = parseCsv(text);
    expect(report.pages).toBe(5);
    expect(report.rows).toBe(47);
    expect(rows).toHaveLength(47);
    expect(new Set(rows.map((r) => r.id))).toEqual(new Set(Array.from({ length: 47 }, (_, i) => `old-${i}`)));
    expect(Object.keys(rows[0]!)).toEqual([...DEFAULT_COLUMNS]);
    expect(rows[3]).toMatchObject({
      questionnaire: 'PHQ-9 total score',
      loinc: '44261-6',
      category: 'Survey',
      status: 'final',
      value: '3',
      patient_id: 'p0',
      last_updated: '2024-06-01T00:00:00.000Z',
      version: '1',
    });
    expect(text.endsWith('\r\n')).toBe(true);
  });

  it('round-trips commas, quotes, newlines and non-ASCII text through csv-parse', async () => {
    const texts = ['Score, total', 'He said "fine"', 'line 1\nline 2', 'crlf\r\ninside', 'Échelle de dépression — 日本語 ✓ 🧠', '"', ',', ' padded '];
    fresh.addObservations(
      TENANT,
      texts.map((t, i) => observation('p1', { id: `t${i}`, code: { text: t }, valueInteger: undefined, valueString: `${t}|${i}` })),
    );
    const { text } = await run({ client: c, scope });
    const rows = parseCsv(text);
    expect(rows.map((r) => r.questionnaire)).toEqual(texts);
    expect(rows.map((r) => r.value)).toEqual(texts.map((t, i) => `${t}|${i}`));
    expect(Buffer.from(text, 'utf8').toString('utf8')).toContain('日本語');
  });

  it('neutralises formula-like text cells by default, keeps JSON numbers (even negative) numeric', async () => {
    const risky = ['=HYPERLINK("http://evil.example","click")', '+1', '@SUM(A1:A9)', "-2+3+cmd|' /C calc'!A0", '\tTAB', '\rCR', '＝full-width', 'safe'];
    fresh.addObservations(
      TENANT,
      risky.map((t, i) => observation('p1', { id: `f${i}`, code: { text: t }, valueInteger: -3 })),
    );
    fresh.addObservations(TENANT, [observation('p1', { id: 'neg-text', code: { text: 'x' }, valueInteger: undefined, valueString: '-3' })]);
    const escaped = parseCsv((await run({ client: c, scope })).text);
    expect(escaped.slice(0, risky.length).map((r) => r.questionnaire)).toEqual(risky.map((t) => (t === 'safe' ? t : `'${t}`)));
    expect(escaped.slice(0, risky.length).every((r) => r.value === '-3')).toBe(true);
    expect(escaped.at(-1)!.value).toBe("'-3"); // text "-3" is text: neutralised (OWASP)

    const raw = parseCsv((await run({ client: c, scope, escapeFormulas: false })).text);
    expect(raw.slice(0, risky.length).map((r) => r.questionnaire)).toEqual(risky);
    expect(raw.at(-1)!.value).toBe('-3');
  });

  it('writes a header-only CSV when there is nothing to export', async () => {
    const { report, text } = await run({ client: c, scope });
    expect(report).toMatchObject({ rows: 0, pages: 1, scanned: 0 });
    expect(text).toBe(`${DEFAULT_COLUMNS.join(',')}\r\n`);
    const bom = await run({ client: c, scope, bom: true });
    expect(bom.text).toBe(`\uFEFF${DEFAULT_COLUMNS.join(',')}\r\n`);
  });

  it('writes NDJSON: one object per line, column names as keys, numbers as numbers, nothing as null', async () => {
    fresh.addObservations(TENANT, [
      observation('p1', { id: 'n1', valueInteger: -3 }),
      observation('p1', { id: 'n2', valueInteger: undefined, valueString: '=1+1' }),
    ]);
    const { text } = await run({ client: c, scope, format: 'ndjson' });
    const lines = text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toHaveLength(2);
    expect(Object.keys(lines[0]!)).toEqual([...DEFAULT_COLUMNS]);
    expect(lines[0]).toMatchObject({ id: 'n1', value: -3, unit: null, patient_source_key: null });
    expect(lines[1]).toMatchObject({ id: 'n2', value: '=1+1' }); // NDJSON is not opened by spreadsheets: no escaping
  });

  it('joins patients back to their source keys through the ledger (default column and $sourceKey)', async () => {
    const runId = scope.beginRun({ mappingFile: 'mapping.yaml', dryRun: false });
    const byMrn = new Map<string, string>();
    for (const mrn of ['00123', '00456']) {
      const p = await c.create('Patient', { resourceType: 'Patient', identifier: [{ system: 'urn:clinic:mrn', value: mrn }] });
      scope.recordSynced({ mapping: 'patient', key: mrn, resourceType: 'Patient', serverId: p.id, hash: 'h', runId });
      byMrn.set(mrn, p.id);
    }
    fresh.addObservations(TENANT, [
      observation(byMrn.get('00123')!, { id: 'a' }),
      observation(byMrn.get('00456')!, { id: 'b' }),
      observation('not-loaded', { id: 'c' }),
    ]);
    const rows = parseCsv((await run({ client: c, scope })).text);
    expect(rows.map((r) => [r.id, r.patient_source_key])).toEqual([
      ['a', '00123'],
      ['b', '00456'],
      ['c', ''],
    ]);

    const compiled = compileMapping(await loadMapping(`${FIXTURES}mapping.yaml`));
    const custom = parseCsv((await run({ client: c, scope, columns: compiled.exports.get('observations')! })).text);
    expect(Object.keys(custom[0]!)).toEqual(['id', 'mrn', 'questionnaire', 'score', 'effective']);
    expect(custom.map((r) => r.mrn)).toEqual(['00123', '00456', '']);

    const only = parseCsv((await run({ client: c, scope, patients: ['00456'], patientMappings: ['patient'] })).text);
    expect(only.map((r) => r.id)).toEqual(['b']);
    await expect(run({ client: c, scope, patients: ['99999'], patientMappings: ['patient'] })).rejects.toMatchObject({
      exitCode: 2,
      message: expect.stringContaining('`99999`'),
    });
  });

  it('--since <date> keeps observations updated at or after it (meta.lastUpdated, inclusive)', async () => {
    fresh.addObservations(TENANT, [
      observation('p', { id: 'before', meta: { versionId: '1', lastUpdated: '2024-05-31T23:59:59.999Z' } }),
      observation('p', { id: 'at', meta: { versionId: '1', lastUpdated: '2024-06-01T00:00:00Z' } }),
      observation('p', { id: 'after', meta: { versionId: '2', lastUpdated: '2024-07-01T08:00:00+02:00' } }),
      observation('p', { id: 'undated', meta: { versionId: '1' } }),
    ]);
    const { report, text } = await run({ client: c, scope, since: '2024-06-01' });
    expect(parseCsv(text).map((r) => r.id)).toEqual(['at', 'after', 'undated']);
    expect(report).toMatchObject({ since: '2024-06-01T00:00:00.000Z', sinceMode: 'date', undated: 1, watermarkSaved: false });
    expect(scope.getWatermark(report.watermarkName)).toBeUndefined();
  });

  it('--since last: first a full export, then only what is new; the watermark moves only after a complete export', async () => {
    fresh.addObservations(TENANT, oldObservations(25));
    const first = await run({ client: c, scope, since: 'last', overlapMs: 0 });
    expect(first.report).toMatchObject({ rows: 25, since: null, sinceMode: 'last', watermarkSaved: true, watermarkName: 'export:default' });
    expect(scope.getWatermark('export:default')).toBe(first.report.watermark);

    await sleep(5);
    fresh.addObservations(TENANT, [observation('p', { id: 'new-1' }), observation('p', { id: 'new-2' })]);
    await sleep(5); // the bound is inclusive: keep the next watermark off the insert's millisecond
    const second = await run({ client: c, scope, since: 'last', overlapMs: 0 });
    expect(parseCsv(second.text).map((r) => r.id)).toEqual(['new-1', 'new-2']);
    expect(second.report.since).toBe(first.report.watermark);

    // A failed export (here: finalize fails, like a rename) leaves the watermark where it was.
    await sleep(5);
    fresh.addObservations(TENANT, [observation('p', { id: 'new-3' })]);
    await sleep(5);
    const before = scope.getWatermark('export:default');
    await expect(
      run({
        client: c,
        scope,
        since: 'last',
        overlapMs: 0,
        finalize: async () => {
          throw new Error('rename failed');
        },
      }),
    ).rejects.toMatchObject({ exitCode: 3 });
    expect(scope.getWatermark('export:default')).toBe(before);
    const third = await run({ client: c, scope, since: 'last', overlapMs: 0 });
    expect(parseCsv(third.text).map((r) => r.id)).toEqual(['new-3']);

    // Default overlap (60 s): the saved watermark is a minute before this export started, so the next
    // export reads again what was written in that minute (at-least-once; dedupe on id + version).
    const overlapped = await run({ client: c, scope, since: 'last' });
    expect(parseCsv(overlapped.text)).toEqual([]);
    expect(Date.parse(overlapped.report.startedAt) - Date.parse(overlapped.report.watermark)).toBeGreaterThanOrEqual(59_000);
    const again = await run({ client: c, scope, since: 'last' });
    expect(parseCsv(again.text).map((r) => r.id)).toEqual(['new-1', 'new-2', 'new-3']);
  });

  it('keeps a separate watermark per export name and filter', async () => {
    expect(watermarkNameOf('default')).toBe('export:default');
    expect(watermarkNameOf('obs', { patients: ['b', 'a', 'b'], query: { z: '1', a: '2' } })).toBe('export:obs?patient=a,b&a=2&z=1');
    const { report } = await run({ client: c, scope, since: 'last', patients: ['x'] });
    expect(report.watermarkName).toBe('export:default?patient=x');
    expect(scope.getWatermark('export:default')).toBeUndefined();
  });

  it('passes --query parameters on the first request and _count as the page size', async () => {
    fresh.addObservations(TENANT, oldObservations(12));
    const seen: string[] = [];
    const spy = clientFor(fresh, { retry: false, onResponse: (i) => seen.push(i.path) });
    try {
      const { report } = await run({ client: spy, scope, query: { _lastUpdated: 'ge2024-01-01' }, pageSize: 5 });
      expect(report.pages).toBe(3);
      expect(seen[0]).toBe('/Observation?_lastUpdated=ge2024-01-01&_count=5');
      expect(seen.slice(1).every((p) => p.includes('_cursor='))).toBe(true);
    } finally {
      await spy.close();
    }
  });

  it('applies backpressure: a stalled output stops the paging (bounded memory)', async () => {
    fresh.addObservations(TENANT, oldObservations(3000));
    let responses = 0;
    const counting = clientFor(fresh, { retry: false, onResponse: () => responses++ });
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let received = 0;
    const slow = new Writable({
      highWaterMark: 1024,
      write(chunk: Buffer, _enc, cb) {
        received += chunk.length;
        if (received > 0 && responses > 0) void released.then(() => cb());
        else cb();
      },
    });
    try {
      const done = exportObservations({ client: counting, output: slow, pageSize: 100 });
      await sleep(300); // unbounded buffering would fetch all 30 pages in this time
      const duringStall = responses;
      release();
      const report = await done;
      expect(report.rows).toBe(3000);
      expect(report.pages).toBe(30);
      expect(duringStall).toBeLessThanOrEqual(8);
    } finally {
      await counting.close();
    }
  });

  it('a failure mid-export rejects with exit code 3 (could not complete) and destroys the output', async () => {
    fresh.addObservations(TENANT, oldObservations(30));
    const compiled = compileMapping(await loadMapping(`${FIXTURES}mapping.yaml`));
    const cols = compiled.exports.get('observations')!;
    fresh.addObservations(TENANT, [observation('p', { id: 'bad', valueInteger: undefined })]);
    // A client whose third page fails.
    const failing = {
      async *pages(type: 'Observation', o: Parameters<CareClient['pages']>[1]) {
        let n = 0;
        for await (const b of c.pages(type, o)) {
          if (++n === 3) throw new Error('socket hang up');
          yield b;
        }
      },
    } as unknown as CareClient;
    const out = new Collect();
    const err = await exportObservations({ client: failing, output: out, columns: cols }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CareEtlError);
    expect(err).toMatchObject({ exitCode: 3, message: expect.stringMatching(/^Export failed after 20 rows from 2 pages: socket hang up/) });
    expect(out.destroyed).toBe(true);
  });

  it('a column expression failing on one observation fails the export (exit 2: the column of the mapping is at fault) naming the observation', async () => {
    fresh.addObservations(TENANT, [observation('p', { id: 'ok' }), observation('p', { id: 'odd', effectiveDateTime: 'yesterday' })]);
    const loaded = await loadMapping(`${FIXTURES}mapping.yaml`);
    loaded.exports!.observations!.columns.push({
      name: 'day',
      expr: "$date(effectiveDateTime, \"luxon:yyyy-MM-dd'T'HH:mm:ss'Z'\")",
      location: { file: 'x' },
      path: ['exports', 'observations', 'columns', 'day'],
    });
    const cols = compileMapping(loaded).exports.get('observations')!;
    const err = await run({ client: c, scope, columns: cols }).catch((e: unknown) => e);
    expect(err).toMatchObject({ exitCode: 2, message: expect.stringContaining('observation odd') });
  });
});

describe('building blocks', () => {
  it('parses references (relative, absolute, versioned) and refuses the rest', () => {
    expect(parseReference('Patient/123')).toEqual({ type: 'Patient', id: '123' });
    expect(parseReference('https://x.example/fhir/Patient/a-1.b/_history/3')).toEqual({ type: 'Patient', id: 'a-1.b' });
    for (const bad of ['', '#contained', 'urn:uuid:1234', 'Patient', 'patient/1', 42]) expect(parseReference(bad)).toBeUndefined();
  });

  it('turns values into CSV cells', () => {
    expect([csvCell(undefined), csvCell(null), csvCell(NaN), csvCell(-3), csvCell(true), csvCell('x')]).toEqual([
      undefined,
      undefined,
      undefined,
      -3,
      'true',
      'x',
    ]);
    expect(csvCell(['a', 1, false, null])).toBe('a|1|false');
    expect(csvCell([5])).toBe(5);
    expect(csvCell([{ a: 1 }])).toBe('[{"a":1}]');
    expect(csvCell({ a: 1 })).toBe('{"a":1}');
  });

  it('reads every kind of value[x] for the default value column', async () => {
    const row = (o: Record<string, unknown>) => defaultExport().evalRow(o, { now: new Date() });
    expect((await row({ valueQuantity: { value: 2.5, unit: 'kg' } })).value).toBe(2.5);
    expect((await row({ valueQuantity: { value: 2.5, unit: 'kg' } })).unit).toBe('kg');
    expect((await row({ valueCodeableConcept: { coding: [{ code: 'LA6568-5', display: 'Not at all' }] } })).value).toBe('Not at all');
    expect((await row({ valueBoolean: false })).value).toBe(false);
    expect((await row({ valueRange: { low: { value: 1 }, high: { value: 4 } } })).value).toBe('1..4');
    expect((await row({ valueSampledData: { data: '1 2' } })).value).toBe('{"data":"1 2"}');
    expect((await row({})).value).toBeUndefined();
  });

  it('parses --since values strictly', () => {
    expect(parseSince('2024-05-01')).toBe(Date.UTC(2024, 4, 1));
    expect(parseSince('2024-05-01T10:00:00+02:00')).toBe(Date.UTC(2024, 4, 1, 8));
    for (const bad of ['2024-13-01', 'yesterday', '2024-05-01T10:00', '1']) expect(() => parseSince(bad)).toThrow(CareEtlError);
  });
});
