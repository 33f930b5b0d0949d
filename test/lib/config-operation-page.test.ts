/**
 * `operationPageTasks`' default follows the backend: on the embedded default a page holds the
 * one connection and the node's thread while it runs, so it is small (decision 0048); on
 * Postgres 200 (pages of 1 000 put a bulk retry's submit p99 over 2× idle in 5 of 9 runs). A value given is
 * kept on both.
 */
import { describe, expect, it } from 'vitest';
import { compileOptions, EMBEDDED_OPERATION_PAGE_TASKS } from '../../src/lib/config.js';

describe('operationPageTasks', () => {
  it('defaults to small pages on the embedded default and to 200 on Postgres', () => {
    expect(EMBEDDED_OPERATION_PAGE_TASKS).toBe(20);
    expect(compileOptions().operationPageTasks).toBe(20);
    expect(compileOptions({ backend: 'embedded' }).operationPageTasks).toBe(20);
    expect(compileOptions({ backend: 'postgres' }).operationPageTasks).toBe(200);
  });

  it('keeps a value given, on either backend', () => {
    expect(compileOptions({ backend: 'embedded', operationPageTasks: 500 }).operationPageTasks).toBe(500);
    expect(compileOptions({ backend: 'postgres', operationPageTasks: 7 }).operationPageTasks).toBe(7);
    expect(() => compileOptions({ operationPageTasks: 0 })).toThrow(/operationPageTasks/);
  });
});
