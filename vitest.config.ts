import { defineConfig } from 'vitest/config';

// One config, three projects. `unit` needs no servers; `integration` and `fault` start their own Redis
// processes and Postgres databases through @fenced/test-utils (or use FENCED_REDIS_URLS / FENCED_DATABASE_URL).
const shared = {
  resolve: { conditions: ['@fenced/source'] },
  ssr: { resolve: { conditions: ['@fenced/source'] } },
};

export default defineConfig({
  ...shared,
  test: {
    // Each integration or fault file starts its own Redis nodes; two cores do not need more than two at once.
    maxWorkers: 2,
    projects: [
      {
        ...shared,
        test: { name: 'unit', include: ['test/unit/**/*.test.ts'], testTimeout: 20_000 },
      },
      {
        ...shared,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        ...shared,
        test: {
          name: 'fault',
          include: ['test/fault/**/*.test.ts'],
          testTimeout: 180_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
