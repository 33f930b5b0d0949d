import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsync, onRequestAsyncHookHandler } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Static } from 'typebox';
import { WheelhouseError, isWheelhouseError } from '../lib/errors.js';
import type { ActorInfo } from '../runtime/actor.js';
import { ACTORS_PATH, CLUSTER_SECRET_HEADER, REFRESH_PATH, type BatchOrder } from '../runtime/cluster-wire.js';
import type { TransportEnvelope } from '../runtime/router.js';
import { PRESENCE_PATH, presenceJson, type WorkerPresence } from '../services/worker-presence.js';
import { WORKERS_PATH, connectedWorkerJson, type ConnectedWorker } from '../services/worker-roster.js';
import { nodeWorkersSchema } from './schemas/console.js';
import { parseJsonBody } from './json-body.js';
import { ActorBatchRequest, clusterRoutesSchemas as schemas } from './schemas/operations.js';

/**
 * The receiving side of the cluster transport (`src/runtime/http-transport.ts` sends): batches
 * of actor messages from other nodes, the membership refresh a peer calls when it joins or
 * leaves, a look at one local actor, and this node's workers of a task type (for explain). Every route here needs the cluster secret: with none
 * configured they refuse every request, loopback included.
 */
export interface ClusterRoutesOptions {
  /** The secret peers send in `x-wheelhouse-cluster-secret`; null refuses every request. */
  secret: string | null;
  /** Hands one envelope to a local mailbox: the reply of an ask, undefined for a tell. */
  accept(envelope: TransportEnvelope): Promise<unknown>;
  /** Re-reads membership now. */
  /** Re-reads membership; the answer waits for it, so a joining peer knows the ring moved. */
  onRefresh(): Promise<void> | void;
  /** One live local actor with its state, or null. */
  inspect(kind: string, key: string): ActorInfo | null;
  /** This node's own live actors, in (kind, key) order after a cursor. */
  listActors(filter: { kind?: string; limit: number; after?: { kind: string; key: string } }): ActorInfo[];
  /** This node's own workers of a task type. */
  presence(taskType: string): WorkerPresence;
  /** This node's own connected workers (at most a bound) and how many more (the workers view); without, no route. */
  workers?(): { workers: ConnectedWorker[]; more: number };
  /** Body limit of `POST /internal/actors`, bytes. @default 64 MiB */
  bodyLimitBytes?: number;
  /** Deepest nesting of a request body. @default 128 */
  maxJsonDepth?: number;
}

/** Default nesting bound of a batch: an envelope of a message holding a value nested as deep as the API allows. */
export const DEFAULT_CLUSTER_JSON_DEPTH = 128;

/** Default body limit of a batch, bytes: 1 000 envelopes of large payloads fit. */
export const DEFAULT_CLUSTER_BODY_LIMIT_BYTES = 64 * 1024 * 1024;

/**
 * How long a batch waits for an earlier batch of its stream that has not arrived, ms. Only a
 * batch lost with its connection never comes; its sender moves `since` past it as soon as it
 * sees the failure, so this bound is a backstop.
 */
const REORDER_WAIT_MS = 1_000;

/** Streams (one per sender and connection pool) whose order is remembered; least recent go first. */
const MAX_STREAMS = 4_096;

