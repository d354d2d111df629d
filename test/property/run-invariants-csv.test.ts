/**
 * Issue 11 item 7 — run invariants, CSV exports (dry run).
 * The suite's invariants, generators, case counts (CARE_PROPERTY_RUNS, default 1000 over the five properties) and
 * seeds are described in ./run-invariants-harness.ts; its properties are split over four files so that vitest's
 * workers share them.
 */
import fc from 'fast-check';
import { describe, it } from 'vitest';
import { csvCase, mappingSpec } from './generators.js';
import { checkCoverage, COMMON, dryRunProperty, params, rerunSometimes, runsOf, timeoutOf, useCaseFolders, type Tally } from './run-invariants-harness.js';

useCaseFolders();

describe('run invariants (dry run): every record accounted for exactly once, nothing altered, idempotent', () => {
  it(`CSV exports (${runsOf('csv')} cases)`, { timeout: timeoutOf('csv') }, async () => {
    const t: Tally = new Map();
    await fc.assert(
      fc.asyncProperty(csvCase, mappingSpec, rerunSometimes, (src, spec, rerun) => dryRunProperty(src, spec, rerun, t)),
      params('csv'),
    );
    checkCoverage(t, runsOf('csv'), [...COMMON, 'fatal', 'source/csv-ragged', 'source/csv-syntax', 'transform/date-invalid', 'transform/lookup-miss']);
  });
});
