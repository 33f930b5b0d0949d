import type { FastifyInstance } from 'fastify';
import type { DestinationStream } from 'pino';
import type { NodeEvents } from '../domain/events.js';
import { ConfigError, compileOptions, type CompiledOptions, type WheelhouseOptions } from '../lib/config.js';
import { TypedEvents } from '../lib/events.js';
import { withTracing } from './tracing.js';
import { isLoopbackHost } from '../lib/address-patterns.js';
import { holdingTheLoop } from '../lib/loop-hold.js';
import type { Metrics } from '../lib/metrics.js';
import { WHEEL } from '../actors/wheel-partition.js';
import { WORKER_SOCKETS } from '../actors/worker.js';
import { startNoopExecutor, type BuiltinExecutor } from '../executors/builtin.js';
import { startHttpExecutor } from '../executors/http-executor.js';
import { buildServer } from '../http/server.js';
import type { Clock } from '../runtime/clock.js';
import type { Cluster } from '../runtime/cluster.js';
import { LivePlacement } from '../runtime/ring.js';
import { ActorSystem } from '../runtime/system.js';
import { SafetyNet } from '../services/safety-net.js';
import { RetentionSweep } from '../services/retention-sweep.js';
import { StartDeadlines } from '../services/start-deadlines.js';
import { LimitCatalog } from '../services/limit-catalog.js';
import { TaskStatsRollup } from '../services/task-stats.js';
import type { Services } from '../services/types.js';
import type { WorkerChannel } from '../services/worker-channel.js';
import { openBackend, type Backend } from '../store/backend.js';
import { registerActorKinds } from './actors.js';
import { actorBrowser, adminFace, clusterPeers } from './admin.js';
import { nodeClock, type NodeContext } from './context.js';
import { ReachProbe } from './reach-probe.js';
import { DutyLog } from './duty-log.js';
import { nodeLogger } from './logger.js';
import { startLoops } from './loops.js';
import { buildServices } from './services.js';
import { nodeMetrics } from './metrics.js';
import { Ownership } from './ownership.js';
import { watchStoreOutages } from './store-outages.js';

/** A running node: the HTTP API, the actor host and the background loops. */
export interface WheelhouseNode {
  readonly options: CompiledOptions;
  /** `http://host:port` the API listens on. */
  readonly url: string;
  readonly server: FastifyInstance;
  readonly services: Services;
  readonly system: ActorSystem;
  readonly backend: Backend;
  readonly metrics: Metrics;
  /** What happens on the node (`domain/events.ts`): tests and tools wait on these. */
  readonly events: TypedEvents<NodeEvents>;
  /** The worker channel: its sockets, and what they hold in frames (`frames`). */
  readonly channel: Pick<WorkerChannel, 'frames' | 'size'>;
  close(): Promise<void>;
}

export interface NodeOverrides {
  /** Time source; tests pass a FakeClock. @default systemClock */
  clock?: Clock;
  /** An already-open backend (tests share one between restarts). */
  backend?: Backend;
  /**
   * Where the log lines go, in `options.logFormat` (tests read them). @default stdout; pretty
   * lines are coloured only there, when it is a terminal
   */
  logDestination?: DestinationStream;
}

/** Starts a node: opens the stores (applying migrations), then `startOn`. */
export async function startNode(input: WheelhouseOptions = {}, overrides: NodeOverrides = {}): Promise<WheelhouseNode> {
  const options = compileOptions(input);
  checkExposure(options);
  return withTracing(() => holdingTheLoop(() => startWith(options, overrides)));
}

async function startWith(options: CompiledOptions, overrides: NodeOverrides): Promise<WheelhouseNode> {
  if (overrides.backend) return startOn(options, overrides.backend, overrides);
  // A backend opened here is closed again if the node cannot start: no pools left open.
  const backend = await openBackend(options);
  try {
    return await startOn(options, backend, overrides);
  } catch (error) {
    await backend.close().catch(() => undefined);
    throw error;
  }
}

