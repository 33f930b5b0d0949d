import type { TaskStatus } from './types.js';

/** What `GET /api/tasks/{id}/explain` calls a task's situation. */
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
 * Why a task is where it is (`GET /api/tasks/{id}/explain`, docs/api.md "explain"): one
 * sentence, and the facts it is built from. Members that do not apply are null.
 */
export interface Explanation {
  taskId: string;
  status: TaskStatus;
  state: ExplainState;
  /** One plain-English sentence built from the facts below. */
  sentence: string;
  checkedAt: string;
  due: { dueAt: string; dueInMs: number; partition: number; ownerNode: string; epoch: number | null } | null;
  dependencies: { taskId: string; status: TaskStatus | 'unknown' }[] | null;
  queue: {
    taskType: string;
    priority: number;
    ahead: number | null;
    workers: { connected: number; polling: number; lastAskedAt: string | null };
  } | null;
  lease: {
    workerId: string | null;
    since: string | null;
    leaseExpiresAt: string | null;
    deadlineAt: string | null;
    lastHeartbeatAt: string | null;
    ownerNode: string | null;
  } | null;
  limits:
    | {
        name: string;
        declaredAs: string | null;
        concurrency: number | null;
        running: number | null;
        waiting: number | null;
        throttledUntil: string | null;
        holds: 'paused' | 'full' | 'throttled' | 'open' | 'unknown';
      }[]
    | null;
  backoff: { until: string; attempt: number; lastError: string | null } | null;
  startBy: string | null;
  schedule: { paused: boolean; nextDueTime: string | null } | null;
  outcome: { finishedAt: string | null; error: string | null; reason: string } | null;
}

/**
 * The node's answer in camelCase. Every member of the explanation is a field name (none is
 * data: ids and names are values), so the names are converted at every depth.
 */
export function explanationFromWire(body: unknown): Explanation {
  return camelFieldNames(body) as Explanation;
}

function camelFieldNames(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(camelFieldNames);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, member] of Object.entries(value)) {
    out[key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase())] = camelFieldNames(member);
  }
  return out;
}
