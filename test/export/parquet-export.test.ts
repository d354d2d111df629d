/**
 * Issue 27 item 2: `format: 'parquet'` for the long and the wide layout, read back by an independent reader
 * (hyparquet): exact values, logical types, nulls for missing scores, bounded row groups, mode 0600.
 * 5,000 generated observations here (fast); 100k and 1M are in bench/export-parquet.mjs.
 */
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { asyncBufferFromFile, parquetMetadata, parquetReadObjects, parquetSchema } from 'hyparquet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CareClient } from '../../src/api/client.js';
import type { Resource } from '../../src/api/types.js';
import { DEFAULT_COLUMNS } from '../../src/export/default-columns.js';
import { runExport } from '../../src/export/run-export.js';
import { MAX_GROUP_BYTES, MAX_GROUP_ROWS, ParquetSink } from '../../src/export/parquet-sink.js';
import { utcDay } from '../../src/export/wide-layout.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { clientFor, Collect, envFor, loadPatients, observation, TENANT, workDir } from './helpers.js';

const PATIENTS = 50;
const PER_PATIENT = 100;

let sb: Sandbox;
let client: CareClient;
let dir: string;
/** The server's own list: what the export must hold, observation by observation. */
let server: Record<string, unknown>[];
beforeAll(async () => {
  sb = await startSandbox({ observationsPerPatient: 0, pageSize: 1000 });
  client = clientFor(sb, { retry: false });
  dir = workDir();
  const mrns = Array.from({ length: PATIENTS }, (_, i) => `M${i}`);
  const ids = await loadPatients(client, join(dir, '.care-etl/state.db'), sb.url, mrns);
  sb.generateObservations(TENANT, PER_PATIENT);
  // Two observations without a score (a missing value is a null, not 0).
  sb.addObservations(TENANT, [
    observation(ids.get('M0')!, { id: 'no-score-1', valueInteger: undefined, effectiveDateTime: '2023-12-31T23:30:00-02:00' }),
    observation(ids.get('M1')!, { id: 'no-score-2', valueInteger: undefined, effectiveDateTime: '2023-06-01' }),
  ]);
  server = [];
  for await (const page of client.pages<Resource>('Observation', { pageSize: 1000 }))
    for (const e of page.entry ?? []) server.push(e.resource as unknown as Record<string, unknown>);
});
afterAll(async () => {
  await client?.close();
  await sb?.close();
});

const exportTo = (file: string, layout: 'long' | 'wide') =>
  runExport({ mappingFile: join(dir, 'mapping-default.yaml'), out: join(dir, file), format: 'parquet', layout, env: envFor(sb) });

const read = async (file: string) => {
  const buf = await asyncBufferFromFile(join(dir, file));
  const meta = parquetMetadata(readFileSync(join(dir, file)).buffer);
  return { meta, rows: (await parquetReadObjects({ file: buf })) as Record<string, unknown>[] };
};

/** The bytes a sink wrote, as the ArrayBuffer hyparquet reads. */
function bufferOf(out: Collect): ArrayBuffer {
  const bytes = Buffer.concat(out.chunks);
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
}

const fieldOf = (meta: ReturnType<typeof parquetMetadata>, name: string) => parquetSchema(meta).children.find((c) => c.element.name === name)!.element;

const scoreOf = (o: Record<string, unknown>): bigint | null => (typeof o.valueInteger === 'number' ? BigInt(o.valueInteger) : null);
const effectiveOf = (o: Record<string, unknown>) => o.effectiveDateTime as string;

