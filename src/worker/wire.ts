/**
 * The worker endpoints' bodies as they travel (API.md "Workers over HTTP"), and guards
 * that check an answer has the fields the worker reads before it trusts them.
 */

/** One task in a `POST /api/workers/poll` answer. */
export interface WirePolledTask {
  task_id: string;
  task_type: string;
  payload: unknown;
  attempt: number;
  lease_token: string;
  lease_expires_at: string;
  /** The attempt's deadline (ISO-8601); left out by nodes older than deadlines. */
  deadline_at?: string | null;
  /** Set for a task resumed after waiting for its children: how they ended. */
  children?: unknown;
  /** Set for a task with predecessors: their results by id, those too large, how many more. */
  inputs?: unknown;
  inputs_omitted?: unknown;
  inputs_more?: unknown;
  /** The W3C trace context the worker's span joins; absent when the task has none. */
  traceparent?: string;
}

/** One result in a `POST /api/workers/complete` request. */
export interface WireResult {
  task_id: string;
  lease_token: string;
  status: 'succeeded' | 'failed' | 'waiting_children';
  /** With `waiting_children`. */
  on_child_failure?: 'fail' | 'continue';
  error?: string;
  retryable?: boolean;
  /** A success's result; left out for none. */
  result?: unknown;
}

export function readPolledTasks(body: unknown): WirePolledTask[] {
  const tasks = field(body, 'tasks');
  if (!Array.isArray(tasks)) throw new ProtocolError('poll answer has no tasks array');
  for (const t of tasks) {
    if (
      typeof field(t, 'task_id') !== 'string' ||
      typeof field(t, 'task_type') !== 'string' ||
      typeof field(t, 'lease_token') !== 'string' ||
      typeof field(t, 'attempt') !== 'number' ||
      typeof field(t, 'lease_expires_at') !== 'string' ||
      !hasReadableDeadline(t)
    ) {
      throw new ProtocolError('poll answer holds a malformed task');
    }
  }
  return tasks as WirePolledTask[];
}

/** A task's `deadline_at` is absent (an older node), or a time the worker can read. */
export function hasReadableDeadline(task: unknown): boolean {
  const deadline = field(task, 'deadline_at');
  return deadline === undefined || deadline === null || (typeof deadline === 'string' && isTime(deadline));
}

/** A handed-out task's deadline (Unix ms), or null when the node names none. */
export function deadlineOf(task: WirePolledTask): number | null {
  return typeof task.deadline_at === 'string' ? Date.parse(task.deadline_at) : null;
}

export function readHeartbeat(body: unknown): {
  leaseExpiresMs: number;
  /** null: the node names no deadline (older than deadlines). */
  deadlineMs: number | null;
  cancelRequested: boolean;
} {
  const expires = Date.parse(String(field(body, 'lease_expires_at')));
  if (!Number.isFinite(expires)) throw new ProtocolError('heartbeat answer has no lease_expires_at');
  if (!hasReadableDeadline(body)) throw new ProtocolError('heartbeat answer has an unreadable deadline_at');
  const deadline = field(body, 'deadline_at');
  return {
    leaseExpiresMs: expires,
    deadlineMs: typeof deadline === 'string' ? Date.parse(deadline) : null,
    cancelRequested: field(body, 'cancel_requested') === true,
  };
}

function isTime(text: string): boolean {
  return Number.isFinite(Date.parse(text));
}

/** `{results: [{task_id, ok}]}` → the ids the node accepted. */
export function readBatchOutcome(body: unknown): Map<string, boolean> {
  const results = field(body, 'results');
  if (!Array.isArray(results)) throw new ProtocolError('complete answer has no results array');
  const out = new Map<string, boolean>();
  for (const r of results) out.set(String(field(r, 'task_id')), field(r, 'ok') === true);
  return out;
}

/** The node answered something the worker cannot read: a version mismatch or a bug. */
export class ProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProtocolError';
  }
}

function field(o: unknown, key: string): unknown {
  return typeof o === 'object' && o !== null ? (o as Record<string, unknown>)[key] : undefined;
}
