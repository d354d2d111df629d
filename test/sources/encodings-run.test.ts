import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CareClient } from '../../src/api/client.js';
import { resolveConnection } from '../../src/api/connection.js';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { copyTree } from '../helpers/cli.js';

/*
 * Issue 16 (encodings), through the pipeline: a Windows-1252 export (`csv.encoding: windows-1252`) and a UTF-16LE
 * one (byte-order mark) load with their exact names — in a dry run and into the sandbox over HTTP; a byte that is
 * not valid in the encoding costs its row, which the rejects file keeps with the offset and line.
 * Fixtures: test/fixtures/sources/encodings/ (mapping.yaml maps names as they are, no `$name`).
 */

const API_KEY = 'encodings-run-key';
const TENANT = 't-enc';
let sb: Sandbox;
const dirs: string[] = [];

beforeAll(async () => {
  sb = await startSandbox({ port: 0, apiKey: API_KEY, emrId: 'emr-enc', tenants: [TENANT] });
});
afterAll(async () => {
  await sb.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function project(): string {
  const dir = copyTree('test/fixtures/sources/encodings', 'care-etl-enc-');
  dirs.push(dir);
  return dir;
}

const ndjson = (file: string): Record<string, unknown>[] =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);

interface Named {
  identifier: { value: string }[];
  name: { use: string; family?: string; given: string[] }[];
  address: { line: string[] }[];
}

/** MRN → [official family, official given, nickname, address line]. */
function namesOf(resources: Record<string, unknown>[]): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const r of resources as unknown as Named[]) {
    const official = r.name.find((n) => n.use === 'official');
    const nick = r.name.find((n) => n.use === 'nickname');
    out[r.identifier[0].value] = [official?.family ?? '', official?.given[0] ?? '', nick?.given[0] ?? '', r.address[0].line[0]];
  }
  return out;
}

const EXPECTED: Record<string, string[]> = {
  '000101': ['Muñoz', 'José', '', 'Calle Año Nuevo 7'],
  '000102': ['Müller-Lüdenscheidt', 'Jürgen', '', 'Königstraße 12'],
  '000103': ['O’Neil', 'Beatriz', '“Bea”', '1 €uro Plaza'],
  '000104': ['Ångström', 'Renée', '', 'Île-de-France, 2'],
  '000201': ['Nguyễn', 'Thị', '', 'Phố Huế 12'],
  '000202': ['Żółć', 'Łukasz', '', 'ul. Długa 5, m. 3'],
  '000203': ['Ólafsdóttir', 'Sigríður', '“Sigga”', 'Laugavegur 1 😀'],
  '000204': ['ਅĀ Jones', 'Tamil', '∀Ā', 'multi\r\nline'],
};

describe('Windows-1252 and UTF-16LE exports through the pipeline', () => {
  it('a dry run writes every name exactly as in the export', async () => {
    const dir = project();
    const out = join(dir, 'out');
    const report = await runPipeline({ mappingFile: join(dir, 'mapping.yaml'), dryRun: true, outDir: out, env: {} });
    expect(report.totals).toMatchObject({ read: 8, rejected: 0, written: 8 });
    expect(namesOf(ndjson(join(out, 'Patient.ndjson')))).toEqual(EXPECTED);
  });

  it('a run loads them into the sandbox over HTTP with the same names', async () => {
    const dir = project();
    const env = { CARE_BASE_URL: sb.url, CARE_API_KEY: API_KEY, CARE_EMR_ID: 'emr-enc', CARE_TENANT_ID: TENANT };
    const report = await runPipeline({ mappingFile: join(dir, 'mapping.yaml'), env });
    expect(report.totals).toMatchObject({ read: 8, rejected: 0 });
    const client = new CareClient(resolveConnection({ baseUrl: sb.url, apiKey: API_KEY, emrId: 'emr-enc', tenantId: TENANT }), { retry: false });
    try {
      const patients: Record<string, unknown>[] = [];
      for await (const p of client.list('Patient', { pageSize: 100 })) patients.push(p as Record<string, unknown>);
      expect(namesOf(patients)).toEqual(EXPECTED);
    } finally {
      await client.close();
    }
  });

  it('an invalid byte costs its row: the rejects file names the offset and line and keeps the raw text; the other rows load', async () => {
    const dir = project();
    writeFileSync(
      join(dir, 'mapping.yaml'),
      readFileSync(join(dir, 'mapping.yaml'), 'utf8')
        // these two files lack columns the map reads (the column contract: docs/column-contract.md)
        .replace('path: patients-windows-1252.csv', 'path: invalid-windows-1252.csv, optional: [NICK, ADDRESS]')
        .replace('path: patients-utf-16le.csv', 'path: invalid-utf-8.csv, optional: [NICK]'),
    );
    const out = join(dir, 'out');
    const report = await runPipeline({ mappingFile: join(dir, 'mapping.yaml'), dryRun: true, outDir: out, env: {} });
    expect(report.totals).toMatchObject({ read: 7, rejected: 2, written: 5 });
    const rejects = ndjson(join(out, 'rejects.ndjson'));
    expect(rejects.map((r) => [(r.file as string).split('/').pop(), r.line, r.record, r.stage, (r.issues as { code: string; message: string }[])[0]])).toEqual([
      [
        'invalid-windows-1252.csv',
        3,
        2,
        'source',
        expect.objectContaining({
          code: 'encoding-invalid',
          message: expect.stringMatching(/^byte 0x81 at offset 47 \(line 3\): not defined in Windows-1252; /),
        }),
      ],
      [
        'invalid-utf-8.csv',
        4,
        3,
        'source',
        expect.objectContaining({ code: 'encoding-invalid', message: expect.stringMatching(/^byte 0xE9 at offset 107 \(line 5\): not valid UTF-8; /) }),
      ],
    ]);
    expect(rejects.map((r) => r.raw)).toEqual(['000302,Ana,M\ufffdller', '000403,Ana,Ruiz,"Calle 2\nCaf\ufffd"']);
    const written = ndjson(join(out, 'Patient.ndjson')) as unknown as Named[];
    expect(written.map((p) => `${p.identifier[0].value} ${p.name[0].given[0]} ${p.name[0].family}`)).toEqual([
      '000301 José Muñoz',
      '000303 Zoë Brontë',
      '000401 José Muñoz',
      '000402 Zoë Brontë',
      '000404 Jürgen Müller',
    ]);
  });
});
