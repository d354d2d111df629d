/**
 * The report's keys gone from the export, over two mappings (`onMissing: ignore`): the first 1,000 are listed, each
 * mapping's in key order, and every one is counted. The mapping that settles second reads only what is left of the
 * 1,000 (`notSeenSince(…, limit)`) and counts all of its keys gone (`notSeenCount`). Real sandbox, in-process pipeline.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { FIXTURES, makeClinic, mrn, npi, patientsCsv, practitionersCsv, run } from './helpers.js';

const TENANT = 't-vanished';
const N = 700; // patients, and as many practitioners: 2 × 699 gone in the second run, more than the 1,000 listed

let sb: Sandbox;
beforeAll(async () => {
  sb = await startSandbox({ tenants: [TENANT], observationsPerPatient: 0 });
});
afterAll(async () => {
  await sb.close();
});

describe('keys gone from the export, over two mappings', () => {
  it(`lists the first 1,000 (each mapping a prefix of its keys in key order) and counts all ${2 * (N - 1)}`, async () => {
    const clinic = makeClinic(N, N, 'care-etl-vanished-');
    // The clinic's patients and practitioners only: both `onMissing: ignore` (care teams would end theirs).
    const clinicMapping = readFileSync(join(FIXTURES, 'clinic-mapping.yaml'), 'utf8');
    const cut = clinicMapping.indexOf('  - name: careteam');
    expect(cut).toBeGreaterThan(0);
    writeFileSync(clinic.mapping, clinicMapping.slice(0, cut));
    const opts = { statePath: clinic.state, rejectsFile: clinic.rejects };

    const first = await run(sb, TENANT, clinic.mapping, opts);
    expect(first.exitCode).toBe(0);
    expect(first.totals.created).toBe(2 * N);
    expect(first.vanishedCount).toBeUndefined();

    // The second export keeps one row of each.
    clinic.writePatients(patientsCsv(1));
    clinic.writePractitioners(practitionersCsv(1));
    const second = await run(sb, TENANT, clinic.mapping, opts);
    expect(second.exitCode).toBe(0);
    expect(second.totals.created).toBe(0);
    expect(second.vanishedCount).toBe(2 * (N - 1));
    const listed = second.vanished ?? [];
    expect(listed).toHaveLength(1000);

    const gone = {
      patient: Array.from({ length: N - 1 }, (_, i) => mrn(i + 2)).sort(),
      practitioner: Array.from({ length: N - 1 }, (_, j) => npi(j + 2)).sort(),
    };
    const byMapping = { patient: [] as string[], practitioner: [] as string[] };
    for (const v of listed) {
      expect(v.serverId).toEqual(expect.any(String));
      expect(Object.keys(byMapping)).toContain(v.mapping);
      byMapping[v.mapping as keyof typeof byMapping].push(v.key);
    }
    // The mapping that settled first is listed whole, the other one up to the cap: each a prefix in key order.
    expect([byMapping.patient.length, byMapping.practitioner.length].sort((a, b) => a - b)).toEqual([1000 - (N - 1), N - 1]);
    expect(byMapping.patient).toEqual(gone.patient.slice(0, byMapping.patient.length));
    expect(byMapping.practitioner).toEqual(gone.practitioner.slice(0, byMapping.practitioner.length));
    // One warning per mapping, with its full count.
    expect(second.warnings.filter((w) => /key\(s\) loaded by an earlier run are no longer in the export/.test(w)).sort()).toEqual([
      expect.stringMatching(new RegExp(`^patient: ${N - 1} key`)),
      expect.stringMatching(new RegExp(`^practitioner: ${N - 1} key`)),
    ]);
  }, 60_000);
});
