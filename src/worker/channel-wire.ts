import { hasReadableDeadline, ProtocolError, type WirePolledTask, type WireResult } from './wire.js';

/**
 * The frames of the worker channel as they travel (API.md "Workers as remote actors"): one
 * JSON object per WebSocket message, with a `type`. What the worker sends is typed here; what
 * the node sends is checked by `readNodeFrame` before the worker trusts a field of it.
 */

/** A lease the worker still holds from a previous socket. */
export interface WireLease {
  task_id: string;
  lease_token: string;
}

/** One update of a `progress` frame: a running task's latest progress, a request to extend its deadline, or both. */
export interface WireProgress {
  task_id: string;
  lease_token: string;
  progress?: unknown;
  /** Asks for the deadline to become at least now + this many seconds; answered by an `extended` frame. */
  extend_seconds?: number;
}

/** One entry of an `extended` frame, once read: the deadline the node granted a task (Unix ms). */
export interface WireExtended {
  task_id: string;
  deadlineMs: number;
}

/** Worker → node. */
export type WorkerFrame =
  | { type: 'hello'; worker_id: string; task_types: readonly string[]; credits: number; resume: WireLease[] }
  | { type: 'credit'; n: number }
  | { type: 'results'; results: WireResult[] }
  | { type: 'progress'; updates: WireProgress[] }
  | { type: 'spawn'; request_id: string; task_id: string; lease_token: string; tasks: Record<string, unknown>[] }
  | { type: 'goodbye' };

/** One entry of an `acks` frame. */
export interface WireAck {
  task_id: string;
  ok: boolean;
  error?: { code: string; message: string };
}

/** Node → worker, once read. */
export type NodeFrame =
  | { type: 'welcome'; node_id: string; heartbeat_ms: number | null; resumed: Set<string> | null }
  | { type: 'tasks'; tasks: WirePolledTask[] }
  | { type: 'acks'; acks: WireAck[] }
  | { type: 'cancel'; task_ids: string[] }
  | { type: 'lease_lost'; task_ids: string[] }
  | { type: 'extended'; tasks: WireExtended[] }
  | { type: 'error'; error: { code: string; message: string } }
  /** The answer to a `spawn`: `tasks` (checked when read by `ChannelSpawns`), or `error`. */
  | { type: 'spawned'; request_id: string; tasks: unknown; error: unknown };

/** The node closed the channel with an `error` frame. */
export class ChannelError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(`the node closed the worker channel: ${code}${message ? `: ${message}` : ''}`);
    this.name = 'ChannelError';
  }
}

/**
 * Parses and checks one message from the node. Throws a `ProtocolError` for a frame the
 * worker cannot read; returns null for a frame of a type it does not know (a newer node may
 * send more kinds: they are ignored, as new JSON fields are).
 */
export function readNodeFrame(text: string): NodeFrame | null {
  let frame: unknown;
  try {
    frame = JSON.parse(text);
  } catch (error) {
    throw new ProtocolError(`the node sent a frame that is not JSON (${(error as Error).message})`);
  }
  const type = field(frame, 'type');
  switch (type) {
    case 'welcome': {
      const heartbeatMs = field(frame, 'heartbeat_ms');
      const resumed = field(frame, 'resumed');
      const nodeId = field(frame, 'node_id');
      return {
        type,
        node_id: typeof nodeId === 'string' ? nodeId : '',
        heartbeat_ms: typeof heartbeatMs === 'number' && heartbeatMs > 0 ? heartbeatMs : null,
        // Each entry a task id or a lease object: the contract names the list, not its items' shape.
        resumed: Array.isArray(resumed)
          ? new Set(resumed.map((r) => (typeof r === 'string' ? r : String(field(r, 'task_id')))))
          : null,
      };
    }
    case 'tasks': {
      const tasks = field(frame, 'tasks');
      if (!Array.isArray(tasks) || !tasks.every(isTask)) throw new ProtocolError('tasks frame holds a malformed task');
      return { type, tasks };
    }
    case 'acks': {
      const acks = field(frame, 'acks');
      if (!Array.isArray(acks) || !acks.every((a) => typeof field(a, 'task_id') === 'string'))
        throw new ProtocolError('acks frame holds a malformed ack');
      return {
        type,
        acks: acks.map((a) => {
          const error = field(a, 'error');
          return {
            task_id: field(a, 'task_id') as string,
            ok: field(a, 'ok') === true,
            ...(error === undefined || error === null ? {} : { error: readError(error) }),
          };
        }),
      };
    }
    case 'cancel':
    case 'lease_lost': {
      const ids = field(frame, 'task_ids');
      if (!Array.isArray(ids) || !ids.every((id) => typeof id === 'string'))
        throw new ProtocolError(`${type} frame has no task_ids list`);
      return { type, task_ids: ids };
    }
    case 'extended': {
      const tasks = field(frame, 'tasks');
      if (!Array.isArray(tasks)) throw new ProtocolError('extended frame has no tasks list');
      return {
        type,
        tasks: tasks.map((t) => {
          const taskId = field(t, 'task_id');
          const deadlineMs = Date.parse(String(field(t, 'deadline_at')));
          if (typeof taskId !== 'string' || !Number.isFinite(deadlineMs))
            throw new ProtocolError('extended frame holds a malformed entry');
          return { task_id: taskId, deadlineMs };
        }),
      };
    }
    case 'error':
      return { type, error: readError(field(frame, 'error')) };
    case 'spawned': {
      const requestId = field(frame, 'request_id');
      if (typeof requestId !== 'string') throw new ProtocolError('spawned frame has no request_id');
      return { type, request_id: requestId, tasks: field(frame, 'tasks'), error: field(frame, 'error') };
    }
    default:
      if (typeof type !== 'string') throw new ProtocolError('the node sent a frame without a type');
      return null;
  }
}

function isTask(t: unknown): t is WirePolledTask {
  return (
    typeof field(t, 'task_id') === 'string' &&
    typeof field(t, 'task_type') === 'string' &&
    typeof field(t, 'lease_token') === 'string' &&
    typeof field(t, 'attempt') === 'number' &&
    hasReadableDeadline(t)
  );
}

function readError(e: unknown): { code: string; message: string } {
  const code = field(e, 'code');
  const message = field(e, 'message');
  return { code: typeof code === 'string' ? code : 'unknown', message: typeof message === 'string' ? message : '' };
}

function field(o: unknown, key: string): unknown {
  return typeof o === 'object' && o !== null ? (o as Record<string, unknown>)[key] : undefined;
}
