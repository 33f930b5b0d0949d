import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyPluginAsync } from 'fastify';
import type { CompiledOptions } from '../lib/config.js';
import { WheelhouseError } from '../lib/errors.js';
import { packageVersion } from '../lib/version.js';
import type { Services } from '../services/types.js';
import { tokenRoutes } from './admin-routes.js';
import { hostCheck, isUpgrade, keyAuth, originCheck } from './auth.js';
import { dashboardRoutes } from './dashboard-routes.js';
import { registerDocs } from './docs.js';
import { parseJsonBody } from './json-body.js';
import { SHARED_SCHEMAS } from './schemas/index.js';
import { errorHandler, handleNotFound } from './errors.js';
import { opsRoutes, type MetricsRenderer } from './ops-routes.js';
import { dagRoutes } from './dag-routes.js';
import { limitsRoutes } from './limits-routes.js';
import { operationsRoutes } from './operations-routes.js';
import { tasksRoutes } from './tasks-routes.js';
import { childrenRoutes } from './children-routes.js';
import { SchemaWarmup } from './schema-warmup.js';
import { serializerCompiler } from './serializer.js';
import { validatorCompiler } from './validation/ajv.js';
import { checkResponses } from './validation/responses.js';
import type { WorkerChannelApi } from '../services/worker-channel.js';
import { workerChannelRoutes } from './worker-channel-routes.js';
import { workerRoutes } from './worker-routes.js';
import { WorkerSlots } from './worker-slots.js';

/**
 * The fastify face of a node: body parsing, the error and not-found handlers, optional bearer
 * auth, and one plugin per route group. Built, not listening: the caller listens (or injects).
 */

export interface BuildServerOptions {
  /** The services the routes call, one per route group. */
  services: Services;
  options: CompiledOptions;
  /** A logger to use; without one, fastify's pino at `options.logLevel`. */
  logger?: FastifyBaseLogger;
  /**
   * True when an error is a store outage the node has already logged: a request failing
   * because of it is logged at debug, not warn. @default never
   */
  storeOutage?: (error: unknown) => boolean;
  /** Renders `/metrics`; without one a minimal process set is served. */
  metrics?: MetricsRenderer;
  /** Told of every answered request, for the metrics. @default none */
  onAnswered?: RequestObserver;
  /** The worker channel behind `GET /api/workers/connect`; without one the route is not served. */
  channel?: WorkerChannelApi;
  /** The built dashboard's folder (`GET /admin`). @default dist/src/dashboard/, next to this module */
  dashboardDir?: string;
  /** More route plugins (admin, actor transport, …), registered after the built-in ones. */
  extraPlugins?: readonly FastifyPluginAsync[];
  /**
   * Hold every answer to its route's response schema, answering 500 when one breaks it (for
   * tests: the suite runs with `WHEELHOUSE_CHECK_RESPONSES=1`). @default the environment's
   */
  checkResponses?: boolean;
}

/**
 * One answered request: its method, its route's pattern (`/api/tasks/:task_id`; undefined when
 * no route matched), its status code and the time to answer it, seconds.
 */
export type RequestObserver = (method: string, route: string | undefined, statusCode: number, seconds: number) => void;

/**
 * Body limit of the batch routes (`POST /api/tasks/batch`, `POST /api/workers/complete`), bytes:
 * 16 MiB, or `maxPayloadBytes` if that is larger. A thousand tasks do not fit in one task's
 * limit; each task's payload is still held to `maxPayloadBytes` by validation.
 */
export function batchBodyLimitBytes(options: CompiledOptions): number {
  return Math.max(options.maxPayloadBytes, 16 * 1024 * 1024);
}

/**
 * Body limit of the single heartbeat and complete routes, bytes: the server's, or room for a
 * result (or progress) of `maxResultBytes` with the rest of the body if that is larger.
 */
export function resultBodyLimitBytes(options: CompiledOptions): number {
  return Math.max(options.maxPayloadBytes, options.maxResultBytes + 64 * 1024);
}

/**
 * The node's own host names, which a node that asks for no key answers besides loopback and
 * `allowedHosts`: the address it listens on (unless that is every address) and the host of its
 * advertised URL.
 */
function ownHosts(options: CompiledOptions): string[] {
  const own = options.host === '0.0.0.0' || options.host === '::' ? [] : [options.host];
  if (options.advertiseUrl !== null) own.push(new URL(options.advertiseUrl).hostname.replace(/^\[|\]$/g, ''));
  return own;
}

