import fastifyWebsocket from '@fastify/websocket';
import type { FastifyPluginAsync } from 'fastify';
import type { WebSocket } from 'ws';
import { WheelhouseError, isWheelhouseError, type ErrorCode } from '../lib/errors.js';
import type { ChannelProgress, CompletionRequest } from '../services/types.js';
import { CLOSE, type ChannelHello, type NodeFrame, type WorkerChannelApi } from '../services/worker-channel.js';
import type { WorkerSession } from '../services/worker-session.js';
import { parseJsonBody } from './json-body.js';
import {
  WORKER_FRAMES,
  WORKER_FRAME_TYPES,
  workerChannelSchemas,
  type HelloFrameJson,
  type ProgressFrameJson,
  type ResultsFrameJson,
  type WorkerFrameType,
} from './schemas/worker-channel.js';
import { assignmentJson } from './serialize.js';
import { assertSchema } from './validation/ajv.js';
import { FieldPath, truncateUtf8 } from './validation/fields.js';
import { checkWorkerJson, completionRequests } from './validation/requests.js';

/**
 * `GET /api/workers/connect`: the worker channel over a WebSocket (API.md, "Workers as remote
 * actors"). This face parses and validates each frame, turns it into a call on the channel
 * (src/services/worker-channel.ts), writes the channel's frames as JSON, and pings: a socket
 * that has not answered the previous ping when the next is due is closed. A frame that is not
 * JSON, not a known frame, or breaks its schema is answered with an `error` frame (the
 * catalogue's code, naming the field) and the socket is closed; nothing a worker sends can
 * take the node down. Auth is the `work` scope, checked by the server's hook before the
 * upgrade.
 */

export interface WorkerChannelRoutesOptions {
  api: WorkerChannelApi;
  /** Most task types in one hello (the long-poll's `pollMaxTaskTypes`). */
  maxTaskTypes: number;
  /** Sockets held at once; one more gets `too_many_sockets`. */
  maxSockets: number;
  /** Largest frame a worker may send, bytes (the WebSocket's `maxPayload`). */
  maxFrameBytes: number;
  /** Deepest nesting in a frame. */
  maxJsonDepth: number;
  /** Largest `result` or `progress` value, bytes of JSON. */
  maxResultBytes: number;
}

export const workerChannelRoutes: FastifyPluginAsync<WorkerChannelRoutesOptions> = async (fastify, opts) => {
  const { api } = opts;
  const live = new Set<WebSocket>();
  const answered = new WeakSet<WebSocket>();
  await fastify.register(fastifyWebsocket, {
    options: { maxPayload: opts.maxFrameBytes },
    // Shutdown: the channel stops claiming, then every socket is told why it closes. Its
    // leases run out, or its worker resumes them on another node.
    preClose(done) {
      api.stop();
      for (const socket of live) socket.close(CLOSE.goingAway, 'node shutting down');
      this.websocketServer.close(() => undefined);
      done();
    },
  });

  const pinger = setInterval(() => {
    for (const socket of live) {
      if (!answered.has(socket)) {
        socket.terminate();
        continue;
      }
      answered.delete(socket);
      socket.ping();
    }
  }, api.heartbeatMs);
  pinger.unref();
  fastify.addHook('onClose', async () => clearInterval(pinger));

  fastify.route({
    method: 'GET',
    url: '/api/workers/connect',
    // A worker's connect is routine, like its polls: its request line at `warn`, not `info`.
    ...(fastify.log.level === 'info' ? { logLevel: 'warn' as const } : {}),
    schema: workerChannelSchemas.connect,
    handler: async () => {
      throw new WheelhouseError(
        'validation_failed',
        'GET /api/workers/connect opens a WebSocket: send Connection: Upgrade and Upgrade: websocket',
      );
    },
    wsHandler: (socket) => {
      if (live.size >= opts.maxSockets) {
        fail(
          socket,
          'too_many_sockets',
          `this node holds ${live.size} worker sockets, the most it allows (workerSocketsMax)`,
        );
        return;
      }
      live.add(socket);
      answered.add(socket);
      socket.on('pong', () => answered.add(socket));
      socket.on('error', () => socket.terminate());
      const connection = new Connection(socket, opts);
      socket.on('message', (data, isBinary) => connection.receive(data, isBinary));
      socket.on('close', () => {
        live.delete(socket);
        connection.closed();
      });
    },
  });
};

