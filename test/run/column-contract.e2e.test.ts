import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import type { ErrorJson } from '../../src/cli/render.js';
import { copyTree, runCliInProcess } from '../helpers/cli.js';

const API_KEY = 'contract-e2e-key-51c9';
let sb: Sandbox;
let env: Record<string, string>;

beforeAll(async () => {
  sb = await startSandbox({ apiKey: API_KEY, emrId: 'emr-contract', tenants: ['t-contract'] });
  env = { CARE_BASE_URL: sb.url, CARE_API_KEY: API_KEY, CARE_EMR_ID: 'emr-contract', CARE_TENANT_ID: 't-contract' };
});
afterAll(async () => {
  await sb.close();
});

/** A copy of examples/clinic whose mapping has `from` replaced by `to` (once); returns the mapping file. */
function clinicWith(...edits: [from: string, to: string][]): string {
  const dir = copyTree('examples/clinic', 'care-etl-contract-');
  const file = join(dir, 'mapping.yaml');
  let text = readFileSync(file, 'utf8');
  for (const [from, to] of edits) {
    expect(text.includes(from), `${from} in the example mapping`).toBe(true);
    text = text.replace(from, to);
  }
  writeFileSync(file, text);
  return file;
}

/** `mapping.yaml:line:col` of the first occurrence of `needle` (the field inside its expression). */
function positionOf(file: string, needle: string): string {
  const text = readFileSync(file, 'utf8');
  const at = text.indexOf(needle);
  const before = text.slice(0, at);
  return `mapping.yaml:${before.split('\n').length}:${at - before.lastIndexOf('\n')}`;
}

/** `run` stopped before anything was written or sent: exit 2, no `.care-etl/` (sandbox db, state, rejects), no request. */
async function expectRunWritesNothing(file: string, field: string): Promise<void> {
  const before = sb.stats().requests;
  const remote = await runCliInProcess(['run', file, '--progress', 'none'], { env });
  expect(remote.code, remote.stderr).toBe(2);
  expect(remote.stderr).toContain(`\`${field}\``);
  expect(sb.stats().requests).toBe(before);
  expect(sb.stats().resources['t-contract'] ?? {}).toEqual({});
  const embedded = await runCliInProcess(['run', file, '--progress', 'none']);
  expect(embedded.code, embedded.stderr).toBe(2);
  const plan = await runCliInProcess(['plan', file], { env });
  expect(plan.code, plan.stderr).toBe(2);
  expect(existsSync(join(file, '..', '.care-etl')), 'no .care-etl folder (sandbox db, state, rejects)').toBe(false);
}

describe('column contract (built CLI): a field an expression reads must be a column of its source', () => {
  it('a map reading `LASTNAME` where the header has `LAST`: validate names it, its line:col and `LAST`; run writes nothing', async () => {
    const file = clinicWith(['$name(LAST)', '$name(LASTNAME)']);
    const res = await runCliInProcess(['validate', file]);
    expect(res.code, res.stderr).toBe(2);
    expect(res.stderr).toContain(`${positionOf(file, 'LASTNAME')}: error [column-missing]`);
    expect(res.stderr).toMatch(/`map` reads `LASTNAME`, but source `patients` \(.*patients\.csv\) has no column `LASTNAME`; did you mean `LAST`\?/);
    const json = await runCliInProcess(['validate', file, '--json']);
    const body = JSON.parse(json.stdout) as ErrorJson;
    expect(body.error.issues).toHaveLength(1);
    expect(body.error.issues[0]).toMatchObject({ code: 'column-missing', path: '/resources/0/map' });
    // read from the syntax tree: the same with JSONata's interpreter only
    const interpreted = await runCliInProcess(['validate', file], { env: { CARE_JSONATA_COMPILE: '0' } });
    expect(interpreted.code).toBe(2);
    expect(interpreted.stderr).toContain(`${positionOf(file, 'LASTNAME')}: error [column-missing]`);
    await expectRunWritesNothing(file, 'LASTNAME');
  });

  it('a misspelled `key:` column, and every missing field at once (groupBy map of a `;` CSV)', async () => {
    const file = clinicWith(['key: MRN', 'key: MRNO'], ['"display": ROLE', '"display": ROLES']);
    const res = await runCliInProcess(['validate', file, '--json']);
    expect(res.code, res.stderr).toBe(2);
    const issues = (JSON.parse(res.stdout) as ErrorJson).error.issues;
    expect(issues.map((i) => [i.code, i.path, i.message.match(/did you mean `(\w+)`/)?.[1]])).toEqual([
      ['column-missing', '/resources/0/key', 'MRN'],
      ['column-missing', '/resources/2/map', 'ROLE'],
    ]);
    const text = await runCliInProcess(['validate', file]);
    expect(text.stderr).toContain(`${positionOf(file, 'MRNO')}: error [column-missing]`);
    expect(text.stderr).toContain(`${positionOf(file, 'ROLES')}: error [column-missing]`);
    await expectRunWritesNothing(file, 'MRNO');
  });

  it('a JSON source: a field none of the first records has (the did-you-mean ignores case)', async () => {
    const file = clinicWith(['"family": lastName', '"family": lastname']);
    const res = await runCliInProcess(['validate', file]);
    expect(res.code, res.stderr).toBe(2);
    expect(res.stderr).toContain(`${positionOf(file, 'lastname')}: error [column-missing]`);
    expect(res.stderr).toMatch(/no field `lastname` in the first 7 record\(s\) of source `clinicians` \(.*practitioners\.json\); did you mean `lastName`\?/);
    await expectRunWritesNothing(file, 'lastname');
  });

  it("a JSON field some records may lack: listed under the source's `optional:`, or read behind `$exists`", async () => {
    const missing = clinicWith(['"prefix": title ? [title]', '"prefix": suffix ? [suffix]']);
    expect((await runCliInProcess(['validate', missing])).code).toBe(2);
    const listed = clinicWith(['"prefix": title ? [title]', '"prefix": suffix ? [suffix]'], ['records: staff }', 'records: staff, optional: [suffix] }']);
    const ok = await runCliInProcess(['validate', listed]);
    expect(ok.code, ok.stderr).toBe(0);
    const guarded = clinicWith(['"prefix": title ? [title]', '"prefix": $exists(suffix) ? [suffix]']);
    const ok2 = await runCliInProcess(['validate', guarded]);
    expect(ok2.code, ok2.stderr).toBe(0);
  });

  it('a lookup file: a field its `key` expression reads must be a column of the lookup file', async () => {
    const file = clinicWith([
      'lookups:\n',
      'lookups:\n  roles: { path: data/assignments.csv, csv: { delimiter: ";" }, key: "$trim(NPIS)", value: ROLE, many: true }\n',
    ]);
    const res = await runCliInProcess(['validate', file]);
    expect(res.code, res.stderr).toBe(2);
    expect(res.stderr).toContain(`${positionOf(file, 'NPIS')}: error [column-missing]`);
    expect(res.stderr).toContain('`key` reads `NPIS`, but `data/assignments.csv` has no such column; did you mean `NPI`?');
  });
});
