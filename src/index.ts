/**
 * Wheelhouse as a library (`wheelhouse`): start a node in your own process, with the same
 * options the CLI takes. The worker SDK is its own entry point (`wheelhouse/worker`).
 *
 * ```ts
 * import { startNode } from 'wheelhouse';
 * const node = await startNode({ backend: 'embedded', port: 7070 });
 * node.events.on('task:completed', ({ transitions }) => console.log(transitions.length));
 * await node.close();
 * ```
 */
export { startNode, type NodeOverrides, type WheelhouseNode } from './node/start.js';
export {
  compileOptions,
  ConfigError,
  type BackendKind,
  type CompiledOptions,
  type LogFormat,
  type WheelhouseOptions,
} from './lib/config.js';
export { ERROR_CODES, isWheelhouseError, WheelhouseError, type ErrorCode, type ErrorOptions } from './lib/errors.js';
export type { NodeEvents } from './domain/events.js';
export type {
  BackoffPolicy,
  CronDefinition,
  CronSchedule,
  ExecutionRecord,
  ScheduleRecord,
  ScheduleStatus,
  ScheduleType,
  StoredStatus,
  SubmitResult,
  TaskRecord,
  TaskStatus,
} from './domain/model.js';
export type { DagSpec, DagTaskSpec, ScheduleSpec, TaskSpec } from './domain/specs.js';
