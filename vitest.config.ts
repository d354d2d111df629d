import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { defineConfig } from 'vitest/config';

/**
 * Longest files first, so that the last minute is not one long file on one worker while the other idles. Vitest's
 * own order uses the durations of the last run on this machine (node_modules/.vite/vitest) or, without them, file
 * sizes — which put the short files of the property suite last. Unknown files get an estimate by kind (ties: the
 * larger file first).
 */
class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const estimate = (f: TestSpecification): number => {
      const path = relative(root, f.moduleId);
      const last = this.ctx.cache.getFileTestResults(`${f.project.name}:${path}`);
      if (last) return last.failed ? Infinity : last.duration;
      if (path.startsWith('test/property/')) return 20_000;
      return path.endsWith('.e2e.test.ts') ? 8_000 : 1_000;
    };
    const size = (f: TestSpecification): number => this.ctx.cache.getFileStats(`${f.project.name}:${relative(root, f.moduleId)}`)?.size ?? 0;
    const cost = new Map(files.map((f) => [f, estimate(f)]));
    return [...files].sort((a, b) => cost.get(b)! - cost.get(a)! || size(b) - size(a));
  }
}

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // 2-core machines: e2e tests spawn the CLI and a sandbox; keep parallelism modest.
    maxWorkers: 2,
    // Test files share a worker's module cache (isolate: false): a fresh worker and module graph per file cost ~3x
    // the run time of in-process tests and ~0.5 s of CPU per end-to-end file. One pool for all files (no project
    // per kind, which vitest ran one after the other), longest first.
    isolate: false,
    sequence: { sequencer: LongestFirst },
    // One temporary root per run, removed at its end (test/helpers/temp-root.ts).
    globalSetup: ['test/helpers/temp-root.ts'],
  },
});
