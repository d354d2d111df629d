/**
 * The validators compiled at build time (scripts/build-validators.mjs, loaded by a built CLI) against the same schemas
 * compiled by ajv in this process (what running from src/ uses): on valid bodies and mappings and on every mutation
 * of them — a field removed, given another type, a bad date, an unknown property — both give the same verdict and the
 * same errors, field for field (the mapping's verbose errors include the failing schema and value). Then a built
 * process loads the generated ones (never ajv), and a schema file changed after the build is compiled afresh.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ValidateFunction } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { MAPPING_SCHEMA_FILE, mappingAjv, RESOURCE_SCHEMA_FILES, resourceAjv, resourceFormats, schemaId } from '../../src/schemas/validator-setup.js';
import { sampleCareTeam, samplePatient, samplePractitioner } from '../sandbox/helpers.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const require = createRequire(import.meta.url);
const generated = (name: string) => require(join(root, 'dist', 'schemas', name)) as { validators(formats: object): Record<string, ValidateFunction> };

/** Every mutation of `value` at one path: removed, replaced by a value of each other type, an unknown key added. */
function* mutations(value: unknown, replacements: unknown[]): Generator<unknown> {
  const copy = (): unknown => structuredClone(value);
  function* at(node: unknown, path: (string | number)[]): Generator<(string | number)[]> {
    yield path;
    if (node && typeof node === 'object') for (const [k, v] of Object.entries(node)) yield* at(v, [...path, Array.isArray(node) ? Number(k) : k]);
  }
  for (const path of at(value, [])) {
    if (path.length === 0) continue;
    const set = (fn: (parent: Record<string | number, unknown>, key: string | number) => void): unknown => {
      const c = copy() as Record<string | number, unknown>;
      const parent = path.slice(0, -1).reduce<Record<string | number, unknown>>((n, k) => n[k] as Record<string | number, unknown>, c);
      fn(parent, path.at(-1)!);
      return c;
    };
    yield set((p, k) => (Array.isArray(p) ? p.splice(Number(k), 1) : delete p[k]));
    for (const r of replacements) yield set((p, k) => (p[k] = structuredClone(r)));
    yield set((p, k) => {
      const v = p[k];
      if (v && typeof v === 'object' && !Array.isArray(v)) (v as Record<string, unknown>).unexpectedKey = 1;
    });
  }
}

function sameVerdicts(a: ValidateFunction, b: ValidateFunction, inputs: Iterable<unknown>): { checked: number; invalid: number } {
  let checked = 0;
  let invalid = 0;
  for (const input of inputs) {
    const okA = a(input);
    const okB = b(input);
    expect(okA).toBe(okB);
    expect(a.errors ?? null).toEqual(b.errors ?? null);
    checked++;
    if (!okA) invalid++;
  }
  return { checked, invalid };
}

const RESOURCE_REPLACEMENTS = [null, 42, 1.5, true, 'x', '', '2021-02-30', '2024-13-01T00:00:00Z', 'bad id', [], {}, [1], ['x']];

