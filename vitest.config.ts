import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // `*.slow.test.ts`: runs of several node processes through failures that a loaded 2-core
    // machine makes flaky in the suite's time (the 3-node flow-control run); `npm run
    // test:slow` runs them on their own (vitest.slow.config.ts).
    exclude: ['**/node_modules/**', 'test/**/*.slow.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // Test files share one Postgres and one Redis; each isolates itself with its own schema
    // and key prefix, or its own PGlite directory (test/support/postgres.ts, redis.ts,
    // nodes.ts), so files may run in parallel.
    fileParallelism: true,
    // Three files at a time on the 2-core CI machine: most e2e tests wait on real time (cron
    // seconds, lease expiries, node start-ups), so a third worker fills the cores' idle time.
    // Measured when the suite had 123 files: 573 s of vitest with three, 650–672 s with two.
    // It has 153 now: about 480 s of vitest in a fresh clone on the quiet machine (issue 27).
    maxWorkers: 3,
    // Every answer of every node a test starts is held to its route's response schema
    // (src/http/validation/responses.ts): an off-schema answer is a 500 that fails the test.
    env: { WHEELHOUSE_CHECK_RESPONSES: '1' },
    // No process a test starts outlives the run: each carries the run's id in its environment
    // (mark-children.ts), and the teardown fails the run naming any still alive, and kills it
    // (leftover-processes.ts).
    globalSetup: ['test/support/leftover-processes.ts'],
    setupFiles: ['test/support/mark-children.ts'],
  },
});
