import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parquetReadObjects } from 'hyparquet';
import { afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { cliInProcess, envFor, observation, parseCsv, ROOT, TENANT, workDir } from './helpers.js';

// Runs the built CLI in this worker (`runCliInProcess`) against an in-process sandbox on 127.0.0.1: ViewDefinitions of the public SQL-on-FHIR v2
// suite (test/fixtures/sql-on-fhir/), their Observations stored as given, exported and compared with `expect`.
beforeAll(() => {
  if (!existsSync(join(ROOT, 'dist/commands/export.js'))) throw new Error('dist/ is missing: run `npm run build` first');
});

const SUITE = fileURLToPath(new URL('../fixtures/sql-on-fhir/', import.meta.url));
interface SuiteCase {
  title: string;
  view: Record<string, unknown>;
  expect: Record<string, unknown>[];
}
function suiteCase(file: string, title: string): { resources: Record<string, unknown>[]; c: SuiteCase } {
  const suite = JSON.parse(readFileSync(join(SUITE, file), 'utf8')) as { resources: Record<string, unknown>[]; tests: SuiteCase[] };
  return { resources: suite.resources.filter((r) => r.resourceType === 'Observation'), c: suite.tests.find((t) => t.title === title)! };
}

/** A CSV cell as the expected value reads back: null → empty, numbers and booleans as text. */
const asCsv = (row: Record<string, unknown>) => Object.fromEntries(Object.entries(row).map(([k, v]) => [k, v === null ? '' : String(v)]));
const byId = (a: Record<string, unknown>, b: Record<string, unknown>) => String(a.id).localeCompare(String(b.id));

let sb: Sandbox;
let dir: string;
beforeEach(async () => {
  sb = await startSandbox({ observationsPerPatient: 0, pageSize: 2 });
  dir = workDir();
});
afterEach(async () => {
  await sb.close();
});

const exportCli = (args: string[]) => cliInProcess(['export', 'mapping-default.yaml', ...args], { cwd: dir, env: envFor(sb) });

describe('care-etl export --view', () => {
  test('a ViewDefinition of the SQL-on-FHIR suite, exported from the server to CSV, equals the suite’s expected rows', async () => {
    const { resources, c } = suiteCase('fn_oftype.json', 'select integer values');
    sb.addObservations(TENANT, resources);
    writeFileSync(join(dir, 'view.json'), JSON.stringify(c.view));
    const r = await exportCli(['--view', 'view.json', '--out', 'out.csv', '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ export: 'view', view: join(dir, 'view.json'), columns: ['id', 'integer_value'], rows: 3, scanned: 3 });
    const file = join(dir, 'out.csv');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, 'utf8').split('\r\n')[0]).toBe('id,integer_value'); // the view's columns, in its order
    expect(parseCsv(readFileSync(file, 'utf8')).sort(byId)).toEqual(c.expect.map(asCsv).sort(byId));
  });

  test('the same suite view to Parquet: read back by hyparquet, integers typed (INT64), the expected rows', async () => {
    const { resources, c } = suiteCase('fn_oftype.json', 'select integer values');
    sb.addObservations(TENANT, resources);
    writeFileSync(join(dir, 'view.json'), JSON.stringify(c.view));
    const r = await exportCli(['--view', 'view.json', '--format', 'parquet', '--out', 'out.parquet']);
    expect(r.code).toBe(0);
    const b = readFileSync(join(dir, 'out.parquet'));
    const rows = (await parquetReadObjects({ file: b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer })) as Record<string, unknown>[];
    expect(rows.map((row) => typeof row.integer_value)).toContain('bigint');
    const plain = rows.map((row) => ({ ...row, integer_value: typeof row.integer_value === 'bigint' ? Number(row.integer_value) : row.integer_value }));
    expect(plain.sort(byId)).toEqual([...c.expect].sort(byId));
  });

  test('NDJSON keeps the types; a where with a constant filters; forEach gives one row per coding', async () => {
    const { resources, c } = suiteCase('where.json', 'where path with greater than inequality');
    sb.addObservations(TENANT, resources);
    writeFileSync(join(dir, 'suite.json'), JSON.stringify(c.view));
    const r = await exportCli(['--view', 'suite.json', '--format', 'ndjson', '--out', '-']);
    expect(r.code).toBe(0);
    expect(
      r.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as unknown),
    ).toEqual(c.expect);

    sb.addObservations(TENANT, [
      observation('p1', {
        id: 'phq',
        code: {
          coding: [
            { system: 'http://loinc.org', code: '44261-6' },
            { system: 'urn:local', code: 'phq9' },
          ],
        },
      }),
    ]);
    const view = {
      resourceType: 'ViewDefinition',
      resource: 'Observation',
      constant: [{ name: 'loinc', valueString: 'http://loinc.org' }],
      where: [{ path: 'code.coding.where(system = %loinc).exists() and value.ofType(integer) >= 7' }],
      select: [
        {
          column: [
            { name: 'id', path: 'getResourceKey()' },
            { name: 'patient', path: 'subject.getReferenceKey(Patient)' },
            { name: 'score', path: 'value.ofType(integer)', type: 'integer' },
          ],
        },
        {
          forEach: 'code.coding',
          column: [
            { name: 'system', path: 'system' },
            { name: 'code', path: 'code' },
          ],
        },
      ],
    };
    writeFileSync(join(dir, 'codings.json'), JSON.stringify(view));
    const own = await exportCli(['--view', 'codings.json', '--format', 'ndjson']);
    expect(own.code).toBe(0);
    expect(
      own.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as unknown),
    ).toEqual([
      { id: 'phq', patient: 'p1', score: 7, system: 'http://loinc.org', code: '44261-6' },
      { id: 'phq', patient: 'p1', score: 7, system: 'urn:local', code: 'phq9' },
    ]);
  });

  test('an unsupported construct is refused with the file, the JSON path and the construct, before anything is fetched (exit 2)', async () => {
    sb.addObservations(TENANT, [observation('p1', { id: 'o1' })]);
    const view = {
      resource: 'Observation',
      select: [
        {
          column: [
            { name: 'id', path: 'id' },
            { name: 'low', path: 'value.ofType(Quantity).value.lowBoundary()' },
            { name: 'k', path: "code.coding.code | 'x'" },
          ],
        },
      ],
      where: [{ path: '%nope = 1' }],
    };
    writeFileSync(join(dir, 'bad.view.json'), JSON.stringify(view));
    const before = sb.stats().requests;
    const r = await exportCli(['--view', 'bad.view.json', '--out', 'bad.csv']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('bad.view.json');
    expect(r.stderr).toContain('select[0].column[1].path');
    expect(r.stderr).toContain('the function `lowBoundary()` is not supported');
    expect(r.stderr).toContain('select[0].column[2].path');
    expect(r.stderr).toContain('the operator `|` is not supported');
    expect(r.stderr).toContain('where[0].path');
    expect(r.stderr).toContain('the constant `%nope` is not defined');
    expect(sb.stats().requests).toBe(before); // nothing fetched
    expect(readdirSync(dir).filter((f) => f.startsWith('bad.csv'))).toEqual([]);
  });

  test('--column-names with --view is refused (the view names its columns), nothing fetched (exit 2)', async () => {
    writeFileSync(join(dir, 'ids.view.json'), JSON.stringify({ resource: 'Observation', select: [{ column: [{ name: 'id', path: 'id' }] }] }));
    const before = sb.stats().requests;
    const r = await exportCli(['--view', 'ids.view.json', '--column-names', 'snake', '--out', 'ids.csv']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--column-names=snake cannot also be provided when using --view|cannot also be provided when using --column-names/);
    expect(sb.stats().requests).toBe(before);
  });

  test('a column with several values without collection: true stops the export (exit 2) naming the column, not the values', async () => {
    sb.addObservations(TENANT, [
      observation('p1', {
        id: 'two',
        code: {
          coding: [
            { system: 'http://loinc.org', code: 'SECRET-1' },
            { system: 'urn:x', code: 'SECRET-2' },
          ],
        },
      }),
    ]);
    writeFileSync(join(dir, 'v.json'), JSON.stringify({ resource: 'Observation', select: [{ column: [{ name: 'code', path: 'code.coding.code' }] }] }));
    const r = await exportCli(['--view', 'v.json', '--out', 'v.csv']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('select[0].column[0].path');
    expect(r.stderr).toContain('collection');
    expect(r.stderr).not.toContain('SECRET');
    expect(existsSync(join(dir, 'v.csv'))).toBe(false);
  });
});
