import { defineConfig } from 'vitest/config';

/** `npm run test:slow`: the `*.slow.test.ts` files, one at a time (see vitest.config.ts). */
export default defineConfig({
  test: {
    include: ['test/**/*.slow.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    maxWorkers: 1,
    env: { WHEELHOUSE_CHECK_RESPONSES: '1' },
    globalSetup: ['test/support/leftover-processes.ts'],
    setupFiles: ['test/support/mark-children.ts'],
  },
});
