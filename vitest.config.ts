import { defineConfig } from 'vitest/config';

// Two projects: fast in-process tests run in parallel; tests that start real node processes run one
// file at a time (each starts a cluster; two at once on a 2-core machine only measure contention).
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts'],
          setupFiles: ['src/testing/fast-check-seed.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: 'cluster',
          include: ['test/**/*.test.ts'],
          fileParallelism: false,
          testTimeout: 180_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
