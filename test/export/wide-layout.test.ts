/**
 * Issue 13 item 2: `layout: 'wide'` — one row per patient and UTC day, one column per instrument, the latest
 * result of a day wins, stable sorted columns, spooled to a private SQLite file that is removed afterwards.
 */
import { mkdirSync, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CareClient } from '../../src/api/client.js';
import { exportObservations, type ExportObservationsOptions } from '../../src/export/observation-exporter.js';
import { instrumentOf, textKey, utcDay } from '../../src/export/wide-layout.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { Ledger, type LedgerScope } from '../../src/state/ledger.js';
import { clientFor, Collect, observation, parseCsv, TENANT } from './helpers.js';

const PHQ = { coding: [{ system: 'http://loinc.org', code: '44261-6', display: 'PHQ-9 total score' }], text: '=PHQ-9\ntotal' };
const GAD = { coding: [{ system: 'http://loinc.org', code: '70274-6', display: 'GAD-7 total score' }], text: 'GAD-7' };
const OTHER_LOINC = { coding: [{ system: 'http://loinc.org', code: '89204-2', display: 'Some scale' }] };
const LOCAL = { coding: [{ system: 'urn:clinic:forms', code: 'MOOD', display: 'Mood check' }] };
const meta = (lastUpdated: string) => ({ versionId: '1', lastUpdated });

/** The fixture: 2 patients, same-day repeats, a day boundary crossed by a zone offset, unplaceable ones. */
function fixture(): Record<string, unknown>[] {
  return [
    observation('p1', { id: 'a', code: PHQ, effectiveDateTime: '2024-03-01T10:00:00Z', valueInteger: 5, meta: meta('2024-03-01T10:00:00Z') }),
    observation('p1', { id: 'b', code: PHQ, effectiveDateTime: '2024-03-01T18:00:00Z', valueInteger: 9, meta: meta('2024-03-01T18:00:00Z') }),
    observation('p1', { id: 'c', code: GAD, effectiveDateTime: '2024-03-01T23:30:00-05:00', valueInteger: 12, meta: meta('2024-03-02T05:00:00Z') }), // 04:30Z on the 2nd
    observation('p1', { id: 'd', code: GAD, effectiveDateTime: '2024-03-01T09:00:00+02:00', valueInteger: 4, meta: meta('2024-03-01T07:00:00Z') }), // 07:00Z on the 1st
    observation('p1', {
      id: 'e',
      code: OTHER_LOINC,
      effectiveDateTime: '2024-03-01T12:00:00Z',
      valueInteger: undefined,
      valueQuantity: { value: 3.5 },
      meta: meta('2024-03-01T12:00:00Z'),
    }),
    observation('p1', {
      id: 'f',
      code: LOCAL,
      effectiveDateTime: '2024-03-01T12:00:00Z',
      valueInteger: undefined,
      valueString: 'ok, fine',
      meta: meta('2024-03-01T12:00:01Z'),
    }),
    observation('p2', { id: 'g', code: PHQ, effectiveDateTime: '2024-03-01', valueInteger: 1, meta: meta('2024-03-05T00:00:00Z') }),
    observation('p2', { id: 'h', code: PHQ, effectiveDateTime: '2024-03-01', valueInteger: 2, meta: meta('2024-03-06T00:00:00Z') }), // same time, later update: wins
    observation('p2', { id: 'i', code: PHQ, effectiveDateTime: undefined, valueInteger: 7, meta: meta('2024-03-07T00:00:00Z') }),
    observation('p2', { id: 'j', code: GAD, subject: { reference: 'Group/g1' }, meta: meta('2024-03-01T00:00:00Z') }), // not a patient
    observation('p2', { id: 'k', code: { text: 'No\ncoding' }, meta: meta('2024-03-01T00:00:00Z') }), // no coding: keyed by its text (issue 27)
  ];
}

const COLUMNS = [
  'patient_id',
  'patient_source_key',
  'date',
  'GAD-7 (70274-6)',
  'LOINC 89204-2',
  'MOOD (urn:clinic:forms)',
  'No coding',
  'PHQ-9 (44261-6)',
  'observations',
  'superseded',
  'last_updated',
];

let sb: Sandbox;
let c: CareClient;
let ledger: Ledger;
let scope: LedgerScope;
let temp: string;
beforeEach(async () => {
  sb = await startSandbox({ observationsPerPatient: 0, pageSize: 4 });
  c = clientFor(sb, { retry: false });
  ledger = Ledger.open(':memory:');
  scope = ledger.scope(sb.url, TENANT);
  const runId = scope.beginRun({ mappingFile: 'mapping.yaml', dryRun: false });
  scope.recordSynced({ mapping: 'patient', key: 'MRN-1', resourceType: 'Patient', serverId: 'p1', hash: 'h', runId });
  temp = mkdtempSync(join(tmpdir(), 'care-etl-wide-test-'));
});
afterEach(async () => {
  ledger.close();
  await c.close();
  await sb.close();
});

