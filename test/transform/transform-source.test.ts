import { describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadMapping } from '../../src/mapping/load-mapping.js';
import { compileMapping } from '../../src/mapping/compile-mapping.js';
import { openSource } from '../../src/sources/open-source.js';
import type { SourceConfig } from '../../src/sources/types.js';
import { transformSource, type TransformItem } from '../../src/transform/transform-source.js';
import { validateResource } from '../../src/validate/resource-validator.js';

async function transform(csv: string, resourceYaml: string): Promise<TransformItem[]> {
  const dir = mkdtempSync(join(tmpdir(), 'transform-'));
  writeFileSync(join(dir, 'rows.csv'), csv);
  writeFileSync(join(dir, 'mapping.yaml'), `version: 1\nsources:\n  rows: { path: rows.csv }\nresources:\n${resourceYaml}`);
  const compiled = compileMapping(await loadMapping(join(dir, 'mapping.yaml'), { env: {} }));
  const res = [...compiled.resources.values()].at(-1)!;
  const ctx = { now: new Date('2026-01-01T00:00:00Z'), resolveRef: (n: string, k: string) => `Patient/${n}-${k}` };
  const out: TransformItem[] = [];
  for await (const item of transformSource(res, openSource(compiled.mapping.sources.rows as SourceConfig), { ctx, validate: validateResource })) out.push(item);
  return out;
}

const patient = `  - name: patient
    type: Patient
    from: rows
    key: MRN
    map: '{ "identifier": [{ "system": "urn:x", "value": MRN }], "active": ACTIVE = "Y" }'
`;

describe('transformSource', () => {
  it('maps rows in source order, rejects a repeated key on its own line and keeps the first', async () => {
    const items = await transform('MRN,ACTIVE\n1,Y\n2,N\n1,N\n', patient);
    expect(items.map((i) => (i.ok ? `ok:${i.key}:${i.origin.line}` : `rej:${i.key}:${i.line}:${i.issues[0].code}`))).toEqual([
      'ok:1:2',
      'ok:2:3',
      'rej:1:4:duplicate-key',
    ]);
    const rej = items[2] as Extract<TransformItem, { ok: false }>;
    expect(rej.issues[0].message).toMatch(/line 2/);
    expect(rej.row).toEqual({ MRN: '1', ACTIVE: 'N' });
  });

  it('rejects a resource that breaks the JSON Schema at the validate stage with the JSON path', async () => {
    const items = await transform('MRN,ACTIVE\n1,Y\n', `  - name: patient
    type: Patient
    from: rows
    key: MRN
    map: '{ "identifier": [{ "system": "urn:x", "value": MRN }], "birthDate": "yesterday" }'
`);
    expect(items[0].ok).toBe(false);
    const rej = items[0] as Extract<TransformItem, { ok: false }>;
    expect(rej.stage).toBe('validate');
    expect(rej.issues.map((i) => i.path)).toContain('/birthDate');
  });

  it('groupBy: rows with the same group key become one resource; the map sees the group as an array', async () => {
    const items = await transform('MRN,NPI\n1,a\n2,b\n1,c\n', `${patient}  - name: careteam
    type: CareTeam
    from: rows
    groupBy: MRN
    map: |
      { "status": "active", "subject": { "reference": $ref("patient", $[0].MRN) },
        "participant": [$.{ "member": { "reference": "Practitioner/" & NPI } }] }
`);
    expect(items.every((i) => i.ok)).toBe(true);
    const teams = items as Extract<TransformItem, { ok: true }>[];
    expect(teams.map((t) => [t.key, t.lines])).toEqual([
      ['1', [2, 4]],
      ['2', [3]],
    ]);
    expect(teams[0].resource).toEqual({
      resourceType: 'CareTeam',
      status: 'active',
      subject: { reference: 'Patient/patient-1' },
      participant: [{ member: { reference: 'Practitioner/a' } }, { member: { reference: 'Practitioner/c' } }],
    });
  });

  it('passes source rejects through with their line and raw text', async () => {
    const items = await transform('MRN,ACTIVE\n1,Y,extra\n2,Y\n', patient);
    expect(items[0]).toMatchObject({ ok: false, stage: 'source', line: 2, raw: '1,Y,extra' });
    expect(items[1]).toMatchObject({ ok: true, key: '2' });
  });
});
