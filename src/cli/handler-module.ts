import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

import type { TaskContext } from '../worker/index.js';
import { UsageError } from './usage.js';

/**
 * The module `wheelhouse worker --handler <file>` runs: an object of handlers keyed by task
 * type, as the default export or a named export `handlers`:
 *
 * ```js
 * // tasks.mjs
 * export default {
 *   'email.send': async (payload, task) => { await send(payload.to, { signal: task.signal }); return { sent: true }; },
 *   'report.build': async (payload) => { … },
 * };
 * ```
 *
 * A handler is called with the task's payload and the worker SDK's `TaskContext` (`taskId`,
 * `taskType`, `attempt`, `signal`); resolving succeeds the attempt, throwing fails it (an
 * error with `retryable = false` fails the task for good). What it resolves with is logged
 * and stored as the task's result (any JSON up to the node's `maxResultBytes`). `.js` is loaded as its package says (ES module
 * or CommonJS), `.mjs` and `.cjs` as their names say; in CommonJS, `module.exports = {…}` or
 * `exports.handlers = {…}`.
 */

/** One handler of the module. */
export type ModuleHandler = (payload: unknown, task: TaskContext) => unknown;

/** A task type as the API takes it (as the worker SDK checks it). */
const TASK_TYPE = /^[A-Za-z0-9_.:-]{1,128}$/;

const SHAPE = "export default { 'task.type': async (payload, task) => … } (or export const handlers = { … })";

/** Loads `file` (from `cwd`) and gives its handlers by task type; a `UsageError` says what is wrong with it. */
export async function loadHandlers(file: string, cwd: string = process.cwd()): Promise<Map<string, ModuleHandler>> {
  const path = resolve(cwd, file);
  let isFile: boolean;
  try {
    isFile = (await stat(path)).isFile();
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message;
    throw new UsageError(`--handler ${file}: ${reason} (${path})`, { usage: null, cause: error });
  }
  if (!isFile) throw new UsageError(`--handler ${file}: not a file (${path})`, { usage: null });
  let loaded: Record<string, unknown>;
  try {
    loaded = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (error) {
    const why = error instanceof Error ? (error.stack ?? error.message) : String(error);
    throw new UsageError(`--handler ${file} failed to load: ${why}`, { usage: null, cause: error });
  }
  const exported = [loaded.handlers, (loaded.default as { handlers?: unknown } | undefined)?.handlers, loaded.default];
  const object = exported.find(
    (value): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value),
  );
  const handlers = new Map<string, ModuleHandler>();
  for (const [taskType, handler] of Object.entries(object ?? {})) {
    if (typeof handler !== 'function') {
      throw new UsageError(`--handler ${file}: the handler for "${taskType}" is not a function`, { usage: null });
    }
    if (!TASK_TYPE.test(taskType)) {
      throw new UsageError(`--handler ${file}: "${taskType}" is not a task type (1–128 of A-Z a-z 0-9 _ . : -)`, {
        usage: null,
      });
    }
    handlers.set(taskType, handler as ModuleHandler);
  }
  if (handlers.size === 0) throw new UsageError(`--handler ${file} exports no handlers: ${SHAPE}`, { usage: null });
  return handlers;
}
