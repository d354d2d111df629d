/**
 * A run reads a mapping's keys from the state once, at its first row, instead of asking per row (issue 28): a second
 * run must still know every key it loaded — a key with a lone UTF-16 surrogate too, which SQLite keeps as it came and
 * reads back as replacement characters — and create only the new ones. Real HTTP against the sandbox.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { listAll, run } from './helpers.js';

const TENANT = 't-known-keys';
let sb: Sandbox;

beforeAll(async () => {
  sb = await startSandbox({ tenants: [TENANT], observationsPerPatient: 0 });
});
afterAll(async () => {
  await sb.close();
});

describe('keys read up front', () => {
  const dir = mkdtempSync(join(tmpdir(), 'care-etl-known-keys-'));
  const mapping = join(dir, 'mapping.yaml');
  writeFileSync(
    mapping,
    `version: 1
sources:
  src: { path: data.json }
resources:
  - name: patient
    type: Patient
    from: src
    key: MRN
    map: |
      { "identifier": [{ "system": "urn:care-etl-test:mrn", "value": MRN }], "active": true }
`,
  );
  // JSON escapes: the first key holds a lone high surrogate, which no UTF-8 file can.
  const rows = (mrns: string[]) => writeFileSync(join(dir, 'data.json'), JSON.stringify(mrns.map((MRN) => ({ MRN }))).replaceAll('\ud800', '\\ud800'));
  const opts = { statePath: join(dir, 'state.db'), rejectsFile: join(dir, 'rejects.ndjson') };

  it('a second run knows every key it loaded, a lone surrogate included, and creates only the new ones', async () => {
    rows(['A\ud800', 'B', 'C']);
    expect((await run(sb, TENANT, mapping, opts)).totals).toMatchObject({ created: 3, unchanged: 0, rejected: 0 });
    rows(['A\ud800', 'B', 'C', 'D']);
    expect((await run(sb, TENANT, mapping, opts)).totals).toMatchObject({ created: 1, unchanged: 3, adopted: 0, rejected: 0 });
    expect((await run(sb, TENANT, mapping, opts)).totals).toMatchObject({ created: 0, unchanged: 4, rejected: 0 });
    expect(await listAll(sb, TENANT, 'Patient')).toHaveLength(4);
  });
});