describe('validators compiled at build time', () => {
  it('resource bodies: the same verdict and errors as ajv compiling the schemas now, on every mutation of valid bodies', () => {
    const built = generated('resource-validators.generated.cjs').validators(resourceFormats());
    const ajv = resourceAjv();
    const bodies: Record<string, unknown[]> = {
      Patient: [samplePatient(), { ...samplePatient(), id: 'p-1', meta: { versionId: '1', lastUpdated: '2024-01-01T00:00:00Z' }, birthDate: '2000-02-29' }],
      Practitioner: [samplePractitioner()],
      CareTeam: [sampleCareTeam('p-1', 'pr-1'), { ...sampleCareTeam('p-1', 'pr-1'), status: 'active', period: { start: '2024-01-01', end: '2024-02-01' } }],
      Observation: [
        {
          resourceType: 'Observation',
          id: 'o1',
          status: 'final',
          code: { text: 'PHQ-9' },
          subject: { reference: 'Patient/p-1' },
          effectiveDateTime: '2024-01-01T10:00:00Z',
        },
      ],
      Bundle: [
        {
          resourceType: 'Bundle',
          id: 'b',
          type: 'searchset',
          link: [{ relation: 'next', url: 'http://x/Patient?page=2' }],
          entry: [{ fullUrl: 'http://x/Patient/p', resource: samplePatient() }],
        },
      ],
    };
    let invalid = 0;
    for (const type of Object.keys(RESOURCE_SCHEMA_FILES)) {
      const compiled = ajv.getSchema(schemaId(RESOURCE_SCHEMA_FILES[type as keyof typeof RESOURCE_SCHEMA_FILES]))!;
      expect(built[type], type).toBeTypeOf('function');
      for (const body of bodies[type]!) {
        expect(compiled(body), `${type} sample is valid`).toBe(true);
        const r = sameVerdicts(built[type]!, compiled, [body, ...mutations(body, RESOURCE_REPLACEMENTS)]);
        expect(r.checked).toBeGreaterThan(20);
        invalid += r.invalid;
      }
    }
    expect(invalid).toBeGreaterThan(300);
  });

  it('mapping files: the same verdict and verbose errors on every shipped mapping and its mutations', () => {
    const built = generated('mapping-validator.generated.cjs').validators({})[MAPPING_SCHEMA_FILE]!;
    const compiled = mappingAjv().getSchema(MAPPING_SCHEMA_FILE)!;
    const files = [
      join(root, 'examples', 'clinic', 'mapping.yaml'),
      ...readdirSync(join(root, 'mappings'), { recursive: true, encoding: 'utf8' })
        .filter((f) => /mapping\.yaml$/.test(f))
        .map((f) => join(root, 'mappings', f)),
    ];
    expect(files.length).toBeGreaterThan(3);
    let invalid = 0;
    for (const file of files) {
      const data = parse(readFileSync(file, 'utf8')) as unknown;
      expect(compiled(data), file).toBe(true);
      invalid += sameVerdicts(built, compiled, [data, ...mutations(data, [null, 7, 'x', [], {}, ['x']])]).invalid;
    }
    expect(invalid).toBeGreaterThan(500);
  });

  it('a built process validates with them and never loads ajv; a schema changed after the build is compiled afresh', () => {
    const script = (dist: string) => `
      const { createRequire } = require('node:module');
      import(${JSON.stringify(join(dist, 'schemas', 'resource-schemas.js'))}).then((m) => {
        const issues = m.getResourceValidator('Patient')({ resourceType: 'Patient', birthDate: '2021-02-30' });
        const ajv = Object.keys(require.cache).some((f) => /node_modules[\\\\/]ajv[\\\\/]dist[\\\\/]ajv\\.js$/.test(f));
        console.log(JSON.stringify({ codes: issues.map((i) => i.code), ajv }));
      })`;
    const run = (dist: string) => JSON.parse(execFileSync(process.execPath, ['-e', script(dist)], { encoding: 'utf8' })) as { codes: string[]; ajv: boolean };
    expect(run(join(root, 'dist'))).toEqual({ codes: ['format'], ajv: false });
    // A copy of the package with the patient schema edited after the build: the old generated code is not used.
    const copy = mkdtempSync(join(os.tmpdir(), 'care-etl-stale-'));
    for (const d of ['dist', 'schemas']) cpSync(join(root, d), join(copy, d), { recursive: true });
    cpSync(join(root, 'package.json'), join(copy, 'package.json'));
    cpSync(join(root, 'node_modules'), join(copy, 'node_modules'), {
      recursive: true,
      dereference: false,
      verbatimSymlinks: true,
      filter: (src) => /node_modules(\/(ajv|ajv-formats|fast-deep-equal|fast-uri|json-schema-traverse|require-from-string)(\/|$)|$)/.test(src),
    });
    const patientFile = join(copy, 'schemas', 'patient.schema.json');
    const schema = JSON.parse(readFileSync(patientFile, 'utf8')) as { properties: Record<string, unknown> };
    schema.properties.birthDate = { type: 'string', maxLength: 4 };
    writeFileSync(patientFile, JSON.stringify(schema));
    expect(run(join(copy, 'dist'))).toEqual({ codes: ['maxLength'], ajv: true });
  });
});
