/**
 * `--filter` of `wheelhouse cancel|retry|delete`, read without a node: every field the
 * operations route takes, an error text's commas kept.
 */
import { describe, expect, it } from 'vitest';

import { parseFilter } from '../../src/cli/operations.js';
import { UsageError } from '../../src/cli/usage.js';

describe('parseFilter', () => {
  it("reads error_equals, a failed view group's error, commas and all", () => {
    expect(parseFilter(['status=failed,task_type=mail,error_equals=smtp 421, try later'])).toEqual({
      status: 'failed',
      taskType: 'mail',
      errorEquals: 'smtp 421, try later',
    });
    // The group of tasks that failed without an error.
    expect(parseFilter(['task_type=mail', 'error_equals='])).toEqual({ taskType: 'mail', errorEquals: '' });
  });

  it('refuses a name it does not know', () => {
    expect(() => parseFilter(['error_is=x'])).toThrow(UsageError);
  });
});
