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
}

/** One result in a `POST /api/workers/complete` request. */
export interface WireResult {
  task_id: string;
  lease_token: string;
  status: 'succeeded' | 'failed';
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
      typeof field(t, 'lease_expires_at') !== 'string'
    ) {
      throw new ProtocolError('poll answer holds a malformed task');
    }
  }
  return tasks as WirePolledTask[];
}

export function readHeartbeat(body: unknown): { leaseExpiresMs: number; cancelRequested: boolean } {
  const expires = Date.parse(String(field(body, 'lease_expires_at')));
  if (!Number.isFinite(expires)) throw new ProtocolError('heartbeat answer has no lease_expires_at');
  return { leaseExpiresMs: expires, cancelRequested: field(body, 'cancel_requested') === true };
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
