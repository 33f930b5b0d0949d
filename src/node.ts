import type { FastifyInstance } from 'fastify';
import { compileOptions, type CompiledOptions, type WheelhouseOptions } from './config.js';
import { startNoopExecutor, type BuiltinExecutor } from './executors/builtin.js';
import { startHttpExecutor } from './executors/http-executor.js';
import { adminRoutes } from './http/admin-routes.js';
import { clusterRoutes } from './http/cluster-routes.js';
import { buildServer } from './http/server.js';
import { Metrics } from './metrics.js';
import { LEASE_KIND, workerLeaseBehavior, type LeaseMessage } from './actors/worker-lease.js';
import { WHEEL_KIND, wheelPartitionBehavior, type WheelMessage } from './actors/wheel-partition.js';
import { CRON_KIND, cronScheduleBehavior } from './actors/cron-schedule.js';
import { DAG_KIND, dagNodeBehavior } from './actors/dag-node.js';
import type { DueEntry, ScheduleRecord, ScheduleWrite, ScheduleWriteResult, Transition } from './store/types.js';
import type { DagOutcome } from './store/dag-types.js';
import { WriteBatcher } from './store/write-batcher.js';
import { AlignedClock } from './runtime/aligned-clock.js';
import { offsetClock, systemClock, type Clock } from './runtime/clock.js';
import type { DutyFailure } from './runtime/supervision.js';
import type { Cluster } from './runtime/cluster.js';
import { inspectRemote } from './runtime/cluster-wire.js';
import { LivePlacement } from './runtime/ring.js';
import { ActorSystem } from './runtime/system.js';
import { isWheelhouseError } from './errors.js';
import { clusterStatus } from './tasks/cluster-status.js';
import { Ownership } from './tasks/ownership.js';
import { openBackend, type Backend } from './store/backend.js';
import { DagResolver } from './tasks/dag-resolver.js';
import { Dispatcher } from './tasks/dispatcher.js';
import { SafetyNet } from './tasks/safety-net.js';
import { Scheduler } from './tasks/scheduler.js';
import { droppedTells, nodeCluster } from './node-cluster.js';
import { startLoops } from './node-loops.js';

/** A running node: the HTTP API, the actor host and the background loops. */
export interface WheelhouseNode {
  readonly options: CompiledOptions;
  /** `http://host:port` the API listens on. */
  readonly url: string;
  readonly server: FastifyInstance;
  readonly scheduler: Scheduler;
  readonly system: ActorSystem;
  readonly backend: Backend;
  readonly metrics: Metrics;
  close(): Promise<void>;
}

export interface NodeOverrides {
  /** Time source; tests pass a FakeClock. @default systemClock */
  clock?: Clock;
  /** An already-open backend (tests share one between restarts). */
  backend?: Backend;
}

/** How long a dependent's actor may take to take in a finished predecessor. */
const DAG_ASK_MS = 60_000;
/** Samples of the database's clock taken before a node starts, to align its own on it. */
const CLOCK_SAMPLES_AT_START = 5;

/**
 * Starts a node: opens the stores (applying migrations), activates the wheel partitions,
 * starts the built-in executors and listens for HTTP.
 */
