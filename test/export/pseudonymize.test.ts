/**
 * Issue 13 item 3: keyed pseudonyms (HMAC-SHA-256) and the allowlisted copy every column is evaluated on.
 */
import { createHmac } from 'node:crypto';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CareClient } from '../../src/api/client.js';
import { redactKnown } from '../../src/core/secret.js';
import { DEFAULT_COLUMNS } from '../../src/export/default-columns.js';
import { exportObservations } from '../../src/export/observation-exporter.js';
import { Pseudonymizer, pseudonymizeObservation, resolvePseudonymKey } from '../../src/export/pseudonymize.js';
import { compileMapping } from '../../src/mapping/compile-mapping.js';
import { loadMapping } from '../../src/mapping/load-mapping.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { Ledger, type LedgerScope } from '../../src/state/ledger.js';
import { clientFor, Collect, FIXTURES, observation, parseCsv, TENANT } from './helpers.js';

const KEY = 'unit-test-key-0123456789abcdef';

describe('Pseudonymizer', () => {
  it('is HMAC-SHA-256 over a domain-separated input, hex, 32 characters; deterministic per key', () => {
    const p = new Pseudonymizer(KEY);
    const expected = createHmac('sha256', KEY).update('care-etl/v1\u0000source-key\u0000MRN-1').digest('hex').slice(0, 32);
    expect(p.sourceKey('MRN-1')).toBe(expected);
    expect(new Pseudonymizer(KEY).sourceKey('MRN-1')).toBe(expected);
    expect(new Pseudonymizer(`${KEY}x`).sourceKey('MRN-1')).not.toBe(expected);
    expect(p.serverId('Patient', 'MRN-1')).not.toBe(expected); // domains differ
    expect(p.serverId('Patient', '1')).not.toBe(p.serverId('Practitioner', '1'));
    expect(p.reference('https://x.example/fhir/Patient/abc/_history/2')).toBe(`Patient/${p.serverId('Patient', 'abc')}`);
    expect(p.reference('#contained')).toBeUndefined();
    expect(JSON.stringify({ p })).not.toContain(KEY);
    expect(String(p)).not.toContain(KEY);
  });

  it('keeps an allowlist: ids and references pseudonymised, identifiers, narrative, notes, displays and free-text values dropped', () => {
    const p = new Pseudonymizer(KEY);
    const obs = {
      resourceType: 'Observation',
      id: 'obs-1',
      meta: { versionId: '3', lastUpdated: '2024-05-01T00:00:00Z', source: 'urn:emr:alice', tag: [{ code: 'x' }] },
      identifier: [{ system: 'urn:clinic:obs', value: 'MRN-1-visit-3' }],
      text: { status: 'generated', div: '<div>Alice Example, PHQ-9</div>' },
      contained: [{ resourceType: 'Patient', id: 'c1', name: [{ family: 'Example' }] }],
      extension: [{ url: 'urn:x', valueString: 'Alice' }],
      status: 'final',
      code: { coding: [{ system: 'http://loinc.org', code: '44261-6' }], text: 'PHQ-9' },
      subject: { reference: 'Patient/p1', display: 'Alice Example', identifier: { value: 'MRN-1' } },
      performer: [{ reference: 'Practitioner/dr1', display: 'Dr Bob Smith' }, { display: 'Nurse Carol' }],
      encounter: { reference: 'urn:uuid:1234' },
      effectiveDateTime: '2024-05-01T10:00:00Z',
      valueString: 'Alice says hi',
      note: [{ text: 'called Alice' }],
      component: [
        { code: { text: 'item 1' }, valueInteger: 2 },
        { code: { text: 'comment' }, valueString: 'Alice' },
      ],
    };
    const { observation: o, real } = pseudonymizeObservation(obs, p);
    const subject = `Patient/${p.serverId('Patient', 'p1')}`;
    expect(o).toEqual({
      resourceType: 'Observation',
      id: p.serverId('Observation', 'obs-1'),
      meta: { versionId: '3', lastUpdated: '2024-05-01T00:00:00Z' },
      status: 'final',
      code: obs.code,
      effectiveDateTime: '2024-05-01T10:00:00Z',
      component: [{ code: { text: 'item 1' }, valueInteger: 2 }, { code: { text: 'comment' } }],
      subject: { reference: subject },
      performer: [{ reference: `Practitioner/${p.serverId('Practitioner', 'dr1')}` }],
    });
    expect(real.get(subject)).toBe('Patient/p1');
    expect(JSON.stringify(o)).not.toMatch(/Alice|Bob|Carol|MRN-1|obs-1|"p1"|dr1/);

    const kept = pseudonymizeObservation(obs, p, true).observation;
    expect(kept).toMatchObject({ valueString: 'Alice says hi', note: obs.note, subject: { reference: subject, display: 'Alice Example' } });
    expect(kept).not.toHaveProperty('identifier');
    expect(kept).not.toHaveProperty('text');
  });

  describe('resolvePseudonymKey', () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-pseudo-'));

    it('reads the file (trimmed; it wins over the variable), else the variable; registers it as a secret', () => {
      const file = join(dir, 'k1');
      writeFileSync(file, 'file-key-abcdefghijklmnop\n');
      chmodSync(file, 0o600);
      expect(resolvePseudonymKey({ keyFile: file, env: { CARE_PSEUDONYM_KEY: 'env-key-abcdefghijklmnop' } })).toBe('file-key-abcdefghijklmnop');
      expect(resolvePseudonymKey({ env: { CARE_PSEUDONYM_KEY: ' env-key-abcdefghijklmnop ' } })).toBe('env-key-abcdefghijklmnop');
      expect(redactKnown('key=file-key-abcdefghijklmnop; env-key-abcdefghijklmnop')).toBe('key=[redacted]; [redacted]');
    });

    it('refuses a missing, empty, unreadable or short key (exit 2)', () => {
      expect(() => resolvePseudonymKey({ env: {} })).toThrow(expect.objectContaining({ exitCode: 2, message: expect.stringContaining('CARE_PSEUDONYM_KEY') }));
      writeFileSync(join(dir, 'empty'), '\n');
      expect(() => resolvePseudonymKey({ keyFile: join(dir, 'empty'), env: {} })).toThrow(
        expect.objectContaining({ exitCode: 2, message: expect.stringContaining('empty') }),
      );
      expect(() => resolvePseudonymKey({ keyFile: join(dir, 'missing'), env: {} })).toThrow(
        expect.objectContaining({ exitCode: 2, message: expect.stringContaining('ENOENT') }),
      );
      expect(() => resolvePseudonymKey({ env: { CARE_PSEUDONYM_KEY: 'short-key' } })).toThrow(
        expect.objectContaining({ exitCode: 2, message: expect.stringContaining('too short') }),
      );
    });
  });
});

