/**
 * Issue 11 item 7 — run invariants, NDJSON and JSON exports (dry run).
 * The suite's invariants, generators, case counts (CARE_PROPERTY_RUNS, default 1000 over the five properties) and
 * seeds are described in ./run-invariants-harness.ts; its properties are split over four files so that vitest's
 * workers share them.
 */
import fc from 'fast-check';
import { describe, it } from 'vitest';
import { jsonCase, mappingSpec, ndjsonCase } from './generators.js';
import { checkCoverage, COMMON, dryRunProperty, params, rerunSometimes, runsOf, timeoutOf, useCaseFolders, type Tally } from './run-invariants-harness.js';

useCaseFolders();

describe('run invariants (dry run): every record accounted for exactly once, nothing altered, idempotent', () => {
  it(`NDJSON exports (${runsOf('ndjson')} cases)`, { timeout: timeoutOf('ndjson') }, async () => {
    const t: Tally = new Map();
    await fc.assert(
      fc.asyncProperty(ndjsonCase, mappingSpec, rerunSometimes, (src, spec, rerun) => dryRunProperty(src, spec, rerun, t)),
      params('ndjson'),
    );
    checkCoverage(t, runsOf('ndjson'), [...COMMON, 'source/json-syntax', 'source/not-object', 'transform/key-invalid', 'written: key with a lone surrogate']);
  });

  it(`JSON exports (${runsOf('json')} cases)`, { timeout: timeoutOf('json') }, async () => {
    const t: Tally = new Map();
    await fc.assert(
      fc.asyncProperty(jsonCase, mappingSpec, rerunSometimes, (src, spec, rerun) => dryRunProperty(src, spec, rerun, t)),
      params('json'),
    );
    checkCoverage(t, runsOf('json'), [...COMMON, 'fatal', 'source/not-object', 'transform/key-invalid', 'written: key with a lone surrogate']);
  });
});