export async function startNode(input: WheelhouseOptions = {}, overrides: NodeOverrides = {}): Promise<WheelhouseNode> {
  const options = compileOptions(input);
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

async function startOn(options: CompiledOptions, backend: Backend, overrides: NodeOverrides): Promise<WheelhouseNode> {
  // A Postgres node reads time as the database does (docs/decisions/0007-…): whatever its
  // own clock says, it fires, claims and expires leases on the same time as every other node.
  // A clock given by a test is used as it is.
  const ownClock = overrides.clock ?? offsetClock(systemClock, options.testClockOffsetMs);
  const aligned = overrides.clock === undefined && backend.kind === 'postgres' ? new AlignedClock(ownClock, () => backend.databaseNowMs()) : null;
  for (let i = 0; aligned !== null && i < CLOCK_SAMPLES_AT_START; i++) await aligned.sample();
  const clock: Clock = aligned ?? ownClock;
  const metrics = new Metrics();
  let started = false;
  let backlog = 0;
  let url = `http://${options.host}:${options.port}`;

  // The server is built first so that everything can log through its logger.
  let scheduler: Scheduler | undefined;
  let system: ActorSystem | undefined;
  let ownership: Ownership | undefined;
  // The embedded backend is one process by construction (PGlite, in-process queues): a
  // cluster of one, with no membership and no transport. Postgres + Redis nodes form one.
  let cluster: Cluster | null = null;
  // The wheel partitions are few and must be spread evenly: bounded loads (see ring.ts).
  const ringOptions = { bounded: new Map([[WHEEL_KIND, Array.from({ length: options.partitions }, (_, p) => String(p))]]) };
  const singlePlacement = new LivePlacement(options.nodeId, ringOptions);
  const placement = (): LivePlacement => cluster?.placement ?? singlePlacement;
  const server = buildServer({
    api: {
      submit: (s) => need(scheduler).submit(s),
      submitDag: (s) => need(scheduler).submitDag(s),
      getDag: (id) => need(scheduler).getDag(id),
      getTask: (id) => need(scheduler).getTask(id),
      listTasks: (f) => need(scheduler).listTasks(f),
      cancel: (id) => need(scheduler).cancel(id),
      pause: (id) => need(scheduler).pause(id),
      resume: (id) => need(scheduler).resume(id),
      history: (id, l, t) => need(scheduler).history(id, l, t),
      poll: (r, s) => need(scheduler).poll(r, s),
      release: (a) => need(scheduler).release(a),
      heartbeat: (id, t) => need(scheduler).heartbeat(id, t),
      complete: (r) => need(scheduler).complete(r),
      isReady: async () => scheduler !== undefined && (await scheduler.isReady()),
    },
    options,
    metrics: () => metrics.render(),
    extraPlugins: [
      adminRoutes({
        cluster: () =>
          clusterStatus({
            nodeId: options.nodeId,
            url,
            partitions: options.partitions,
            ring: placement().ring,
            cluster,
            heartbeatMs: options.heartbeatMs,
            snapshots: backend.snapshots,
          }),
        listActors: (filter) => need(system).list(filter),
        inspectActor: async (kind, key) => {
          const local = need(system).inspect(kind, key);
          const owner = placement().ownerOf(kind, key);
          const address = owner === options.nodeId ? undefined : cluster?.addressOf(owner);
          if (local !== null || address === undefined) return local;
          return inspectRemote(address, options.clusterSecret, kind, key);
        },
        queues: () => backend.ready.depths(clock.now()),
      }),
      clusterRoutes({
        secret: options.clusterSecret,
        accept: (envelope) => need(system).acceptRemote(envelope),
        onRefresh: () => cluster?.refresh(),
        inspect: (kind, key) => need(system).inspect(kind, key),
      }),
    ],
  });
  const log = server.log;
  const onError = (error: unknown, context: string): void => log.error({ err: error }, context);
  for (const warning of backend.warnings) log.warn(warning);
  if (aligned !== null) log.info({ offsetMs: aligned.offsetMs, rttMs: aligned.rttMs }, "this node's clock is aligned on the database's");

  const countSubmitted = metrics.counter('wheelhouse_tasks_submitted_total', 'Tasks written by submissions.');
  const countClaimed = metrics.counter('wheelhouse_tasks_claimed_total', 'Tasks claimed by workers.');
  const countCompleted = metrics.counter('wheelhouse_tasks_completed_total', 'Results recorded, by resulting status.');
  const countRequeued = metrics.counter('wheelhouse_tasks_requeued_total', 'Tasks sent back to pending (retry or expired lease).');
  const gaugeBacklog = metrics.gauge('wheelhouse_ready_backlog', 'Entries waiting in the ready queues.');
  const gaugeActors = metrics.gauge('wheelhouse_actors_live', 'Live actors on this node, by kind.');
  const gaugeRss = metrics.gauge('process_resident_memory_bytes', 'Resident memory of the node process.');
  const gaugeHeap = metrics.gauge('nodejs_heap_size_used_bytes', 'V8 heap in use.');
  const countDagReplayed = metrics.counter('wheelhouse_dag_events_replayed_total', 'Finished predecessors delivered to their dependents from the outbox, after the live path did not.');
  const countRecovered = metrics.counter(
    'wheelhouse_safety_net_recovered_total',
    'Tasks a safety net found left behind by their mechanism and handed on, by kind: lease (expired, never handed on), pending (overdue, held by nothing), blocked (predecessors done, never reconciled). Should stay 0.',
  );
  const countRebuilds = metrics.counter(
    'wheelhouse_partition_rebuilds_total',
    'Wheel partitions rebuilt in full from Postgres because the bucket store had lost their data (a flush, a restart, an older snapshot) or never had it (a first start).',
  );
  const countDutyFailures = metrics.counter('wheelhouse_duty_failures_total', 'Failures of duties (actor timers, node loops, placements), each retried after a backoff, by duty.');
  const gaugeClockOffset = metrics.gauge('wheelhouse_clock_offset_seconds', "What this node adds to its own clock to read the database's.");
  const onDutyFailure = (error: unknown, failure: DutyFailure): void => {
    countDutyFailures(1, { duty: failure.duty });
    log.warn({ err: error, ...failure }, `duty ${failure.duty} failed (${failure.attempt} in a row); again in ${failure.retryInMs} ms`);
  };
  const countCron = metrics.counter('wheelhouse_cron_fire_times_total', 'Cron fire times reached, by outcome (fired, skipped for overlap, missed by misfire policy).');

  const countFenced = metrics.counter('wheelhouse_stale_epoch_total', 'Writes refused because a newer activation of the actor owns it (the activation stopped).');
  const countHandedOff = metrics.counter('wheelhouse_actors_handed_off_total', 'Actors stopped here because a ring change moved them to another node.');
  const gaugeLiveNodes = metrics.gauge('wheelhouse_cluster_live_nodes', 'Nodes in the ring this node routes by.');
  const dropped = droppedTells(log, metrics.counter('wheelhouse_messages_dropped_total', 'Told messages no node accepted before their deadline, by actor kind.'));
  const gaugeTransport = metrics.gauge('wheelhouse_transport', 'Node-to-node transport counters since start (requests, envelopes, retries, failed).');

  if (backend.kind === 'postgres') {
    cluster = nodeCluster({
      options,
      backend,
      ring: ringOptions,
      system: () => need(system),
      ownership: () => need(ownership),
      onHandedOff: (n) => countHandedOff(n),
      log,
      onError,
    });
  }
  system = new ActorSystem({
    nodeId: options.nodeId,
    clock,
    snapshots: backend.snapshots,
    placement: cluster?.placement ?? singlePlacement,
    ...(cluster ? { transport: cluster.transport } : {}),
    onError: (error, info) => {
      if (dropped(error, info)) return;
      if (isWheelhouseError(error, 'stale_epoch')) {
        countFenced(1);
        log.warn({ actor: info, reason: error.message }, 'a stale activation was fenced and stopped');
      } else if (info.attempt !== undefined && info.retryInMs !== undefined) {
        onDutyFailure(error, { duty: `${info.kind}.${info.messageType ?? 'message'}`, attempt: info.attempt, retryInMs: info.retryInMs });
      } else {
        onError(error, `actor ${JSON.stringify(info)}`);
      }
    },
  });
  const backoff = { baseMs: options.retryBaseMs, maxMs: options.retryMaxMs };
  const dispatcher = new Dispatcher({
    tasks: backend.tasks,
    ready: backend.ready,
    clock,
    system,
    pollMaxWaitMs: options.pollMaxWaitMs,
    onClaimed: (n) => countClaimed(n),
    onError,
  });
  const offPush = backend.ready.onPush((types) => dispatcher.notify(types));
  // Schedule records a caller already holds, handed to the actor's activation to save a read.
  const preloaded = new Map<string, ScheduleRecord>();
  const activateSchedules = async (records: ScheduleRecord[]): Promise<void> => {
    for (const r of records) preloaded.set(r.id, r);
    try {
      await Promise.all(records.map((r) => need(system).ensureActive(CRON_KIND, r.id)));
    } finally {
      for (const r of records) preloaded.delete(r.id);
    }
  };
  const resolver = new DagResolver({
    dags: backend.dags,
    system,
    clock,
    askTimeoutMs: DAG_ASK_MS,
    onError,
    onReplayed: (n) => countDagReplayed(n),
    onSwept: (n) => countRecovered(n, { kind: 'blocked' }),
  });
  scheduler = new Scheduler({
    tasks: backend.tasks,
    schedules: backend.schedules,
    dags: backend.dags,
    notifyDependents: (events) => resolver.finished(events),
    activateSchedules,
    ready: backend.ready,
    buckets: backend.buckets,
    clock,
    system,
    dispatcher,
    partitions: options.partitions,
    backoff,
    readyBacklogLimit: options.readyBacklogLimit,
    backlog: () => backlog,
    ping: () => backend.ping(),
    isStarted: () => started,
    onError,
    onDutyFailure,
    onSubmitted: (n) => countSubmitted(n),
    onCompleted: (transitions) => {
      const byStatus = new Map<string, number>();
      for (const t of transitions) byStatus.set(t.status, (byStatus.get(t.status) ?? 0) + 1);
      for (const [status, n] of byStatus) countCompleted(n, { status });
    },
  });
  const sched = scheduler;
  const actors = system;

  actors.register(
    wheelPartitionBehavior({
      tasks: backend.tasks,
      buckets: backend.buckets,
      ready: backend.ready,
      slotMs: options.slotMs,
      nearWindowMs: options.nearWindowMs,
      onRecovered: (n) => countRecovered(n, { kind: 'pending' }),
      onRebuilt: () => countRebuilds(1),
      recoverLease: (lease) =>
        actors.ref<LeaseMessage>(LEASE_KIND, lease.taskId).tell({
          type: 'granted',
          version: lease.version,
          leaseExpiresMs: lease.leaseExpiresMs,
        }),
      onError,
    }),
  );
  /** A lease that ran out (its actor's expiry, or the safety net's): the task is handed on. */
  const handOnExpired = (transition: Transition): void => {
    sched.finished([transition]);
    countRequeued(transition.requeued ? 1 : 0);
    void sched.requeue([transition]);
  };
  actors.register(
    workerLeaseBehavior({
      tasks: backend.tasks,
      backoff,
      requeue: handOnExpired,
      onError,
    }),
  );

  // Tasks that actors make pending in one turn (a batch of schedule writes, of reconciles) go
  // to the wheel together: one message per partition, not one per task.
  const placing: DueEntry[] = [];
  const placeSoon = (entries: readonly DueEntry[]): void => {
    if (placing.length === 0) setImmediate(() => void sched.place(placing.splice(0)));
    placing.push(...entries);
  };
  const scheduleWrites = new WriteBatcher<ScheduleWrite, ScheduleWriteResult>((writes) =>
    backend.schedules.write(writes, clock.now()),
  );
  actors.register(
    cronScheduleBehavior({
      schedules: backend.schedules,
      write: (w) => scheduleWrites.submit(w),
      place: placeSoon,
      partitions: options.partitions,
      misfireThresholdMs: options.cronMisfireThresholdMs,
      fireAllLimit: options.cronFireAllLimit,
      advanceSpreadMs: options.cronAdvanceSpreadMs,
      takePreloaded: (id) => preloaded.get(id),
      onFired: (outcome, n) => countCron(n, { outcome }),
      onError,
    }),
  );

  const reconciles = new WriteBatcher<string, DagOutcome | null>(async (ids) => {
    const outcomes = new Map((await backend.dags.reconcile(ids, clock.now())).map((o) => [o.taskId, o]));
    return ids.map((id) => outcomes.get(id) ?? null);
  });
  actors.register(
    dagNodeBehavior({
      reconcile: (id) => reconciles.submit(id),
      place: (entry) => placeSoon([entry]),
      cancelled: (id) => resolver.finished([{ predecessorId: id, status: 'cancelled' }]),
      idlePassivationMs: options.dagIdlePassivationMs,
    }),
  );

  metrics.onCollect(() => {
    const memory = process.memoryUsage();
    gaugeRss(memory.rss);
    gaugeHeap(memory.heapUsed);
    gaugeBacklog(backlog);
    const counts = actors.countByKind();
    for (const kind of [WHEEL_KIND, LEASE_KIND, CRON_KIND, DAG_KIND]) gaugeActors(counts.get(kind) ?? 0, { kind });
    gaugeLiveNodes(placement().ring.nodes().length);
    gaugeClockOffset((aligned?.offsetMs ?? 0) / 1000);
    if (cluster !== null) {
      for (const [counter, value] of Object.entries(cluster.transport.stats())) gaugeTransport(value, { counter });
    }
  });

  ownership = new Ownership({
    system: actors,
    tasks: backend.tasks,
    schedules: backend.schedules,
    snapshots: backend.snapshots,
    clock,
    partitions: options.partitions,
    isLive: (id) => placement().ring.nodes().includes(id),
    onFenced: (kind, key) => {
      countFenced(1);
      log.warn({ kind, key }, 'an activation was fenced while it started: another node took the actor');
    },
    activateSchedules: async (ids) => {
      await Promise.all(ids.map((id) => actors.ensureActive(CRON_KIND, id)));
    },
    activateRecords: activateSchedules,
    onError,
  });
  const owned = ownership;
  const executors: BuiltinExecutor[] = [];
  if (cluster === null) {
    await owned.activateOwnedSchedules();
    await owned.keepPartitionsActive();
  } else {
    // The ring as the live set has it, before listening, so that the first requests already
    // route to the right owners; this node joins once it knows its own address.
    await cluster.prime();
  }
  await server.listen({ host: options.host, port: options.port });
  const address = server.server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  url = `http://${options.host}:${port}`;
  if (cluster !== null) {
    if (options.clusterSecret === null) log.warn('clusterSecret is not set: node-to-node requests are accepted from loopback addresses only');
    await cluster.start(options.advertiseUrl ?? url);
    await owned.activateOwnedSchedules();
    await owned.takeOwnership();
  }

  // Dependents a previous life of the node (or another node) did not reach before it stopped.
  await resolver.replay(true).catch((error: unknown) => onError(error, 'replaying the dependency outbox at start'));

  const safetyNet = new SafetyNet({
    tasks: backend.tasks,
    system: actors,
    clock,
    backoff,
    ownedPartitions: () => owned.ownedPartitions(),
    graceMs: options.safetyNetGraceMs,
    handOn: handOnExpired,
    onRecovered: (kind, n) => countRecovered(n, { kind }),
  });
  const loops = startLoops({
    clock,
    aligned,
    options,
    backend,
    resolver,
    ownership: owned,
    safetyNet,
    mayOwn: () => cluster === null || cluster.mayOwn,
    setBacklog: (n) => {
      backlog = n;
    },
    log,
    onDutyFailure,
  });

  if (options.builtinExecutors) {
    executors.push(startNoopExecutor(sched, options.nodeId, (e) => onError(e, 'noop executor')));
    executors.push(startHttpExecutor(sched, options.nodeId, (e) => onError(e, 'http executor')));
  }

  started = true;
  log.info({ nodeId: options.nodeId, backend: backend.kind, url }, 'wheelhouse node started');

  let closing: Promise<void> | undefined;
  return {
    options,
    url,
    server,
    scheduler: sched,
    system: actors,
    backend,
    metrics,
    close() {
      closing ??= (async () => {
        started = false;
        for (const stop of loops) stop();
        resolver.stop();
        sched.stop();
        dispatcher.stop();
        offPush();
        await Promise.all(executors.map((e) => e.stop()));
        await server.close();
        // Hand-off: every actor takes its final snapshot and releases its ownership, then the
        // node leaves the ring and tells the others, who take over at once.
        await actors.shutdown();
        await cluster?.leave();
        if (!overrides.backend) await backend.close();
      })();
      return closing;
    },
  };
}

function need<T>(value: T | undefined): T {
  if (value === undefined) throw new Error('the node has not finished starting');
  return value;
}