/** Builds the server. Routes are registered when it is readied (`ready`, `listen`, `inject`). */
export function buildServer(input: BuildServerOptions): FastifyInstance {
  const { services, options } = input;
  const handleError = errorHandler(input.storeOutage);
  const app = Fastify({
    ...(input.logger ? { loggerInstance: input.logger } : { logger: { level: options.logLevel } }),
    bodyLimit: options.maxPayloadBytes,
    frameworkErrors: handleError,
    // Requests that arrive while the server closes get the catalogue's 503 below rather than
    // fastify's own body.
    return503OnClosing: false,
  }) as unknown as FastifyInstance;

  // Bodies are JSON only. Our own parser so that an empty body is "no body" (DELETE and
  // heartbeat clients often send the header without one), a parse error is the catalogue's
  // `malformed_json` carrying the parser's reason, and nesting past `maxJsonDepth` is a 400
  // before anything recurses over it (src/http/json-body.ts). JSON.parse does not touch
  // prototypes, and every validator copies known fields out, so `__proto__` members are inert.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    try {
      done(null, parseJsonBody(body as string, options.maxJsonDepth));
    } catch (error) {
      done(error as Error, undefined);
    }
  });

  useRouteSchemas(app, input.checkResponses);
  registerDocs(app, packageVersion());

  app.setErrorHandler(handleError);
  app.setNotFoundHandler(handleNotFound);

  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.addHook('onRequest', (_request, _reply, done) => {
    done(closing ? new WheelhouseError('not_ready', 'The node is shutting down.') : undefined);
  });
  app.addHook('onRequest', hostCheck(services.keys, ownHosts(options), options.allowedHosts));
  app.addHook('onRequest', originCheck(options.allowedOrigins));
  app.addHook('onRequest', keyAuth(services.keys));
  // A WebSocket upgrade refused by a hook (401, 403) is answered on a socket the HTTP server
  // gave up at its 'upgrade' event, and which the channel's plugin ends only for upgrades its
  // own hook saw: end it here once the answer is written, or it stays open (and holds `close`).
  app.addHook('onResponse', (request, _reply, done) => {
    if (isUpgrade(request)) request.raw.socket?.end(() => request.raw.socket?.destroy());
    done();
  });
  const onAnswered = input.onAnswered;
  if (onAnswered !== undefined)
    app.addHook('onResponse', (request, reply, done) => {
      onAnswered(request.method, request.routeOptions.url, reply.statusCode, reply.elapsedTime / 1000);
      done();
    });

  const batchLimit = batchBodyLimitBytes(options);
  void app.register(tokenRoutes(services.keys));
  void app.register(opsRoutes, { api: services.health, ...(input.metrics ? { metrics: input.metrics } : {}) });
  void app.register(dashboardRoutes, {
    keysEnabled: () => services.keys.enabled(),
    ...(input.dashboardDir === undefined ? {} : { dir: input.dashboardDir }),
  });
  const defaults = {
    timeoutSeconds: options.defaultTimeoutSeconds,
    startDeadlineSeconds: options.startDeadlineSeconds,
    maxPayloadBytes: options.maxPayloadBytes,
    maxDependencies: options.maxDependencies,
  };
  void app.register(tasksRoutes, {
    api: services.tasks,
    schedules: services.schedules,
    explain: services.explain,
    defaults,
    batchBodyLimitBytes: batchLimit,
  });
  void app.register(childrenRoutes, { api: services.children, defaults, batchBodyLimitBytes: batchLimit });
  void app.register(dagRoutes, { api: services.dags, defaults, bodyLimitBytes: batchLimit });
  void app.register(limitsRoutes, { api: services.limits });
  void app.register(operationsRoutes, { api: services.operations, keys: services.keys });
  // Long-polls and worker sockets share one budget (decision 0021).
  const slots = new WorkerSlots(options.pollMaxConcurrent, options.workerSocketsMax);
  void app.register(workerRoutes, {
    api: services.workers,
    slots,
    pollMaxWaitMs: options.pollMaxWaitMs,
    pollMaxTaskTypes: options.pollMaxTaskTypes,
    pollMaxConcurrent: options.pollMaxConcurrent,
    maxPageBytes: options.maxPageBytes,
    batchBodyLimitBytes: batchLimit,
    maxResultBytes: options.maxResultBytes,
    resultBodyLimitBytes: resultBodyLimitBytes(options),
  });
  if (input.channel !== undefined) {
    void app.register(workerChannelRoutes, {
      api: input.channel,
      keys: services.keys,
      ...(input.storeOutage === undefined ? {} : { storeOutage: input.storeOutage }),
      maxTaskTypes: options.pollMaxTaskTypes,
      slots,
      helloTimeoutMs: options.workerHelloTimeoutMs,
      maxFrameBytes: options.workerFrameMaxBytes,
      maxJsonDepth: options.maxJsonDepth,
      maxResultBytes: options.maxResultBytes,
      taskDefaults: defaults,
    });
  }
  for (const plugin of input.extraPlugins ?? []) void app.register(plugin);
  return app;
}

/**
 * What the route plugins need of the server they are registered on: the shared schemas they
 * refer to by name, requests validated through our Ajv (errors in the catalogue's words),
 * answers serialized from their schemas, each compiled on first use or in the background once
 * the server listens (schema-warmup.ts), and — when `check` or `WHEELHOUSE_CHECK_RESPONSES=1` —
 * every answer held to its schema. Answers the server's warm-up.
 */
export function useRouteSchemas(app: FastifyInstance, check?: boolean): SchemaWarmup {
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
  const warmup = new SchemaWarmup();
  app.setValidatorCompiler(validatorCompiler(warmup));
  app.setSerializerCompiler(serializerCompiler(warmup));
  app.addHook('onListen', (done) => {
    warmup.warm();
    done();
  });
  app.addHook('onClose', (_instance, done) => {
    warmup.stop();
    done();
  });
  if (check ?? process.env.WHEELHOUSE_CHECK_RESPONSES === '1') checkResponses(app);
  return warmup;
}