export function clusterRoutes(options: ClusterRoutesOptions): FastifyPluginAsync {
  const arrivals = new ArrivalOrder(REORDER_WAIT_MS, MAX_STREAMS);
  const accept = (envelope: TransportEnvelope): Promise<unknown> => {
    try {
      return options.accept(envelope);
    } catch (error) {
      return Promise.reject(error);
    }
  };

  return async (fastify) => {
    const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
    // Payloads are arbitrary user JSON, so this context parses with plain JSON.parse whatever
    // the host configured: keys such as `__proto__` are data here (JSON.parse makes them own
    // properties, which touch no prototype), and must round-trip. Nesting is bounded as on the
    // API (src/http/json-body.ts), with room for the envelope around a message.
    const maxDepth = options.maxJsonDepth ?? DEFAULT_CLUSTER_JSON_DEPTH;
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
      try {
        done(null, parseJsonBody(body as string, maxDepth));
      } catch (error) {
        done(error as Error, undefined);
      }
    });
    app.addHook('onRequest', clusterAuth(options.secret));

    // Node-to-node traffic is hundreds of requests a second under load: logged at warn and
    // above only, or it would drown the node's own log at the default level.
    app.post(
      ACTORS_PATH,
      {
        schema: schemas.actors,
        bodyLimit: options.bodyLimitBytes ?? DEFAULT_CLUSTER_BODY_LIMIT_BYTES,
        logLevel: 'warn',
      },
      async (request, reply) => {
        const batch = wireBatch(request.body);
        // Every envelope is accepted synchronously, in order, so tells reach mailboxes as sent.
        const replies = await arrivals.admit(batch.order, () => batch.envelopes.map(accept));
        const results = (await Promise.allSettled(replies)).map(resultJson);
        // Each result is already JSON (a reply is any value): the answer is written as text,
        // which the serializer passes through; the schema documents its shape.
        const text = `{"results":[${results.join(',')}]}`;
        return reply.type('application/json; charset=utf-8').send(text as unknown as { results: unknown[] });
      },
    );

    app.post(REFRESH_PATH, { schema: schemas.refresh, logLevel: 'warn' }, async (_request, reply) => {
      await options.onRefresh();
      return reply.code(204).send(null);
    });

    app.get(ACTORS_PATH, { schema: schemas.actorList, logLevel: 'warn' }, async (request) => {
      const { kind, limit, after_kind: afterKind, after_key: afterKey } = request.query;
      const after = afterKind !== undefined && afterKey !== undefined ? { kind: afterKind, key: afterKey } : undefined;
      return {
        actors: options.listActors({ limit, ...(kind === undefined ? {} : { kind }), ...(after ? { after } : {}) }),
      };
    });

    app.get(PRESENCE_PATH, { schema: schemas.presence, logLevel: 'warn' }, async (request) =>
      presenceJson(options.presence(request.query.task_type)),
    );

    const workers = options.workers;
    if (workers !== undefined) {
      app.get(WORKERS_PATH, { schema: nodeWorkersSchema, logLevel: 'warn' }, async () => {
        const own = workers();
        return { workers: own.workers.map(connectedWorkerJson), more: own.more };
      });
    }

    app.get(`${ACTORS_PATH}/:kind/:key`, { schema: schemas.actor, logLevel: 'warn' }, async (request) => {
      const { kind, key } = request.params;
      const actor = options.inspect(kind, key);
      if (actor === null) {
        throw new WheelhouseError('not_found', `No live actor ${kind}/${key} on this node.`, {
          details: { kind, key },
        });
      }
      return actor;
    });
  };
}

/**
 * With a secret: the header must match it (401 `unauthorized` without one, 403 `forbidden` with
 * a wrong one), compared in constant time over sha256 digests of equal length. Without one:
 * nothing, from any address (401).
 */
