import { configDefaults, defineConfig } from 'vitest/config';

const E2E = 'test/**/*.e2e.test.ts';

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // 2-core machines: e2e tests spawn the CLI and a sandbox; keep parallelism modest.
    maxWorkers: 2,
    // In-process tests share a worker's module cache (isolate: false): a fresh module graph per file cost ~3x their
    // run time on 2 cores. End-to-end files (*.e2e.test.ts) keep isolation: their time is in the CLIs they spawn.
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/**/*.test.ts', 'src/**/*.test.ts'], exclude: [...configDefaults.exclude, E2E], isolate: false } },
      { extends: true, test: { name: 'e2e', include: [E2E] } },
    ],
  },
});
