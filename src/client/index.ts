/**
 * The Wheelhouse client (`wheelhouse/client`): submits, inspects and controls tasks over a
 * node's HTTP API (API.md), with typed requests and answers in camelCase, typed errors per
 * catalogue code, and retries where they are safe.
 *
 * ```ts
 * import { createClient } from 'wheelhouse/client';
 * const client = createClient({ url: 'http://127.0.0.1:7070' });
 * const { taskId } = await client.submit({ taskType: 'email.send', payload: { to: 'a@example.com' } });
 * await client.waitFor(taskId, ['succeeded', 'failed']);
 * ```
 */
export { createClient, type WheelhouseClient } from './client.js';
export type { LimitsClient } from './limits.js';
export type { ExplainState, Explanation } from './explain.js';
export type { Child, ChildListOptions, ChildPage, ChildrenClient, NewChild, SpawnedChild } from './children.js';
export type {
  Operation,
  OperationAction,
  OperationFilter,
  OperationPage,
  OperationState,
  OperationWaitOptions,
  OperationsClient,
} from './operations.js';
export {
  API_ERROR_CODES,
  AuthError,
  BacklogFullError,
  ConflictError,
  NotFoundError,
  PayloadTooLargeError,
  TaskNotFoundError,
  UnavailableError,
  ValidationError,
  WheelhouseApiError,
  WheelhouseNetworkError,
  WheelhouseTimeoutError,
  isApiErrorCode,
  type ApiErrorCode,
} from './errors.js';
export type * from './types.js';