/**
 * A node that other machines can reach must ask for keys: listening beyond loopback needs an
 * admin key unless `insecure` says otherwise, and a cluster node on every address (`0.0.0.0`)
 * needs `advertiseUrl`, or its peers would be told to dial an address that is not one.
 */
export function checkExposure(options: CompiledOptions): void {
  const loopback = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1|localhost)$/i.test(options.host);
  if (!loopback && options.adminToken === null && !options.insecure) {
    throw new ConfigError(
      'host',
      `${options.host} is not a loopback address, and this node has no admin key: anyone who reaches it could ` +
        'submit, cancel and read every task. Set WHEELHOUSE_ADMIN_TOKEN or --admin-token-file (docs/security.md), ' +
        'or pass --insecure to accept that.',
    );
  }
  const everywhere = options.host === '0.0.0.0' || options.host === '::';
  if (everywhere && options.backend === 'postgres' && options.advertiseUrl === null) {
    throw new ConfigError(
      'advertiseUrl',
      `with --host ${options.host} the other nodes need the URL that reaches this one: set --advertise-url`,
    );
  }
}

/**
 * What a node that asks for no key says as it starts: nothing else tells an operator that the
 * node behind their proxy or tunnel is open (docs/security.md).
 */
export function keylessWarning(host: string, url: string): string {
  const who = isLoopbackHost(host) ? 'any process on this machine' : 'anyone who reaches it';
  return (
    `no API key is required: ${who} can use every route of ${url}, key management included ` +
    '(set WHEELHOUSE_ADMIN_TOKEN or --admin-token-file to require keys)'
  );
}

/**
 * The composition root. Start order: clock, log and events, cluster and actor system, the
 * actor kinds and the services, ownership of the always-on actors, then the HTTP server, then
 * the loops and executors. Close order is the reverse (see `close`).
 */
