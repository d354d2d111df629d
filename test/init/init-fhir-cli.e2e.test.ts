import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Issue } from '../../src/core/issues.js';
import { ROOT, runCli, runCliInProcess } from '../helpers/cli.js';

const NDJSON = join(ROOT, 'test/fixtures/init/fhir-ndjson');

describe('care-etl init on FHIR NDJSON, then validate (built CLI)', () => {
  it('the TODO count init prints is the number of `todo` issues validate lists, each with its text; filled, the mapping is valid', async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'care-etl-init-')), 'mapping.yaml');
    const init = await runCli(['init', '--from', join(NDJSON, 'Patient.ndjson'), '--from', join(NDJSON, 'Encounter.ndjson'), '--out', out]);
    expect(init.code, init.stderr).toBe(0);
    expect(init.stdout).toMatch(/patient\s+Patient\s+id/);
    expect(init.stdout).toMatch(/careteam\s+CareTeam\s+groupBy subject \(patient\)/);
    expect(init.stdout).toContain('FHIR resources: ready-made mappings in mappings/fhir-r4-bulk/mapping.yaml and mappings/synthea-fhir/mapping.yaml');
    const printed = Number(/^(\d+) TODO markers? to resolve/m.exec(init.stdout)?.[1]);
    expect(printed).toBe(1);

    const v = await runCliInProcess(['validate', out, '--json']);
    expect(v.code).toBe(2);
    const issues = (JSON.parse(v.stdout) as { error: { issues: Issue[] } }).error.issues;
    expect(issues.map((i) => i.code)).toEqual(Array(printed).fill('todo'));
    expect(issues[0]!.message).toMatch(/^mapping `careteam` map: TODO — Encounter participants refer to practitioners, but no Practitioner export was given/);

    writeFileSync(out, readFileSync(out, 'utf8').replace(/\$TODO\("Encounter participants[^"]*"\)/, '[]'));
    const ok = await runCliInProcess(['validate', out, '--sample', '100']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/careteam\s+7\s+3\s+0/);
  });

  it('PractitionerRole is named as not mapped, and no TODO is left for a complete export', async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'care-etl-init-')), 'mapping.yaml');
    const files = ['Patient', 'Practitioner', 'PractitionerRole', 'Encounter'].flatMap((t) => ['--from', join(NDJSON, `${t}.ndjson`)]);
    const init = await runCliInProcess(['init', ...files, '--out', out]);
    expect(init.code, init.stderr).toBe(0);
    expect(init.stdout).toMatch(/Not mapped: \S*PractitionerRole\.ndjson \(PractitionerRole\) — not a mapping: this API has no PractitionerRole/);
    expect(init.stdout).toContain('No TODO marker left: check the mapping on the first rows with `care-etl validate');
    const v = await runCliInProcess(['validate', out, '--sample', '100']);
    expect(v.code, v.stderr).toBe(0);
    expect(v.stdout).toMatch(/practitioner\s+3\s+3\s+0/);
  });
});