function clusterAuth(secret: string | null): onRequestAsyncHookHandler {
  if (secret === null) {
    // No secret, no peers: a loopback caller is not a peer either (the HTTP executor, a
    // program on the same machine), so nothing is accepted, from any address.
    return async () => {
      throw new WheelhouseError(
        'unauthorized',
        'This node has no clusterSecret and takes no node-to-node requests. Give every node of the cluster the same clusterSecret.',
      );
    };
  }
  const expected = sha256(secret);
  return async (request) => {
    const header = request.headers[CLUSTER_SECRET_HEADER];
    if (header === undefined || header === '') {
      throw new WheelhouseError('unauthorized', `Send the cluster secret in ${CLUSTER_SECRET_HEADER}.`);
    }
    if (typeof header !== 'string' || !timingSafeEqual(sha256(header), expected)) {
      throw new WheelhouseError('forbidden', `The cluster secret does not match this node's clusterSecret.`);
    }
  };
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** A batch that matches `ActorBatchRequest` → its order and envelopes; `since` must not pass `seq`. */
function wireBatch(body: Static<typeof ActorBatchRequest>): {
  order: BatchOrder | null;
  envelopes: TransportEnvelope[];
} {
  const { order } = body;
  if (order !== undefined && order.since > order.seq) {
    throw new WheelhouseError('validation_failed', 'order.since: must be an integer from 0 to order.seq', {
      details: { field: 'order.since' },
    });
  }
  return {
    order: order ?? null,
    envelopes: body.envelopes.map((e) => ({
      kind: e.kind,
      key: e.key,
      message: e.message,
      deadlineMs: e.deadline,
      ask: e.ask,
    })),
  };
}

/** One result as JSON text; a reply or error that cannot be serialized fails alone. */
function resultJson(outcome: PromiseSettledResult<unknown>): string {
  if (outcome.status === 'fulfilled') {
    try {
      return JSON.stringify({ ok: true, value: outcome.value });
    } catch (error) {
      return errorJson(
        new WheelhouseError('internal', `The reply cannot be sent as JSON: ${(error as Error).message}`),
      );
    }
  }
  return errorJson(outcome.reason);
}

function errorJson(error: unknown): string {
  const wire = isWheelhouseError(error)
    ? { code: error.code, message: error.message, details: error.details }
    : { code: 'internal', message: error instanceof Error ? error.message : String(error), details: {} };
  try {
    return JSON.stringify({ ok: false, error: wire });
  } catch {
    return JSON.stringify({ ok: false, error: { ...wire, details: {} } }); // Details that are not JSON are left out.
  }
}

/** What the receiver remembers of one sender stream. */
interface StreamState {
  /** The next `seq` to accept; every lower one has been accepted or given up on. */
  next: number;
  /** Batches that arrived before a predecessor: `seq` → accepts them. */
  readonly waiting: Map<number, () => void>;
  gapTimer: NodeJS.Timeout | null;
}

/**
 * Puts the batches of each sender stream back in the order they were sent before their
 * envelopes reach the mailboxes. A sender spreads its batches over several keep-alive
 * connections, so batch n + 1 can arrive before batch n; it then waits for n, at most
 * `gapWaitMs`. A batch older than the next expected one (its wait was given up on, or the
 * receiver forgot the stream) is accepted at once.
 */
class ArrivalOrder {
  private readonly streams = new Map<string, StreamState>();

  constructor(
    private readonly gapWaitMs: number,
    private readonly maxStreams: number,
  ) {}

  /** Runs `accept` when every earlier batch of the stream has run; at once without an order. */
  admit<T>(order: BatchOrder | null, accept: () => T): Promise<T> {
    if (order === null) return Promise.resolve(accept());
    const state = this.stream(order);
    if (order.since > state.next) {
      // The sender awaits nothing below `since`: those batches ran here or never come.
      this.runWaitingBelow(state, order.since);
      state.next = order.since;
    }
    if (order.seq < state.next || state.waiting.has(order.seq)) {
      const accepted = accept();
      this.drain(state);
      return Promise.resolve(accepted);
    }
    return new Promise<T>((resolve) => {
      state.waiting.set(order.seq, () => resolve(accept()));
      this.drain(state);
    });
  }

  /** The state of `order.stream`, made most recent; a new stream starts at `since`. */
  private stream(order: BatchOrder): StreamState {
    let state = this.streams.get(order.stream);
    if (state !== undefined) this.streams.delete(order.stream);
    else state = { next: order.since, waiting: new Map(), gapTimer: null };
    this.streams.set(order.stream, state);
    if (this.streams.size > this.maxStreams) {
      for (const [id, old] of this.streams) {
        if (old.waiting.size > 0) continue;
        this.streams.delete(id);
        break;
      }
    }
    return state;
  }

  /** Runs the waiting batches that are next in line, then arms or clears the gap timer. */
  private drain(state: StreamState): void {
    let progressed = false;
    for (let run = state.waiting.get(state.next); run !== undefined; run = state.waiting.get(state.next)) {
      state.waiting.delete(state.next);
      state.next += 1;
      progressed = true;
      run();
    }
    if (state.gapTimer !== null && (progressed || state.waiting.size === 0)) {
      clearTimeout(state.gapTimer);
      state.gapTimer = null;
    }
    if (state.waiting.size > 0 && state.gapTimer === null) {
      state.gapTimer = setTimeout(() => {
        state.gapTimer = null;
        // The missing batch is not coming: skip to the earliest one that arrived.
        state.next = Math.min(...state.waiting.keys());
        this.drain(state);
      }, this.gapWaitMs);
      state.gapTimer.unref();
    }
  }

  private runWaitingBelow(state: StreamState, seq: number): void {
    const below = [...state.waiting.keys()].filter((s) => s < seq).sort((a, b) => a - b);
    for (const s of below) {
      const run = state.waiting.get(s) as () => void;
      state.waiting.delete(s);
      run();
    }
  }
}
