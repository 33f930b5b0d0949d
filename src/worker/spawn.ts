import { LeaseLostError } from './errors.js';
import { NodeAnswerError, type NodeClient } from './http.js';
import type { WirePolledTask } from './wire.js';

/**
 * `ctx.spawn`: children of the running task (API.md "Children of a running task"), as they
 * travel on either transport — `POST /api/tasks/{id}/children` over HTTP, a `spawn` frame
 * answered by `spawned` on the channel — and the error either answers with.
 */

/** Most children one `ctx.spawn` call adds (the node's bound on one request). */
export const MAX_SPAWN = 1000;

/** A child to add: an ordinary task (not a cron schedule), and its name within the parent. */
export interface ChildTask {
  taskType: string;
  /** Any JSON value; default null. */
  payload?: unknown;
  /**
   * Its name within the parent: spawning the same key again (a retried attempt, a spawn whose
   * answer was lost) answers the child made first and adds none. Left out: always a new child.
   */
  childKey?: string;
  /** Run it later: `delaySeconds` from now, or at `dueTime`. Default: now. */
  delaySeconds?: number;
  dueTime?: Date | string;
  /** 0–9, lower first. @default 5 */
  priority?: number;
  /** @default 3 */
  maxRetries?: number;
  /** The execution deadline of one attempt, seconds. @default the node's */
  timeoutSeconds?: number;
  /** Limit names it takes part in. */
  limits?: string[];
}

/** A child as the node answered it. */
export interface SpawnedChild {
  taskId: string;
  childKey: string | null;
  /** The stored status: `pending` (due now or later). */
  status: string;
  dueTime: Date | null;
}

/** The node refused a spawn (a bad child: `code` `validation_failed`, and `details` naming it). */
export class SpawnError extends Error {
  constructor(
    readonly taskId: string,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(`spawning children of task ${taskId} was refused: ${code}${message ? `: ${message}` : ''}`);
    this.name = 'SpawnError';
  }
}

/**
 * The children as the node takes them. `traceparent`: the spawning attempt's span, sent as
 * each child's context so that the child's trace continues the parent's attempt (the node
 * gives a child sent without one its parent's stored context instead).
 */
export function childrenToWire(tasks: readonly ChildTask[], traceparent?: string): Record<string, unknown>[] {
  return tasks.map((t) => {
    const delayed = t.delaySeconds !== undefined || t.dueTime !== undefined;
    const wire: Record<string, unknown> = {
      task_type: t.taskType,
      payload: t.payload,
      child_key: t.childKey,
      priority: t.priority,
      max_retries: t.maxRetries,
      timeout_seconds: t.timeoutSeconds,
      limits: t.limits,
      traceparent,
      schedule: delayed
        ? {
            type: 'delayed',
            ...(t.delaySeconds === undefined ? {} : { delay_seconds: t.delaySeconds }),
            ...(t.dueTime === undefined
              ? {}
              : { due_time: t.dueTime instanceof Date ? t.dueTime.toISOString() : t.dueTime }),
          }
        : undefined,
    };
    for (const key of Object.keys(wire)) if (wire[key] === undefined) delete wire[key];
    return wire;
  });
}

/** The `tasks` of a spawn's answer. */
export function spawnedFromWire(tasks: unknown): SpawnedChild[] {
  if (!Array.isArray(tasks)) throw new TypeError('the node answered a spawn without its tasks');
  return tasks.map((t: Record<string, unknown>) => ({
    taskId: String(t.task_id),
    childKey: typeof t.child_key === 'string' ? t.child_key : null,
    status: String(t.status),
    dueTime: typeof t.due_time === 'string' ? new Date(t.due_time) : null,
  }));
}

/** The error a refused spawn rejects with: a lost lease as every lost lease, the rest as a `SpawnError`. */
export function spawnRefused(taskId: string, error: unknown): Error {
  const e = (typeof error === 'object' && error !== null ? error : {}) as Record<string, unknown>;
  const code = typeof e.code === 'string' ? e.code : 'unknown';
  if (code === 'lease_not_held') return new LeaseLostError(taskId);
  const details = typeof e.details === 'object' && e.details !== null ? (e.details as Record<string, unknown>) : {};
  return new SpawnError(taskId, code, typeof e.message === 'string' ? e.message : '', details);
}

/**
 * `ctx.spawn` over HTTP. A refusal the node explains (a bad child, a lost lease) rejects as
 * `spawnRefused` says; anything else (429, 5xx) as the node's answer, a `NodeAnswerError`.
 */
export async function spawnOverHttp(
  client: Pick<NodeClient, 'post'>,
  task: WirePolledTask,
  tasks: readonly ChildTask[],
  traceparent?: string,
): Promise<SpawnedChild[]> {
  const path = `/api/tasks/${encodeURIComponent(task.task_id)}/children`;
  const answer = await client.post(path, { lease_token: task.lease_token, tasks: childrenToWire(tasks, traceparent) });
  if (answer.status === 201) return spawnedFromWire((answer.body as { tasks?: unknown } | null)?.tasks);
  const error = (answer.body as { error?: unknown } | null)?.error;
  if (answer.status < 500 && answer.status !== 429 && error !== undefined) throw spawnRefused(task.task_id, error);
  throw NodeAnswerError.from(path, answer);
}