async function wide(opts: Partial<ExportObservationsOptions> = {}, client = c) {
  const out = new Collect();
  const report = await exportObservations({ client, scope, output: out, layout: 'wide', tempDir: temp, ...opts });
  return { report, text: out.text };
}

describe('wide layout', () => {
  it('writes one row per patient and UTC day, one column per instrument (sorted), the latest result of a day winning', async () => {
    sb.addObservations(TENANT, fixture());
    const { report, text } = await wide();
    const rows = parseCsv(text);
    expect(Object.keys(rows[0]!)).toEqual(COLUMNS);
    expect(report).toMatchObject({ layout: 'wide', export: 'wide', rows: 4, observations: 10, unplaced: 1, scanned: 11, columns: COLUMNS });
    expect(rows.map((r) => COLUMNS.map((k) => r[k]))).toEqual([
      // PHQ-9 twice that day: 18:00 (9) wins over 10:00 (5); GAD-7 at 09:00+02:00 is 07:00Z on the 1st
      ['p1', 'MRN-1', '2024-03-01', '4', '3.5', 'ok, fine', '', '9', '5', '1', '2024-03-01T18:00:00Z'],
      // 23:30-05:00 on the 1st is 04:30Z on the 2nd
      ['p1', 'MRN-1', '2024-03-02', '12', '', '', '', '', '1', '0', '2024-03-02T05:00:00Z'],
      // no effective date: an empty date (sorted first); p2 has no ledger entry: no source key
      ['p2', '', '', '', '', '', '', '7', '1', '0', '2024-03-07T00:00:00Z'],
      // same effective time twice: the later meta.lastUpdated wins
      ['p2', '', '2024-03-01', '', '', '', '7', '2', '3', '1', '2024-03-06T00:00:00Z'],
    ]);
  });

  it('has the same header and rows whatever order the server lists the observations in', async () => {
    const a = fixture();
    sb.addObservations(TENANT, a);
    const first = await wide({ pageSize: 3 });
    const other = await startSandbox({ observationsPerPatient: 0, pageSize: 2 });
    const oc = clientFor(other, { retry: false });
    try {
      other.addObservations(TENANT, [...a].reverse());
      const second = await wide({ scope: ledger.scope(other.url, TENANT) }, oc);
      const strip = (t: string) => t.replace(/,MRN-1,/g, ',,'); // the second scope has no ledger entries
      expect(strip(second.text)).toBe(strip(first.text));
    } finally {
      await oc.close();
      await other.close();
    }
  });

  it('writes typed NDJSON (numbers stay numbers, empty cells null) and honours since and patients', async () => {
    sb.addObservations(TENANT, fixture());
    const { text } = await wide({ format: 'ndjson', since: '2024-03-02', patients: ['MRN-1'], patientMappings: ['patient'] });
    const lines = text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    // since 2024-03-02 (meta.lastUpdated): only c (p1, GAD on the 2nd UTC) is left for MRN-1
    expect(lines).toEqual([
      {
        patient_id: 'p1',
        patient_source_key: 'MRN-1',
        date: '2024-03-02',
        'GAD-7 (70274-6)': 12,
        observations: 1,
        superseded: 0,
        last_updated: '2024-03-02T05:00:00Z',
      },
    ]);
  });

  it('writes a header-only file when nothing is exported, and removes its spool (0600 in a 0700 folder) afterwards', async () => {
    const empty = await wide();
    expect(empty.text).toBe('patient_id,patient_source_key,date,observations,superseded,last_updated\r\n');

    sb.addObservations(TENANT, fixture());
    const seen: { dirMode: number; fileMode: number; files: string[] }[] = [];
    const probe = new Writable({
      write(_chunk, _enc, cb) {
        if (!seen.length) {
          // Rows are written while the spool is read back: it exists now.
          const [dir] = readdirSync(temp).filter((n) => n.startsWith('.export-wide-'));
          const files = readdirSync(join(temp, dir!));
          seen.push({ dirMode: statSync(join(temp, dir!)).mode & 0o777, fileMode: statSync(join(temp, dir!, files[0]!)).mode & 0o777, files });
        }
        cb();
      },
    });
    await exportObservations({ client: c, scope, output: probe, layout: 'wide', tempDir: temp });
    expect(seen).toEqual([{ dirMode: 0o700, fileMode: 0o600, files: ['spool.db'] }]);
    expect(readdirSync(temp)).toEqual([]);
  });

  it('removes the spool when the export fails, and a spool left by a dead process', async () => {
    sb.addObservations(TENANT, fixture());
    const failing = {
      async *pages(type: 'Observation', o: Parameters<CareClient['pages']>[1]) {
        let n = 0;
        for await (const b of c.pages(type, o)) {
          if (++n === 2) throw new Error('socket hang up');
          yield b;
        }
      },
    } as unknown as CareClient;
    await expect(wide({}, failing)).rejects.toMatchObject({ exitCode: 3 });
    expect(readdirSync(temp)).toEqual([]);

    // A folder left by a process killed with SIGKILL (no such pid): removed by the next wide export.
    mkdirSync(join(temp, '.export-wide-99999999-x1'), { mode: 0o700 });
    writeFileSync(join(temp, '.export-wide-99999999-x1', 'spool.db'), 'old', { mode: 0o600 });
    await wide();
    expect(readdirSync(temp)).toEqual([]);
  });

  it('keys columns by code.text without a coding: spellings merged, a taken header suffixed from its key, snake names (issue 27)', async () => {
    const text = (t: string, id: string, effectiveDateTime: string) =>
      observation('p1', { id, code: { text: t }, effectiveDateTime, meta: meta(effectiveDateTime) });
    sb.addObservations(TENANT, [
      text('PHQ-9 total', 'a', '2024-03-01T10:00:00Z'),
      text('phq-9\n  TOTAL', 'b', '2024-03-02T10:00:00Z'), // the same key: merged
      text('date', 'c', '2024-03-01T10:00:00Z'), // a fixed column's name
      text('PHQ-9 (44261-6)', 'd', '2024-03-01T10:00:00Z'), // a coded column's header
      observation('p1', { id: 'e', code: PHQ, effectiveDateTime: '2024-03-01T11:00:00Z', meta: meta('2024-03-01T11:00:00Z') }),
    ]);
    const { report, text: csv } = await wide();
    const cols = report.columns.slice(3, -3);
    expect(cols).toHaveLength(4);
    expect(cols).toContain('PHQ-9 total'); // the smallest spelling, whatever came first
    expect(cols.filter((c) => /^date #[0-9a-f]{8}$/.test(c))).toHaveLength(1);
    expect(cols.filter((c) => c.startsWith('PHQ-9 (44261-6)'))).toHaveLength(2);
    expect(report).toMatchObject({ mergedTexts: 1, unplaced: 0, observations: 5 });
    expect(parseCsv(csv).map((r) => r['PHQ-9 total'])).toEqual(['7', '7']);
    const snake = await wide({ columnNames: 'snake' });
    expect(snake.report.columns).toEqual([
      'patient_id',
      'patient_source_key',
      'date',
      // the order of the original names (the same in every style)
      'phq_9_44261_6',
      expect.stringMatching(/^phq_9_44261_6_[0-9a-f]{8}$/),
      'phq_9_total',
      expect.stringMatching(/^date_[0-9a-f]{8}$/),
      'observations',
      'superseded',
      'last_updated',
    ]);
  });

  it('refuses custom columns', async () => {
    const custom = { name: 'mine', columns: ['x'], evalRow: async () => ({ x: 1 }) };
    await expect(wide({ columns: custom })).rejects.toMatchObject({ exitCode: 2, message: expect.stringContaining('own columns') });
  });
});

describe('wide layout building blocks', () => {
  it('cuts effective times to the UTC day; keeps dates without a time as written', () => {
    expect(utcDay('2024-03-01T23:30:00-05:00')).toBe('2024-03-02');
    expect(utcDay('2024-03-01T00:30:00+02:00')).toBe('2024-02-29');
    expect(utcDay('2024-03-01T10:00:00.123Z')).toBe('2024-03-01');
    expect(utcDay('2024-03-01')).toBe('2024-03-01');
    expect(utcDay('2024-03')).toBe('2024-03');
    expect(utcDay('2024-03-01T10:00:00')).toBe('2024-03-01'); // no zone: the date as written
    expect([utcDay(undefined), utcDay('yesterday')]).toEqual(['', '']);
  });

  it('names instrument columns from codes; from code.text only when there is no coding (issue 27)', () => {
    expect(instrumentOf({ code: PHQ })?.name).toBe('PHQ-9 (44261-6)');
    expect(
      instrumentOf({
        code: {
          coding: [
            { system: 'urn:x', code: 'A' },
            { system: 'http://loinc.org', code: '70274-6' },
          ],
        },
      })?.name,
    ).toBe('GAD-7 (70274-6)');
    expect(instrumentOf({ code: OTHER_LOINC })?.name).toBe('LOINC 89204-2');
    expect(instrumentOf({ code: { coding: [{ code: '=cmd' }] } })?.name).toBe("'=cmd (no system)");
    expect(instrumentOf({ code: { coding: [{ system: 'urn:x', code: 'a\nb' }] } })?.name).toBe('a b (urn:x)');
    expect(instrumentOf({ code: { text: ' PHQ-9\r\n total ' } })).toMatchObject({ key: 'text|phq-9 total', name: 'PHQ-9 total' });
    expect(instrumentOf({ code: { text: '=cmd' } })?.name).toBe("'=cmd");
    expect(instrumentOf({ code: { text: ' \n ' } })).toBeUndefined();
    expect(textKey('ＰＨＱ-9\tTOTAL  score')).toBe(textKey('phq-9 total score'));
  });
});
