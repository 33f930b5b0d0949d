import type { CronDefinition, DebounceSpec } from './model.js';

/**
 * Submissions as validated: what the HTTP face hands the services and `newTask` turns into rows.
 */

/** A schedule as the client gave it, validated. Times are Unix milliseconds. */
export type ScheduleSpec =
  | { type: 'immediate' }
  | { type: 'delayed'; dueMs: number | null; delaySeconds: number | null }
  | ({ type: 'cron' } & CronDefinition);

/** A validated submission, before it is given an id and a due time. */
export interface TaskSpec {
  taskType: string;
  payload: unknown;
  /** `payload` as JSON, when validation wrote it already (to measure it): the insert sends this text. */
  payloadJson?: string;
  schedule: ScheduleSpec;
  dependencies: string[];
  idempotencyKey: string | null;
  priority: number;
  maxRetries: number;
  /** The execution deadline of one attempt, seconds. */
  timeoutSeconds: number;
  /** How far a worker may push an attempt's deadline, seconds after its start; null: `timeoutSeconds`. */
  maxTimeoutSeconds: number | null;
  /** How long the task may wait to start after its due time before it ends `expired`; null: for ever. */
  startDeadlineSeconds: number | null;
  /** The limits it names, sorted and without repeats (`normaliseLimits`); null: none. */
  limits: readonly string[] | null;
  /** Merge into the waiting task of the same type and key (see {@link DebounceSpec}); absent: none. */
  debounce?: DebounceSpec | null;
  /** The W3C `traceparent` it was submitted under (the task's field, else the request's header); absent: none. */
  traceparent?: string;
  /**
   * sha256 of the canonical JSON of the request body, to tell an idempotent replay from a
   * conflicting reuse of its key. Empty when the request carries no idempotency key.
   */
  requestHash: string;
}

/** One child of a `POST /api/tasks/{id}/children` request (or a channel `spawn`), validated. */
export interface ChildSpec {
  spec: TaskSpec;
  /** Its name within the parent: the same key again answers the child made first. null: always new. */
  childKey: string | null;
}

/** One task of a `POST /api/dags` request, validated. */
export interface DagTaskSpec {
  ref: string;
  /** Refs of the same request or existing task ids, as the client wrote them. */
  dependsOn: string[];
  spec: TaskSpec;
}

/** A validated `POST /api/dags` request. */
export interface DagSpec {
  tasks: DagTaskSpec[];
  idempotencyKey: string | null;
  /** sha256 of the canonical JSON of the body; empty without a key. */
  requestHash: string;
}