/** One socket's frames, handled one after the other. */
class Connection {
  private session: WorkerSession | null = null;
  private opening = false;
  private ended = false;
  /** An error frame was sent: what follows is not read. */
  private failed = false;
  /** Frames are handled in order: each waits for the one before. */
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly socket: WebSocket,
    private readonly opts: WorkerChannelRoutesOptions,
  ) {}

  receive(data: unknown, isBinary: boolean): void {
    if (this.ended || this.failed) return;
    const read = this.read(data, isBinary);
    // Credit is taken as it arrives, not behind the frames before it: a worker sends its credit
    // with its results, and credit that waited for those results to be recorded would hold the
    // next claim back by a statement. Everything else is handled in order.
    if (this.session !== null && 'frame' in read && read.frame.type === 'credit') {
      this.opts.api.credit(this.session, (read.frame as unknown as { n: number }).n);
      return;
    }
    this.chain = this.chain
      .then(() => this.handle(read))
      .catch((error: unknown) => {
        this.failed = true;
        if (isWheelhouseError(error) && error.status < 500) fail(this.socket, error.code, error.message);
        else if (isWheelhouseError(error)) fail(this.socket, error.code, error.message, CLOSE.tryAgainLater);
        else fail(this.socket, 'internal', 'the node could not handle this frame', CLOSE.internal);
      });
  }

  /** The frame held to its schema, or why it is not one (said in its turn, by `handle`). */
  private read(data: unknown, isBinary: boolean): { frame: { type: WorkerFrameType } } | { error: unknown } {
    if (isBinary) return { error: new WheelhouseError('validation_failed', 'frames are JSON text, not binary') };
    try {
      return { frame: parseFrame(frameText(data), this.opts.maxJsonDepth) };
    } catch (error) {
      return { error };
    }
  }

  closed(): void {
    this.ended = true;
    if (this.session !== null) this.opts.api.closed(this.session);
  }

  private async handle(read: { frame: { type: WorkerFrameType } } | { error: unknown }): Promise<void> {
    if (this.ended || this.failed) return;
    if ('error' in read) throw read.error;
    const { frame } = read;
    const { api } = this.opts;
    if (frame.type === 'hello') {
      if (this.session !== null || this.opening)
        throw new WheelhouseError('validation_failed', 'hello was already said');
      const hello = helloOf(frame as unknown as HelloFrameJson, this.opts.maxTaskTypes);
      this.opening = true;
      const session = await api.open(hello, {
        send: (f) => this.send(f),
        close: (code, reason) => this.socket.close(code, reason),
      });
      this.session = session;
      if (this.ended) api.closed(session); // closed while the resumed leases were checked
      return;
    }
    const session = this.session;
    if (session === null)
      throw new WheelhouseError('validation_failed', `the first frame must be hello, not ${frame.type}`);
    switch (frame.type) {
      case 'credit':
        api.credit(session, (frame as unknown as { n: number }).n);
        return;
      case 'results':
        await session.results(resultsOf(frame as unknown as ResultsFrameJson, this.opts.maxResultBytes));
        return;
      case 'progress':
        await session.progress(progressOf(frame as unknown as ProgressFrameJson, this.opts.maxResultBytes));
        return;
      case 'goodbye':
        session.goodbye();
        return;
    }
  }

  private send(frame: NodeFrame): void {
    if (this.socket.readyState !== this.socket.OPEN) return;
    this.socket.send(JSON.stringify(frameJson(frame)));
  }
}

/** A text frame's bytes as a string (ws hands a Buffer, or fragments). */
function frameText(data: unknown): string {
  return Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.concat(data as Buffer[]).toString('utf8');
}

/** Text → a frame held to its schema; `validation_failed` (or `malformed_json`) naming what is wrong. */
function parseFrame(text: string, maxDepth: number): { type: WorkerFrameType } {
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
  return value as { type: WorkerFrameType };
}

function helloOf(frame: HelloFrameJson, maxTaskTypes: number): ChannelHello {
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

/** Results as the batch route takes them: `result` held to `maxResultBytes`, errors cut to 4 KiB. */
function resultsOf(frame: ResultsFrameJson, maxResultBytes: number): CompletionRequest[] {
  return completionRequests({ results: frame.results }, { maxResultBytes });
}

/** Progress updates, each held to `maxResultBytes` like a result; each has progress, an extension, or both. */
function progressOf(frame: ProgressFrameJson, maxResultBytes: number): ChannelProgress[] {
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

/** A node frame as the wire has it. */
function frameJson(frame: NodeFrame): Record<string, unknown> {
  switch (frame.type) {
    case 'welcome':
      return { type: 'welcome', node_id: frame.nodeId, heartbeat_ms: frame.heartbeatMs, resumed: frame.resumed };
    case 'tasks':
      return { type: 'tasks', tasks: frame.tasks.map(assignmentJson) };
    case 'acks':
      return {
        type: 'acks',
        acks: frame.acks.map((a) =>
          a.error ? { task_id: a.taskId, ok: a.ok, error: a.error } : { task_id: a.taskId, ok: a.ok },
        ),
      };
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
  }
}

/** Says why in an `error` frame, then closes. */
function fail(socket: WebSocket, code: ErrorCode, message: string, closeCode: number = CLOSE.policy): void {
  if (socket.readyState === socket.OPEN) {
    socket.send(JSON.stringify({ type: 'error', error: { code, message } }));
    // A close reason is at most 123 bytes.
    socket.close(code === 'too_many_sockets' ? CLOSE.tryAgainLater : closeCode, truncateUtf8(code, 120));
  }
}