describe('export --format parquet', () => {
  it('long layout: every observation once, typed columns with exact values, nulls for missing scores, mode 0600', async () => {
    const summary = await exportTo('long.parquet', 'long');
    expect(summary.rows).toBe(PATIENTS * PER_PATIENT + 2);
    expect(statSync(join(dir, 'long.parquet')).mode & 0o777).toBe(0o600);
    const { meta, rows } = await read('long.parquet');
    expect(parquetSchema(meta).children.map((c) => c.element.name)).toEqual([...DEFAULT_COLUMNS]);
    expect(fieldOf(meta, 'value')).toMatchObject({
      type: 'INT64',
      repetition_type: 'OPTIONAL',
      logical_type: { type: 'INTEGER', bitWidth: 64, isSigned: true },
    });
    expect(fieldOf(meta, 'effective')).toMatchObject({ type: 'INT64', logical_type: { type: 'TIMESTAMP', isAdjustedToUTC: true, unit: 'MILLIS' } });
    expect(fieldOf(meta, 'last_updated')).toMatchObject({ type: 'INT64', logical_type: { type: 'TIMESTAMP', isAdjustedToUTC: true, unit: 'MILLIS' } });
    expect(fieldOf(meta, 'questionnaire')).toMatchObject({ type: 'BYTE_ARRAY', converted_type: 'UTF8' });
    // Bounded row groups: none larger than the bound (the sink's memory is one group).
    for (const g of meta.row_groups) expect(Number(g.num_rows)).toBeLessThanOrEqual(MAX_GROUP_ROWS);

    expect(rows).toHaveLength(server.length);
    const byId = new Map(rows.map((r) => [r.id as string, r]));
    expect(byId.size).toBe(server.length);
    for (const o of server) {
      const r = byId.get(o.id as string)!;
      expect(r.value).toStrictEqual(scoreOf(o));
      expect(r.effective).toEqual(new Date(Date.parse(effectiveOf(o))));
      expect(r.last_updated).toEqual(new Date((o.meta as { lastUpdated: string }).lastUpdated));
      expect(r.loinc).toBe((o.code as { coding: { code: string }[] }).coding[0]!.code);
      expect(r.questionnaire).toBe((o.code as { text: string }).text);
      expect(r.status).toBe('final');
    }
    expect(byId.get('no-score-1')!.value).toBeNull();
    expect(byId.get('no-score-2')!.effective).toEqual(new Date('2023-06-01T00:00:00Z'));
    // No formula prefix in Parquet: the texts are the server's.
    expect(rows.some((r) => typeof r.questionnaire === 'string' && r.questionnaire.startsWith("'"))).toBe(false);
  });

  it('wide layout: one row per patient and UTC day, DATE days, INT64 scores (the latest of a day), snake names', async () => {
    await exportTo('wide.parquet', 'wide');
    expect(statSync(join(dir, 'wide.parquet')).mode & 0o777).toBe(0o600);
    const { meta, rows } = await read('wide.parquet');
    const names = parquetSchema(meta).children.map((c) => c.element.name);
    expect(names).toEqual(['patient_id', 'patient_source_key', 'date', 'gad_7_70274_6', 'phq_9_44261_6', 'observations', 'superseded', 'last_updated']);
    expect(fieldOf(meta, 'date')).toMatchObject({ type: 'INT32', logical_type: { type: 'DATE' } });
    expect(fieldOf(meta, 'phq_9_44261_6')).toMatchObject({ type: 'INT64', repetition_type: 'OPTIONAL', logical_type: { type: 'INTEGER', bitWidth: 64 } });
    expect(fieldOf(meta, 'observations')).toMatchObject({ type: 'INT64' });

    // Expected from the server's list: the latest score (by effective time) per patient, UTC day and instrument.
    const column: Record<string, string> = { '44261-6': 'phq_9_44261_6', '70274-6': 'gad_7_70274_6' };
    const expected = new Map<string, { count: number; latest: Map<string, { at: number; score: bigint | null }> }>();
    for (const o of server) {
      const key = `${(o.subject as { reference: string }).reference.slice('Patient/'.length)}|${utcDay(effectiveOf(o))}`;
      const e = expected.get(key) ?? { count: 0, latest: new Map() };
      e.count++;
      const col = column[(o.code as { coding: { code: string }[] }).coding[0]!.code]!;
      const at = Date.parse(effectiveOf(o));
      if (!e.latest.has(col) || e.latest.get(col)!.at <= at) e.latest.set(col, { at, score: scoreOf(o) });
      expected.set(key, e);
    }
    expect(rows).toHaveLength(expected.size);
    for (const r of rows) {
      const day = (r.date as Date).toISOString().slice(0, 10);
      const e = expected.get(`${r.patient_id}|${day}`)!;
      expect(r.observations).toBe(BigInt(e.count));
      for (const col of Object.values(column)) expect(r[col]).toStrictEqual(e.latest.has(col) ? e.latest.get(col)!.score : null);
    }
  });

  it('refuses a value that does not fit its column type, naming the column and the row, and leaves no file', async () => {
    const p = await loadPatients(client, join(dir, '.care-etl/state.db'), sb.url, ['DEC']);
    sb.addObservations(TENANT, [observation(p.get('DEC')!, { id: 'decimal', valueInteger: undefined, valueQuantity: { value: 4.5 } })]);
    const err = await exportTo('bad.parquet', 'long').then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/Parquet column `value` is typed integer, but row \d+ holds a decimal number/);
    expect(err?.message).not.toContain('4.5');
    expect(() => statSync(join(dir, 'bad.parquet'))).toThrow();
    expect(() => statSync(join(dir, 'bad.parquet.partial'))).toThrow();
  });

  it('to stdout (a stream: no seek needed), the same typed file', async () => {
    const out = new Collect();
    await runExport({ mappingFile: join(dir, 'mapping-default.yaml'), out: '-', stdout: out, format: 'parquet', env: envFor(sb), patients: ['M2'] });
    const rows = (await parquetReadObjects({ file: bufferOf(out) })) as Record<string, unknown>[];
    expect(rows).toHaveLength(PER_PATIENT);
    expect(rows.every((r) => typeof r.value === 'bigint' && r.effective instanceof Date)).toBe(true);
  });

  it('writes row groups bounded in rows and in bytes, as rows come (memory flat in the number of rows)', async () => {
    const out = new Collect();
    const sink = new ParquetSink(out, [{ name: 'n', type: 'integer' }]);
    const total = MAX_GROUP_ROWS * 2 + 10;
    for (let i = 0; i < total; i++) {
      sink.write({ n: i % 7 === 0 ? undefined : i });
      if (i === MAX_GROUP_ROWS) expect(out.chunks.length).toBeGreaterThan(0); // the first group left before the last row came
    }
    await sink.end();
    const buffer = bufferOf(out);
    expect(parquetMetadata(buffer).row_groups.map((g) => Number(g.num_rows))).toEqual([MAX_GROUP_ROWS, MAX_GROUP_ROWS, 10]);
    const rows = (await parquetReadObjects({ file: buffer })) as { n: bigint | null }[];
    expect(rows).toHaveLength(total);
    expect(rows[7]!.n).toBeNull();
    expect(rows[total - 1]!.n).toBe(BigInt(total - 1));

    // Wide text rows: the byte bound ends the groups long before the row bound.
    const text = new Collect();
    const wide = new ParquetSink(text, [
      { name: 'note', type: 'string' },
      { name: 'day', type: 'date' },
    ]);
    const note = 'x'.repeat(1000);
    for (let i = 0; i < 5000; i++) wide.write({ note, day: '2024-02-29' });
    await wide.end();
    const groups = parquetMetadata(bufferOf(text)).row_groups.map((g) => Number(g.num_rows));
    const [first] = (await parquetReadObjects({ file: bufferOf(text), rowEnd: 1 })) as { note: string; day: Date }[];
    expect(first).toEqual({ note, day: new Date('2024-02-29T00:00:00Z') });
    expect(groups.length).toBeGreaterThanOrEqual(3);
    for (const g of groups) expect(g).toBeLessThanOrEqual(Math.ceil(MAX_GROUP_BYTES / 1000));
  });
});