async function startOn(options: CompiledOptions, backend: Backend, overrides: NodeOverrides): Promise<WheelhouseNode> {
  const { clock, aligned } = await nodeClock(options, backend, overrides.clock);
  const log = nodeLogger(options, overrides.logDestination);
  // A store that is lost is logged once, with what it stops (`store-outages.ts`); the
  // failures it causes meanwhile go to debug instead of one error line each.
  const outages = watchStoreOutages(backend.health, log);
  const onError = (error: unknown, context: string): void => {
    if (outages.explains(error)) log.debug({ err: error }, context);
    else log.error({ err: error }, context);
  };
  const events = new TypedEvents<NodeEvents>((error, name) => onError(error, `a listener of ${name}`));
  const backoff = { baseMs: options.retryBaseMs, maxMs: options.retryMaxMs };
  // Counts task activity from the first event on (docs/decisions/0034-task-stats-rollup.md).
  const stats = new TaskStatsRollup({
    store: backend.stats,
    nodeId: options.nodeId,
    clock,
    retentionMs: options.statsRetentionMs,
    maxTaskTypes: options.metricsTaskTypesMax,
    events,
  });
  const offStats = stats.listen(events);
  // The declarations are known before anything fires, claims or validates a submit.
  const limits = new LimitCatalog({ store: backend.limits, clock });
  await limits.start();
  const ctx: NodeContext = { options, backend, clock, log, events, backoff, limits, onError };
  for (const warning of backend.warnings) log.warn(warning);
  if (aligned)
    log.info({ offsetMs: aligned.ownSkewMs, rttMs: aligned.rttMs }, "this node's clock is aligned on the database's");
  let started = false;
  let backlog = 0;
  let url = `http://${options.host}:${options.port}`;

  // The wheel partitions are few and must be spread evenly: bounded loads (see ring.ts). The
  // embedded backend is one process by construction: a cluster of one, with no membership and
  // no transport. Postgres + Redis nodes form one; the cluster delivers into the actor system
  // built after it, and ownership follows its ring.
  // The sockets of a node are reached through an actor pinned to it (src/actors/worker.ts).
  const ring = {
    bounded: new Map([[WHEEL.name, Array.from({ length: options.partitions }, (_, p) => String(p))]]),
    pinned: new Set([WORKER_SOCKETS.name]),
  };
  let ownership: Ownership | null = null;
  // A node cut off from Redis alone says so in its heartbeats, and the ring moves its
  // partitions to nodes that can fire them (src/node/reach-probe.ts).
  const redisReach =
    backend.pingRedis === undefined
      ? null
      : new ReachProbe(() => backend.pingRedis!(), {
          intervalMs: options.heartbeatMs,
          patienceMs: options.failureTimeoutMs,
          clock,
        }).start();
  const cluster: Cluster | null =
    backend.kind !== 'postgres'
      ? null // and its modules (undici's pools) not loaded: decision 0047
      : (await import('./cluster.js')).nodeCluster({
          ...ctx,
          ring,
          ...(redisReach === null ? {} : { redisReachable: () => redisReach.reached() }),
          system: (): ActorSystem => actors,
          ownership: () => ownership!,
          onHandedOff: (n) => metrics.onHandedOff(n),
        });
  const placement: LivePlacement = cluster?.placement ?? new LivePlacement(options.nodeId, ring);
  const metrics = nodeMetrics(
    events,
    log,
    {
      backlog: () => backlog,
      system: (): ActorSystem => actors,
      placement: () => placement,
      cluster: () => cluster,
      aligned,
      depths: () => backend.ready.depths(clock.now()),
      maxTaskTypes: options.metricsTaskTypesMax,
    },
    { duties: new DutyLog(log, (error) => outages.explains(error)), onError },
  );
  const actors: ActorSystem = new ActorSystem({
    nodeId: options.nodeId,
    clock,
    snapshots: backend.snapshots,
    placement,
    ...(cluster ? { transport: cluster.transport } : {}),
    onError: metrics.onActorError,
    onDutyEnded: metrics.onActorDutyEnded,
  });
  const { wheel, resolver, activation, leases, gate, limitCancels } = registerActorKinds(ctx, actors, metrics);
  const browser = actorBrowser({ options, system: actors, cluster, placement: () => placement });
  const { services, dispatcher, channel, presence, operationRunner } = buildServices(ctx, {
    system: actors,
    wheel,
    resolver,
    activation,
    leases,
    gate,
    backlog: () => backlog,
    started: () => started,
    ownerOf: (kind, key) => placement.ownerOf(kind, key),
    inspect: (kind, key) => browser.inspect(kind, key),
    peers: clusterPeers(options, cluster, () => placement),
  });
  const offPush = backend.ready.onPush((types) => dispatcher.notify(types));
  // The limit actors' `on_limit` strategies cancel as DELETE does (a running task's worker is told).
  limitCancels.cancel = (taskIds, reason) => {
    for (const id of taskIds)
      services.tasks.cancel(id, reason).catch((error: unknown) => onError(error, `cancelling ${id} (${reason})`));
  };

  const owned = (ownership = new Ownership({
    system: actors,
    tasks: backend.tasks,
    schedules: backend.schedules,
    snapshots: backend.snapshots,
    clock,
    partitions: options.partitions,
    activation,
    onFenced: metrics.onFenced,
    onError,
    isLive: (id) => placement.ring.nodes().includes(id),
  }));
  if (cluster === null) {
    // Schedules whose wake passed while the node was down first: a misfire policy applies
    // before the wheel fires their overdue instances.
    await owned.wakeOverdueSchedules();
    await owned.keepPartitionsActive();
  } else {
    // The ring as the live set has it, before listening, so that the first requests already
    // route to the right owners; this node joins once it knows its own address.
    await cluster.prime();
  }
  // The keys are known before the first request is taken.
  await services.keys.start((error) => onError(error, 're-reading the API keys'));
  const admin = adminFace({
    options,
    backend,
    clock,
    system: actors,
    cluster,
    placement: () => placement,
    url: () => url,
    presence,
    browser,
    keys: services.keys,
    channel,
    dispatcher,
  });
  const server = buildServer({
    services,
    options,
    logger: log,
    storeOutage: (error) => outages.explains(error),
    metrics: () => metrics.registry.render(),
    onAnswered: metrics.onAnswered,
    extraPlugins: admin,
    channel,
  });
  await server.listen({ host: options.host, port: options.port });
  const address = server.server.address();
  url = `http://${options.host}:${typeof address === 'object' && address ? address.port : options.port}`;
  if (cluster !== null) {
    if (options.clusterSecret === null)
      log.warn('clusterSecret is not set: this node refuses node-to-node requests and can only run alone');
    await cluster.start(options.advertiseUrl ?? url);
    await owned.takeOwnership();
  }

  // Dependents a previous life of the node (or another node) did not reach before it stopped.
  await resolver.replay(true).catch((error: unknown) => onError(error, 'replaying the dependency outbox at start'));
  const safetyNet = new SafetyNet({
    tasks: backend.tasks,
    schedules: backend.schedules,
    wakes: activation,
    system: actors,
    clock,
    backoff,
    graceMs: options.safetyNetGraceMs,
    ownedPartitions: () => owned.ownedPartitions(),
    placement: wheel,
    dependents: resolver,
    allGated: (entries) => gate.split(entries).free.length === 0,
    events,
  });
  events.on('ring:changed', () => safetyNet.wake());
  const retention = new RetentionSweep({
    tasks: backend.tasks,
    clock,
    retentionMs: options.retentionMs,
    ownedPartitions: () => owned.ownedPartitions(),
    events,
  });
  const startDeadlines = new StartDeadlines({
    tasks: backend.tasks,
    clock,
    ownedPartitions: () => owned.ownedPartitions(),
    dependents: resolver,
    events,
  });
  const loops = startLoops({
    clock,
    aligned,
    options,
    backend,
    resolver,
    ownership: owned,
    safetyNet,
    retention,
    startDeadlines,
    operationRunner,
    limits,
    stats,
    log,
    onDutyFailure: metrics.onDutyFailure,
    onDutyEnded: metrics.onDutyEnded,
    mayOwn: () => cluster === null || cluster.mayOwn,
    departedActors: () => actors.departedTotal(),
    setBacklog: (n) => void (backlog = n),
  });
  const executors: BuiltinExecutor[] = !options.builtinExecutors
    ? []
    : [
        startNoopExecutor(services.workers, options.nodeId, (e) => onError(e, 'noop executor')),
        startHttpExecutor(services.workers, options, (e) => onError(e, 'http executor'), log),
      ];
  started = true;
  log.info({ nodeId: options.nodeId, backend: backend.kind, url }, 'wheelhouse node started');
  if (!services.keys.enabled()) log.warn({ url }, keylessWarning(options.host, url));

  let closing: Promise<void> | undefined;
  return {
    options,
    url,
    server,
    services,
    system: actors,
    backend,
    metrics: metrics.registry,
    events,
    channel,
    close() {
      closing ??= (async () => {
        started = false;
        for (const stop of loops) stop();
        retention.stop();
        await operationRunner.stop();
        resolver.stop();
        wheel.stop();
        dispatcher.stop();
        channel.stop();
        offPush();
        services.keys.stop();
        await Promise.all(executors.map((e) => e.stop()));
        await server.close();
        // Hand-off: every actor takes its final snapshot and releases its ownership, then the
        // node leaves the ring and tells the others, who take over at once.
        await actors.shutdown();
        await cluster?.leave();
        // What was counted since the last flush is kept: the history survives a restart.
        offStats();
        await stats.flush().catch((error: unknown) => onError(error, 'writing the last task activity counts'));
        redisReach?.stop();
        outages.stop();
        if (!overrides.backend) await backend.close();
        log.info({ nodeId: options.nodeId }, 'wheelhouse node stopped');
        // The last lines reach their destination before `close` resolves: a caller may exit
        // the process at once (the CLI does). Pretty lines are written synchronously anyway.
        await new Promise<void>((resolve) => log.flush(() => resolve()));
      })();
      return closing;
    },
  };
}
