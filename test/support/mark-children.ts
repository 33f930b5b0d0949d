/**
 * Marks every process the tests of this file start with the run's id (a vitest setup file):
 * they inherit `WHEELHOUSE_TEST_RUN` from this test process's environment, and the run's
 * teardown (test/support/leftover-processes.ts) finds by it any that is still alive at the end.
 */
import { inject } from 'vitest';

import { TEST_RUN_ENV } from './children.js';

process.env[TEST_RUN_ENV] = inject('wheelhouseTestRun');
