import type { EventSink } from '../lib/events.js';
import type { ClaimedTask, DueEntry, StoredStatus, Transition } from './model.js';

/**
 * What happens on a node, as events: emitted where the metrics are bumped, so that metrics,
 * logs and tests observe the same facts. Payloads are small and already at hand on the path
 * that emits them; an event never costs a read.
 */
export interface NodeEvents {
  /**
   * Tasks written by a submission (every created task, blocked and cron ones included), with
   * their types (aligned with the ids).
   */
  'task:submitted': { taskIds: readonly string[]; taskTypes: readonly string[] };
  /** A wheel partition pushed due entries into the ready queue. */
  'wheel:fired': { partition: number; count: number };
  /**
   * Tasks claimed by a worker's poll: their attempts started at `startedMs` (Unix ms), each
   * `startedMs - dueMs` after its due time.
   */
  'task:claimed': {
    workerId: string;
    taskIds: readonly string[];
    tasks: readonly Pick<ClaimedTask, 'taskType' | 'dueMs'>[];
    startedMs: number;
  };
  /**
   * A lease ran out and its task was handed on (back to pending, or failed): the attempt ran
   * from `startedMs` to `endedMs` (Unix ms).
   */
  'lease:expired': {
    taskId: string;
    status: StoredStatus;
    requeued: boolean;
    taskType: string;
    startedMs: number | null;
    endedMs: number;
    /** The limits it takes part in (its permits go back). */
    limits?: readonly string[];
  };
  /** Results recorded (succeeded, failed, retried, cancelled); each transition says when its attempt ran. */
  'task:completed': { transitions: readonly Transition[] };
  /**
   * Tasks cancelled at once, with no attempt of theirs ending (pending, blocked, waiting, a
   * child taken with its parent): `DELETE /api/tasks/{id}`, a cancel operation. A running
   * task's cancel is not here: it ends with its attempt (`task:completed`, `lease:expired`).
   */
  'task:cancelled': { tasks: readonly { taskId: string; taskType: string; endedMs: number }[] };
  /** Tasks that did not start within their start deadline ended `expired`. */
  'task:expired': { transitions: readonly Transition[] };
  /** Claims handed back because their long-poll went away. */
  'task:released': {
    taskIds: readonly string[];
    /** Each released task's type and limits (their permits go back), aligned with `taskIds`. */
    tasks?: readonly Pick<DueEntry, 'taskType' | 'limits'>[];
  };
  /** Claims a limit key refused for its rate: they wait for the next allowed start. */
  'limit:throttled': { key: string; declaredAs: string; count: number };
  /** A cron schedule reached fire times: fired, skipped for overlap, or missed by misfire policy. */
  'cron:fired': { outcome: 'fired' | 'skipped' | 'missed'; count: number };
  /** A blocked task's predecessors settled: it became pending (or was cancelled). */
  'dag:released': { taskId: string; status: 'pending' | 'cancelled' | 'failed' };
  /** Outbox events delivered by a replay, after the live path did not. */
  'dag:replayed': { count: number };
  /** A safety net found tasks left behind by their mechanism. Should never happen. */
  'safety-net:recovered': { kind: 'lease' | 'pending' | 'blocked' | 'schedule'; count: number };
  /** A retention pass removed finished tasks past retention and expired idempotency keys. */
  'retention:removed': { tasks: number; idempotencyKeys: number };
  /**
   * The node added what it counted of task activity to `task_stats`: `rows` rows in one
   * statement, taking `ms`; `trimmed` rows past the stats retention went.
   */
  'stats:flushed': { rows: number; ms: number; trimmed: number };
  /** A wheel partition was rebuilt from Postgres. */
  'partition:rebuilt': { partition: number };
  /** The ring this node routes by changed. */
  'ring:changed': { nodes: readonly string[] };
}

export type NodeEventSink = EventSink<NodeEvents>;
