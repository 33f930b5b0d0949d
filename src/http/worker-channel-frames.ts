import { WheelhouseError, type ErrorCode } from '../lib/errors.js';
import type { ChannelProgress, CompletionRequest } from '../services/types.js';
import type { ChannelHello, ChannelSpawn, NodeFrame } from '../services/worker-channel.js';
import { parseJsonBody } from './json-body.js';
import { WORKER_FRAMES, WORKER_FRAME_TYPES, type WorkerFrame, type WorkerFrameType } from './schemas/worker-channel.js';
import { assignmentJson, spawnedJson } from './serialize.js';
import { validateChildren } from './validation/children.js';
import type { TaskDefaults } from './validation/tasks.js';
import { assertSchema } from './validation/ajv.js';
import { FieldPath } from './validation/fields.js';
import { checkWorkerJson, completionRequests } from './validation/requests.js';

/**
 * The worker channel's frames on the wire: a worker's frame read, held to its schema and its
 * limits, and turned into what the channel takes; a node frame written as JSON.
 */

/** A worker's frame as the channel takes it, every limit already checked. */
export type ReadFrame =
  | { type: 'hello'; hello: Omit<ChannelHello, 'keyId'> }
  | { type: 'credit'; n: number }
  | { type: 'results'; results: CompletionRequest[] }
  | { type: 'progress'; updates: ChannelProgress[] }
  | { type: 'spawn'; spawn: ChannelSpawn }
  | { type: 'goodbye' };

export interface FrameLimits {
  /** Most task types in one hello. */
  maxTaskTypes: number;
  /** Deepest nesting in a frame. */
  maxJsonDepth: number;
  /** Largest `result` or `progress` value, bytes of JSON. */
  maxResultBytes: number;
  /** Defaults and limits for a `spawn` frame's children, as for a submission. */
  taskDefaults: TaskDefaults;
}

/**
 * Text → a frame, with every limit checked here, as it arrives, rather than when its turn
 * comes: a `result` or `progress` over `maxResultBytes` is refused before anything waits
 * with it. Throws `validation_failed` (or `malformed_json`) naming what is wrong.
 */
export function readFrame(text: string, limits: FrameLimits): ReadFrame {
  const frame = parseFrame(text, limits.maxJsonDepth);
  switch (frame.type) {
    case 'hello':
      return { type: 'hello', hello: helloOf(frame, limits.maxTaskTypes) };
    case 'credit':
      return { type: 'credit', n: frame.n };
    case 'results':
      // As the batch route takes them: `result` held to `maxResultBytes`, errors cut to 4 KiB.
      return {
        type: 'results',
        results: completionRequests({ results: frame.results }, { maxResultBytes: limits.maxResultBytes }),
      };
    case 'progress':
      return { type: 'progress', updates: progressOf(frame, limits.maxResultBytes) };
    case 'spawn':
      return { type: 'spawn', spawn: spawnOf(frame, limits.taskDefaults) };
    case 'goodbye':
      return { type: 'goodbye' };
  }
}

/**
 * A `spawn` frame's children, checked as the route checks them. A bad child is answered in the
 * `spawned` frame of its `request_id` (the socket stays open), not refused as a bad frame is.
 */
function spawnOf(frame: Extract<WorkerFrame, { type: 'spawn' }>, defaults: TaskDefaults): ChannelSpawn {
  let children: ChannelSpawn['children'];
  try {
    children = validateChildren(frame.tasks, defaults);
  } catch (error) {
    if (!(error instanceof WheelhouseError)) throw error;
    children = error;
  }
  return {
    requestId: frame.request_id,
    parentId: frame.task_id.toLowerCase(),
    leaseToken: frame.lease_token,
    children,
  };
}

/** Progress updates, each held to `maxResultBytes` like a result; each has progress, an extension, or both. */
function progressOf(frame: Extract<WorkerFrame, { type: 'progress' }>, maxResultBytes: number): ChannelProgress[] {
  return frame.updates.map((u, i) => {
    const at = new FieldPath(`updates[${i}]`, i);
    const update: ChannelProgress = { taskId: u.task_id.toLowerCase(), leaseToken: u.lease_token };
    if (u.progress !== undefined) {
      checkWorkerJson(u.progress, at.at('progress'), maxResultBytes);
      update.progress = u.progress;
    }
    if (u.extend_seconds !== undefined) update.extendSeconds = u.extend_seconds;
    if (update.progress === undefined && update.extendSeconds === undefined)
      at.fail('an update carries progress, extend_seconds or both');
    return update;
  });
}

