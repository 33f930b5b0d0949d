import fastifyWebsocket from '@fastify/websocket';
import type { FastifyPluginAsync } from 'fastify';
import type { WebSocket } from 'ws';
import { WheelhouseError } from '../lib/errors.js';
import type { ApiKeysApi } from '../services/api-keys.js';
import { CLOSE, type WorkerChannelApi } from '../services/worker-channel.js';
import { workerChannelSchemas } from './schemas/worker-channel.js';
import { Connection, refuseSocket } from './worker-channel-connection.js';
import type { TaskDefaults } from './validation/tasks.js';
import type { WorkerSlots } from './worker-slots.js';

/**
 * `GET /api/workers/connect`: the worker channel over a WebSocket (API.md, "Workers as remote
 * actors"). This face parses and validates each frame, turns it into a call on the channel
 * (src/services/worker-channel.ts), writes the channel's frames as JSON, and pings: a socket
 * that has not answered the previous ping when the next is due is closed. One socket's frames
 * and who closed it are its `Connection` (worker-channel-connection.ts). A frame that is not
 * JSON, not a known frame, or breaks its schema is answered with an `error` frame (the
 * catalogue's code, naming the field) and the socket is closed; nothing a worker sends can
 * take the node down. Auth is the `work` scope, checked by the server's hook before the
 * upgrade.
 */

export interface WorkerChannelRoutesOptions {
  api: WorkerChannelApi;
  /** The API keys: a socket is closed when the key that opened it is revoked. @default none */
  keys?: Pick<ApiKeysApi, 'onRevoked'>;
  /** True when an error is a store outage the node has already logged. @default never */
  storeOutage?: (error: unknown) => boolean;
  /** Most task types in one hello (the long-poll's `pollMaxTaskTypes`). */
  maxTaskTypes: number;
  /** The budget sockets share with the long-polls (decision 0021); past it a socket gets `too_many_sockets`. */
  slots: WorkerSlots;
  /** A socket that has not said `hello` this long after it opened is closed, ms. */
  helloTimeoutMs: number;
  /** Largest frame a worker may send, bytes (the WebSocket's `maxPayload`). */
  maxFrameBytes: number;
  /** Deepest nesting in a frame. */
  maxJsonDepth: number;
  /** Largest `result` or `progress` value, bytes of JSON. */
  maxResultBytes: number;
  /** Defaults and limits for the children of a `spawn` frame, as for a submission. */
  taskDefaults: TaskDefaults;
}

export const workerChannelRoutes: FastifyPluginAsync<WorkerChannelRoutesOptions> = async (fastify, opts) => {
  const { api } = opts;
  const live = new Map<WebSocket, Connection>();
  await fastify.register(fastifyWebsocket, {
    options: { maxPayload: opts.maxFrameBytes },
    // Shutdown: the channel stops claiming, then every socket is told why it closes. Its
    // leases run out, or its worker resumes them on another node.
    preClose(done) {
      api.stop();
      for (const connection of live.values()) connection.shutdown();
      this.websocketServer.close(() => undefined);
      done();
    },
  });

  const pinger = setInterval(() => {
    for (const connection of live.values()) connection.ping();
  }, api.heartbeatMs);
  pinger.unref();
  fastify.addHook('onClose', async () => clearInterval(pinger));
  // A revoked key closes what it opened within the keys' re-read (this node's revoke at once);
  // the first key made on a node that asked for none closes what was opened without one.
  const offRevoked = opts.keys?.onRevoked((keyIds) => {
    for (const connection of live.values()) if (keyIds.has(connection.keyId)) connection.revoke();
  });
  if (offRevoked !== undefined) fastify.addHook('onClose', async () => void offRevoked());

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
    wsHandler: (socket, request) => {
      const refused = opts.slots.takeSocket();
      if (refused !== null) {
        refuseSocket(socket, 'too_many_sockets', refused, CLOSE.tryAgainLater);
        return;
      }
      const connection = new Connection(socket, {
        api,
        keyId: request.principal?.keyId ?? null,
        maxTaskTypes: opts.maxTaskTypes,
        maxJsonDepth: opts.maxJsonDepth,
        maxResultBytes: opts.maxResultBytes,
        taskDefaults: opts.taskDefaults,
        maxFrameBytes: opts.maxFrameBytes,
        helloTimeoutMs: opts.helloTimeoutMs,
        requestId: request.id,
        log: request.log,
        explained: opts.storeOutage ?? (() => false),
      });
      live.set(socket, connection);
      socket.on('pong', () => connection.pong());
      socket.on('error', () => connection.errored());
      socket.on('message', (data, isBinary) => connection.receive(data, isBinary));
      socket.on('close', (code) => {
        live.delete(socket);
        opts.slots.giveSocket();
        connection.closed(code);
      });
    },
  });
};
