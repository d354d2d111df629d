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

async function transform(csv: string, resourceYaml: string, opts: { compile?: boolean; skipped?: number[] } = {}): Promise<TransformItem[]> {
  const dir = mkdtempSync(join(tmpdir(), 'transform-'));
  writeFileSync(join(dir, 'rows.csv'), csv);
  writeFileSync(join(dir, 'mapping.yaml'), `version: 1\nsources:\n  rows: { path: rows.csv }\nresources:\n${resourceYaml}`);
  const compiled = compileMapping(await loadMapping(join(dir, 'mapping.yaml'), { env: {} }), { compileExpressions: opts.compile ?? true });
  const res = [...compiled.resources.values()].at(-1)!;
  const ctx = { now: new Date('2026-01-01T00:00:00Z'), resolveRef: (n: string, k: string) => `Patient/${n}-${k}` };
  const out: TransformItem[] = [];
  const onSkip = (n: number) => opts.skipped?.push(n);
  for await (const item of transformSource(res, openSource(compiled.mapping.sources.rows as SourceConfig), { ctx, validate: validateResource, onSkip }))
    out.push(item);
  return out;
}

const brief = (items: TransformItem[]) => items.map((i) => (i.ok ? `ok:${i.key}` : `rej:${i.line}:${i.issues[0].code}`));

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
    const items = await transform(
      'MRN,ACTIVE\n1,Y\n',
      `  - name: patient
    type: Patient
    from: rows
    key: MRN
    map: '{ "identifier": [{ "system": "urn:x", "value": MRN }], "birthDate": "yesterday" }'
`,
    );
    expect(items[0].ok).toBe(false);
    const rej = items[0] as Extract<TransformItem, { ok: false }>;
    expect(rej.stage).toBe('validate');
    expect(rej.issues.map((i) => i.path)).toContain('/birthDate');
  });

  it('groupBy: rows with the same group key become one resource; the map sees the group as an array', async () => {
    const items = await transform(
      'MRN,NPI\n1,a\n2,b\n1,c\n',
      `${patient}  - name: careteam
    type: CareTeam
    from: rows
    groupBy: MRN
    map: |
      { "status": "active", "subject": { "reference": $ref("patient", $[0].MRN) },
        "participant": [$.{ "member": { "reference": "Practitioner/" & NPI } }] }
`,
    );
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

  describe('skipped rows: `where:` false, or a map that produces nothing (neither yielded nor rejected)', () => {
    const rows = 'MRN,STATUS\n1,active\n2,deleted\n3,active\n4,\n';
    for (const compile of [true, false]) {
      const how = compile ? 'compiled' : 'interpreted';
      it(`where: rows for which it is false are skipped, before the key is read (${how})`, async () => {
        const skipped: number[] = [];
        // row 4 has no MRN: left out by where, so no key-missing reject
        const items = await transform(
          'MRN,STATUS\n1,active\n2,deleted\n3,active\n,deleted\n',
          patient.replace('    map:', '    where: STATUS != "deleted"\n    map:'),
          { compile, skipped },
        );
        expect(brief(items)).toEqual(['ok:1', 'ok:3']);
        expect(skipped).toEqual([1, 1]);
      });

      it(`where: JSONata truthiness — nothing, "" and 0 are false, text and numbers true (${how})`, async () => {
        const skipped: number[] = [];
        const items = await transform(rows, patient.replace('    map:', '    where: STATUS\n    map:'), { compile, skipped });
        expect(brief(items)).toEqual(['ok:1', 'ok:2', 'ok:3']);
        expect(skipped).toEqual([1]);
      });

      it(`a map that produces nothing skips the row instead of rejecting it (${how})`, async () => {
        const skipped: number[] = [];
        const items = await transform(rows, patient.replace(`map: '{`, `map: 'STATUS != "deleted" ? {`), { compile, skipped });
        expect(brief(items)).toEqual(['ok:1', 'ok:3', 'ok:4']);
        expect(skipped).toEqual([1]);
      });

      it(`groupBy: where filters rows before grouping; a group whose map produces nothing skips all its rows (${how})`, async () => {
        const skipped: number[] = [];
        const team = `${patient}  - name: careteam
    type: CareTeam
    from: rows
    groupBy: MRN
    where: NPI != "x"
    map: |
      $count($[STATUS = "active"]) = 0 ? undefined : { "status": "active", "subject": { "reference": $ref("patient", $[0].MRN) },
        "participant": [$.{ "member": { "reference": "Practitioner/" & NPI } }] }
`;
        const items = await transform('MRN,NPI,STATUS\n1,a,active\n1,x,active\n2,b,ended\n2,c,ended\n1,d,active\n', team, { compile, skipped });
        expect(items.map((i) => (i.ok ? [i.key, i.lines] : 'rej'))).toEqual([['1', [2, 6]]]); // line 3 (NPI x) left out of the group
        expect((items[0] as Extract<TransformItem, { ok: true }>).resource).toMatchObject({
          participant: [{ member: { reference: 'Practitioner/a' } }, { member: { reference: 'Practitioner/d' } }],
        });
        expect(skipped).toEqual([1, 2]); // the row by where, then the two rows of group 2
      });
    }

    it('an error evaluating where rejects the row at the where expression (transform stage)', async () => {
      const items = await transform(rows, patient.replace('    map:', '    where: $number(STATUS) > 0\n    map:'));
      expect(items).toHaveLength(4);
      const rej = items[0] as Extract<TransformItem, { ok: false }>;
      expect(rej).toMatchObject({ ok: false, stage: 'transform', line: 2 });
      expect(rej.issues[0]).toMatchObject({ code: 'jsonata', path: '/resources/0/where' });
      expect(rej.issues[0].message).toContain('mapping `patient` where:');
      expect(rej.issues[0].location).toMatchObject({ line: 9, column: 12 });
      expect(rej.issues[0].message).not.toContain('active');
    });

    it('where is checked before anything runs: syntax, $ref and unknown names are configuration errors at file:line:col', async () => {
      const err = await transform(rows, patient.replace('    map:', '    where: $ref("patient", MRN) and STATUS = = 1 or $nope(STATUS)\n    map:')).catch(
        (e: unknown) => e,
      );
      expect(err).toMatchObject({ exitCode: 2 });
      const issues = (err as { issues: { code: string; path: string; location: { line: number } }[] }).issues;
      expect(issues.map((i) => [i.code, i.path, i.location.line])).toEqual([['jsonata-syntax', '/resources/0/where', 9]]);
      const refErr = await transform(rows, patient.replace('    map:', '    where: $ref("patient", MRN) and $nope(STATUS)\n    map:')).catch((e: unknown) => e);
      const refIssues = (refErr as { issues: { code: string; path: string; location: { line: number; column: number } }[] }).issues;
      expect(refIssues.map((i) => [i.code, i.path, i.location.line, i.location.column])).toEqual([
        ['ref-context', '/resources/0/where', 9, 17], // at the call's first argument, as for the other expressions
        ['function-unknown', '/resources/0/where', 9, 37],
      ]);
    });

    it('a skipped row is as if absent: its key is not taken, and a repeated key that maps to nothing is skipped, not a duplicate', async () => {
      const skipped: number[] = [];
      const map = patient.replace(`map: '{`, `map: 'STATUS != "deleted" ? {`);
      const items = await transform('MRN,STATUS\n1,deleted\n1,active\n1,deleted\n1,active\n', map, { skipped });
      expect(brief(items)).toEqual(['ok:1', 'rej:5:duplicate-key']);
      expect(skipped).toEqual([1, 1]);
    });
  });
});