/**
 * An error as a `spawned` frame says it: code and message as shown, and the details that name a
 * field or a child (`field`, `index`) when the error is the worker's own, as an HTTP 400 has them.
 */
function errorJson(
  shown: { code: ErrorCode; message: string },
  error: WheelhouseError,
): { code: ErrorCode; message: string; details?: unknown } {
  const out: { code: ErrorCode; message: string; details?: unknown } = { code: shown.code, message: shown.message };
  if (error.status < 500 && Object.keys(error.details).length > 0) out.details = error.details;
  return out;
}

/** A text frame's bytes as a string (ws hands a Buffer, or fragments). */
export function frameText(data: unknown): string {
  return Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.concat(data as Buffer[]).toString('utf8');
}

/** A text frame's size in bytes, without copying it. */
export function frameBytes(data: unknown): number {
  if (Buffer.isBuffer(data)) return data.length;
  if (Array.isArray(data)) return (data as Buffer[]).reduce((n, b) => n + b.length, 0);
  return (data as ArrayBuffer).byteLength;
}

/** Text → a frame held to its schema; `validation_failed` (or `malformed_json`) naming what is wrong. */
function parseFrame(text: string, maxDepth: number): WorkerFrame {
  const value = parseJsonBody(text, maxDepth);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new WheelhouseError('validation_failed', 'a frame is one JSON object with a type');
  }
  const type = (value as { type?: unknown }).type;
  if (typeof type !== 'string' || !(WORKER_FRAME_TYPES as readonly string[]).includes(type)) {
    throw new WheelhouseError(
      'validation_failed',
      `type: must be one of ${WORKER_FRAME_TYPES.join(', ')}, got ${JSON.stringify(type) ?? 'nothing'}`,
      { details: { field: 'type' } },
    );
  }
  assertSchema(WORKER_FRAMES[type as WorkerFrameType], value);
  return value as WorkerFrame;
}

function helloOf(frame: Extract<WorkerFrame, { type: 'hello' }>, maxTaskTypes: number): Omit<ChannelHello, 'keyId'> {
  if (frame.task_types.length > maxTaskTypes) {
    throw new WheelhouseError(
      'validation_failed',
      `task_types: at most ${maxTaskTypes} task types in one hello (pollMaxTaskTypes), got ${frame.task_types.length}`,
      { details: { field: 'task_types', limit: maxTaskTypes } },
    );
  }
  return {
    workerId: frame.worker_id,
    taskTypes: [...new Set(frame.task_types)],
    credits: frame.credits,
    resume: (frame.resume ?? []).map((r) => ({ taskId: r.task_id.toLowerCase(), leaseToken: r.lease_token })),
  };
}

/**
 * A node frame as the wire has it. An ack's error raised by the node (the results could not be
 * recorded) is written as `show` has it: as an HTTP client would be told it.
 */
export function frameJson(
  frame: NodeFrame,
  show: (error: WheelhouseError) => { code: ErrorCode; message: string },
): Record<string, unknown> {
  switch (frame.type) {
    case 'welcome':
      return { type: 'welcome', node_id: frame.nodeId, heartbeat_ms: frame.heartbeatMs, resumed: frame.resumed };
    case 'tasks':
      return { type: 'tasks', tasks: frame.tasks.map(assignmentJson) };
    case 'acks': {
      // One failure is usually every ack's: shown (and logged) once.
      const shown = new Map<WheelhouseError, { code: ErrorCode; message: string }>();
      const told = (error: WheelhouseError): { code: ErrorCode; message: string } => {
        let seen = shown.get(error);
        if (seen === undefined) shown.set(error, (seen = show(error)));
        return seen;
      };
      return {
        type: 'acks',
        acks: frame.acks.map((a) => {
          if (a.error === undefined) return { task_id: a.taskId, ok: a.ok };
          const error = a.error instanceof WheelhouseError ? told(a.error) : a.error;
          return { task_id: a.taskId, ok: a.ok, error: { code: error.code, message: error.message } };
        }),
      };
    }
    case 'cancel':
    case 'lease_lost':
      return { type: frame.type, task_ids: frame.taskIds };
    case 'extended':
      return {
        type: 'extended',
        tasks: frame.tasks.map((t) => ({ task_id: t.taskId, deadline_at: new Date(t.deadlineMs).toISOString() })),
      };
    case 'error':
      return { type: 'error', error: { code: frame.code, message: frame.message } };
    case 'spawned': {
      if ('tasks' in frame)
        return { type: 'spawned', request_id: frame.requestId, tasks: frame.tasks.map(spawnedJson) };
      const error = show(frame.error);
      return { type: 'spawned', request_id: frame.requestId, error: errorJson(error, frame.error) };
    }
  }
}
