import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // 2-core machines: e2e tests spawn the CLI and a sandbox; keep parallelism modest.
    maxWorkers: 2,
  },
});
