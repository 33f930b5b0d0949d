import type { TaskStatus } from '../domain/model.js';
import type { WorkerPresence } from './worker-presence.js';

/** Where a task stands, as `GET /api/tasks/{id}/explain` names it. */
export type ExplainState =
  | 'scheduled'
  | 'backing_off'
  | 'ready'
  | 'waiting'
  | 'running'
  | 'paused'
  | 'active'
  | 'succeeded'
  | 'failed'
  | 'cancelled'
  | 'expired';

/**
 * What a gated key holds a due task by: `paused` (concurrency 0), `full` (running at its
 * concurrency), `throttled` (its rate allows the next start later), `open` (nothing), or
 * `unknown` (its actor did not answer).
 */
export type LimitHold = 'paused' | 'full' | 'throttled' | 'open' | 'unknown';

/** Why a task is where it is: the facts, each from whoever owns it, and one sentence. */
export interface Explanation {
  taskId: string;
  status: TaskStatus;
  state: ExplainState;
  sentence: string;
  checkedMs: number;
  /** A pending task's due time and the wheel partition that fires it. */
  due: { dueMs: number; dueInMs: number; partition: number; ownerNode: string; epoch: number | null } | null;
  /** A parent waiting for its children: how many it still waits for, of those it waits on. Not in the JSON (the sentence says it). */
  children?: { open: number; total: number };
  /** A blocked task's predecessors (the first few); a waiting parent's children. */
  dependencies: { taskId: string; status: TaskStatus | 'unknown' }[] | null;
  /** A due task's place in its ready queue and the workers of its type. */
  queue: {
    taskType: string;
    priority: number;
    /** Entries a take of its type hands out first; null when the queue does not hold it (yet). */
    ahead: number | null;
    workers: WorkerPresence;
  } | null;
  lease: {
    workerId: string | null;
    sinceMs: number | null;
    leaseExpiresMs: number | null;
    /** The attempt's execution deadline: it ends as a timeout then unless extended. */
    deadlineMs: number | null;
    lastHeartbeatMs: number | null;
    ownerNode: string | null;
  } | null;
  /**
   * A due task's gated keys (its limits and `type:<its type>` when declared), each with its
   * declared concurrency, its actor's live figures, and what it holds the task by; null when
   * the task is not due or none of its keys is gated.
   */
  limits:
    | {
        name: string;
        /** The name whose declaration applies: the key's own, or its family (`customer:*`). */
        declaredAs: string | null;
        concurrency: number | null;
        running: number | null;
        waiting: number | null;
        /** While the key's rate holds its waiting tasks back: the next start allowed (Unix ms). */
        throttledUntilMs: number | null;
        holds: LimitHold;
      }[]
    | null;
  backoff: { untilMs: number; attempt: number; lastError: string | null } | null;
  /** A pending task's start deadline: not started by then, it ends `expired`; null: none. */
  startByMs: number | null;
  schedule: { paused: boolean; nextDueMs: number | null } | null;
  outcome: { finishedMs: number | null; error: string | null; reason: string } | null;
}
