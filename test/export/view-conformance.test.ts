import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';
import { CareEtlError } from '../../src/core/issues.js';
import { compileView } from '../../src/export/view/view-definition.js';
import { viewRows } from '../../src/export/view/view-rows.js';

// The public SQL-on-FHIR v2 test suite (test/fixtures/sql-on-fhir/README.md): each case's view runs over its
// resources through care-etl's own evaluator and must give the suite's `expect` rows (or fail when `expectError`).
const DIR = fileURLToPath(new URL('../fixtures/sql-on-fhir/', import.meta.url));

interface SuiteCase {
  title: string;
  view: unknown;
  expect?: Record<string, unknown>[];
  expectError?: boolean;
}
interface SuiteFile {
  resources: Record<string, unknown>[];
  tests: SuiteCase[];
}

/**
 * Cases care-etl refuses on purpose, by file and title: the view must be refused before any row, with a
 * `view-unsupported` issue (never silently wrong rows).
 */
const UNSUPPORTED: Record<string, RegExp> = {
  fn_boundary: /Boundary/, // lowBoundary()/highBoundary(): precision arithmetic on dates and decimals
};

/** Rows in a canonical order (keys sorted, then rows): the suite's own runner compares rows as a multiset. */
const canonical = (rows: Record<string, unknown>[] | undefined) =>
  (rows ?? []).map((r) => JSON.stringify(Object.fromEntries(Object.entries(r).sort(([a], [b]) => (a < b ? -1 : 1))))).sort();

function run(file: string, view: unknown, resources: Record<string, unknown>[]): Record<string, unknown>[] {
  const compiled = compileView(view, file);
  return resources.flatMap((r) => viewRows(compiled, r, file));
}

const files = readdirSync(DIR).filter((f) => f.endsWith('.json'));

describe.each(files)('SQL-on-FHIR v2 suite: %s', (file) => {
  const suite = JSON.parse(readFileSync(join(DIR, file), 'utf8')) as SuiteFile;
  const name = file.replace(/\.json$/, '');
  test.each(suite.tests.map((c) => [c.title, c] as const))('%s', (_title, c) => {
    if (UNSUPPORTED[name]?.test(c.title)) {
      let err: unknown;
      try {
        run(file, c.view, suite.resources);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(CareEtlError);
      expect((err as CareEtlError).issues.map((i) => i.code)).toContain('view-unsupported');
      return;
    }
    if (c.expectError) {
      expect(() => run(file, c.view, suite.resources)).toThrow(CareEtlError);
      return;
    }
    expect(canonical(run(file, c.view, suite.resources))).toEqual(canonical(c.expect));
  });
});

test('the suite holds Observation views, and every one of them runs', () => {
  const observationCases = files.flatMap((f) =>
    (JSON.parse(readFileSync(join(DIR, f), 'utf8')) as SuiteFile).tests.filter((c) => (c.view as { resource?: string }).resource === 'Observation'),
  );
  expect(observationCases.length).toBeGreaterThanOrEqual(15);
});