describe('pseudonymised exports against the sandbox', () => {
  let sb: Sandbox;
  let c: CareClient;
  let ledger: Ledger;
  let scope: LedgerScope;
  beforeEach(async () => {
    sb = await startSandbox({ observationsPerPatient: 0, pageSize: 10 });
    c = clientFor(sb, { retry: false });
    ledger = Ledger.open(':memory:');
    scope = ledger.scope(sb.url, TENANT);
    const runId = scope.beginRun({ mappingFile: 'mapping.yaml', dryRun: false });
    scope.recordSynced({ mapping: 'patient', key: 'MRN-7', resourceType: 'Patient', serverId: 'srv7', hash: 'h', runId });
    sb.addObservations(TENANT, [
      observation('srv7', { id: 'o1', subject: { reference: 'Patient/srv7', display: 'Alice Example' }, performer: [{ display: 'Dr Bob Smith' }] }),
      observation('srv7', { id: 'o2', valueInteger: undefined, valueString: 'Alice feels fine' }),
    ]);
  });
  afterEach(async () => {
    ledger.close();
    await c.close();
    await sb.close();
  });

  it('default columns: ids and source keys as pseudonyms, free text gone; $sourceKey in custom columns gives the pseudonym', async () => {
    const p = new Pseudonymizer(KEY);
    const out = new Collect();
    const report = await exportObservations({ client: c, scope, output: out, pseudonymizer: p });
    expect(report).toMatchObject({ pseudonymized: true, rows: 2, columns: [...DEFAULT_COLUMNS] });
    const rows = parseCsv(out.text);
    expect(rows.map((r) => [r.id, r.patient_id, r.patient_source_key, r.value, r.performer])).toEqual([
      [p.serverId('Observation', 'o1'), p.serverId('Patient', 'srv7'), p.sourceKey('MRN-7'), '7', ''],
      [p.serverId('Observation', 'o2'), p.serverId('Patient', 'srv7'), p.sourceKey('MRN-7'), '', `Patient/${p.serverId('Patient', 'srv7')}`],
    ]);
    expect(out.text).not.toMatch(/Alice|Bob|MRN-7|srv7|\bo1\b|\bo2\b/);

    const custom = compileMapping(await loadMapping(`${FIXTURES}mapping.yaml`)).exports.get('observations')!;
    const c2 = new Collect();
    await exportObservations({ client: c, scope, output: c2, columns: custom, pseudonymizer: p, format: 'ndjson' });
    const lines = c2.text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => [l.id, l.mrn])).toEqual([
      [p.serverId('Observation', 'o1'), p.sourceKey('MRN-7')],
      [p.serverId('Observation', 'o2'), p.sourceKey('MRN-7')],
    ]);

    const kept = new Collect();
    await exportObservations({ client: c, scope, output: kept, pseudonymizer: p, keepFreeText: true });
    expect(parseCsv(kept.text).map((r) => [r.value, r.performer])).toEqual([
      ['7', 'Dr Bob Smith'],
      ['Alice feels fine', `Patient/${p.serverId('Patient', 'srv7')}`],
    ]);
  });

  it('keeps its own watermark (a pseudonymised export is another deliverable)', async () => {
    const { report } = { report: await exportObservations({ client: c, scope, output: new Collect(), pseudonymizer: new Pseudonymizer(KEY), since: 'last' }) };
    expect(report.watermarkName).toBe('export:default?pseudonymized');
    expect(scope.getWatermark('export:default')).toBeUndefined();
    const wide = await exportObservations({
      client: c,
      scope,
      output: new Collect(),
      pseudonymizer: new Pseudonymizer(KEY),
      since: 'last',
      layout: 'wide',
      tempDir: mkdtempSync(join(tmpdir(), 'care-etl-pw-')),
    });
    expect(wide.watermarkName).toBe('export:wide?pseudonymized');
  });
});
