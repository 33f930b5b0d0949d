import type { FastifyBaseLogger } from 'fastify';
import type { NodeEvents } from '../domain/events.js';
import type { TypedEvents } from '../lib/events.js';
import { Metrics } from '../lib/metrics.js';
import { CRON } from '../actors/cron-schedule.js';
import { DAG } from '../actors/dag-node.js';
import { WHEEL } from '../actors/wheel-partition.js';
import { LEASE } from '../actors/worker-lease.js';
import { isWheelhouseError } from '../lib/errors.js';
import type { AlignedClock } from '../runtime/aligned-clock.js';
import type { Cluster } from '../runtime/cluster.js';
import type { ActorDutyEnded, ActorErrorInfo } from '../runtime/host.js';
import type { LivePlacement } from '../runtime/ring.js';
import type { DutyFailure, DutyFailuresEnded } from '../runtime/supervision.js';
import type { ActorSystem } from '../runtime/system.js';
import { droppedTells } from './cluster.js';
import type { DutyLog } from './duty-log.js';

/** What the node's metrics read when `/metrics` is scraped. */
export interface MetricSources {
  backlog(): number;
  system(): ActorSystem;
  placement(): LivePlacement;
  cluster(): Cluster | null;
  aligned: AlignedClock | null;
}

/** Where the reports that are also log lines go. */
export interface MetricReports {
  /** The failing duties, logged once per run of failures (see `DutyLog`). */
  duties: DutyLog;
  /** Any other error, logged. */
  onError(error: unknown, context: string): void;
}

/** The node's metrics, and the reports that are both a log line and a count. */
export interface NodeMetrics {
  readonly registry: Metrics;
  /** A duty failed and runs again after `failure.retryInMs`. */
  onDutyFailure(error: unknown, failure: DutyFailure): void;
  /** A duty that had failed succeeded, or was stopped. */
  onDutyEnded(ended: DutyFailuresEnded): void;
  /** An actor's failure: a dropped tell, a fenced activation, a failed duty, or an error. */
  onActorError(error: unknown, info: ActorErrorInfo): void;
  /** An actor's duty that had failed succeeded, or its actor left. */
  onActorDutyEnded(ended: ActorDutyEnded): void;
  /** An activation fenced while it started: another node took the actor. */
  onFenced(kind: string, key: string): void;
  onHandedOff(count: number): void;
}

/**
 * Every metric of `/metrics`: counters follow the node's events (`domain/events.ts`), gauges
 * are read at scrape time.
 */
export function nodeMetrics(
  events: TypedEvents<NodeEvents>,
  log: FastifyBaseLogger,
  sources: MetricSources,
  reports: MetricReports,
): NodeMetrics {
  const metrics = new Metrics();
  const { duties, onError } = reports;

  const submitted = metrics.counter('wheelhouse_tasks_submitted_total', 'Tasks written by submissions.');
  const claimed = metrics.counter('wheelhouse_tasks_claimed_total', 'Tasks claimed by workers.');
  const completed = metrics.counter('wheelhouse_tasks_completed_total', 'Results recorded, by resulting status.');
  const requeued = metrics.counter(
    'wheelhouse_tasks_requeued_total',
    'Tasks sent back to pending (retry or expired lease).',
  );
  const replayed = metrics.counter(
    'wheelhouse_dag_events_replayed_total',
    'Finished predecessors delivered to their dependents from the outbox, after the live path did not.',
  );
  const recovered = metrics.counter(
    'wheelhouse_safety_net_recovered_total',
    'Tasks a safety net found left behind by their mechanism and handed on, by kind: lease (expired, never handed on), pending (overdue, held by nothing), blocked (predecessors done, never reconciled). Should stay 0.',
  );
  const rebuilds = metrics.counter(
    'wheelhouse_partition_rebuilds_total',
    'Wheel partitions rebuilt in full from Postgres because the bucket store had lost their data (a flush, a restart, an older snapshot) or never had it (a first start).',
  );
  const dutyFailures = metrics.counter(
    'wheelhouse_duty_failures_total',
    'Failures of duties (actor timers, node loops, placements), each retried after a backoff, by duty.',
  );
  const cron = metrics.counter(
    'wheelhouse_cron_fire_times_total',
    'Cron fire times reached, by outcome (fired, skipped for overlap, missed by misfire policy).',
  );
  const fenced = metrics.counter(
    'wheelhouse_stale_epoch_total',
    'Writes refused because a newer activation of the actor owns it (the activation stopped).',
  );
  const handedOff = metrics.counter(
    'wheelhouse_actors_handed_off_total',
    'Actors stopped here because a ring change moved them to another node.',
  );
  const dropped = droppedTells(
    log,
    metrics.counter(
      'wheelhouse_messages_dropped_total',
      'Told messages no node accepted before their deadline, by actor kind.',
    ),
  );

  events.on('task:submitted', (e) => submitted(e.taskIds.length));
  events.on('task:claimed', (e) => claimed(e.taskIds.length));
  events.on('task:completed', (e) => {
    const byStatus = new Map<string, number>();
    for (const t of e.transitions) byStatus.set(t.status, (byStatus.get(t.status) ?? 0) + 1);
    for (const [status, n] of byStatus) completed(n, { status });
  });
  events.on('lease:expired', (e) => requeued(e.requeued ? 1 : 0));
  events.on('dag:replayed', (e) => replayed(e.count));
  events.on('safety-net:recovered', (e) => recovered(e.count, { kind: e.kind }));
  events.on('partition:rebuilt', () => rebuilds(1));
  events.on('cron:fired', (e) => cron(e.count, { outcome: e.outcome }));

  const gaugeBacklog = metrics.gauge('wheelhouse_ready_backlog', 'Entries waiting in the ready queues.');
  const gaugeActors = metrics.gauge('wheelhouse_actors_live', 'Live actors on this node, by kind.');
  const gaugeRss = metrics.gauge('process_resident_memory_bytes', 'Resident memory of the node process.');
  const gaugeHeap = metrics.gauge('nodejs_heap_size_used_bytes', 'V8 heap in use.');
  const gaugeClockOffset = metrics.gauge(
    'wheelhouse_clock_offset_seconds',
    "What this node adds to its own clock to read the database's.",
  );
  const gaugeLiveNodes = metrics.gauge('wheelhouse_cluster_live_nodes', 'Nodes in the ring this node routes by.');
  const gaugeTransport = metrics.gauge(
    'wheelhouse_transport',
    'Node-to-node transport counters since start (requests, envelopes, retries, failed).',
  );
  metrics.onCollect(() => {
    const memory = process.memoryUsage();
    gaugeRss(memory.rss);
    gaugeHeap(memory.heapUsed);
    gaugeBacklog(sources.backlog());
    const counts = sources.system().countByKind();
    for (const kind of [WHEEL.name, LEASE.name, CRON.name, DAG.name]) gaugeActors(counts.get(kind) ?? 0, { kind });
    gaugeLiveNodes(sources.placement().ring.nodes().length);
    gaugeClockOffset((sources.aligned?.offsetMs ?? 0) / 1000);
    const cluster = sources.cluster();
    if (cluster !== null) {
      for (const [counter, value] of Object.entries(cluster.transport.stats()) as [string, number][])
        gaugeTransport(value, { counter });
    }
  });

  const onDutyFailure = (error: unknown, failure: DutyFailure): void => {
    dutyFailures(1, { duty: failure.duty });
    duties.failed(error, failure);
  };
  return {
    registry: metrics,
    onDutyFailure,
    onDutyEnded: (ended) => duties.ended(ended),
    onActorDutyEnded: ({ kind, key, messageType, failures, outcome }) =>
      duties.ended({ duty: `${kind}.${messageType}`, subject: `${kind}/${key}`, failures, outcome }),
    onActorError(error, info) {
      if (dropped(error, info)) return;
      if (isWheelhouseError(error, 'stale_epoch')) {
        fenced(1);
        log.warn({ actor: info, reason: error.message }, 'a stale activation was fenced and stopped');
      } else if (info.attempt !== undefined && info.retryInMs !== undefined) {
        onDutyFailure(error, {
          duty: `${info.kind}.${info.messageType ?? 'message'}`,
          subject: `${info.kind}/${info.key}`,
          attempt: info.attempt,
          retryInMs: info.retryInMs,
        });
      } else {
        onError(error, `actor ${JSON.stringify(info)}`);
      }
    },
    onFenced(kind, key) {
      fenced(1);
      log.warn({ kind, key }, 'an activation was fenced while it started: another node took the actor');
    },
    onHandedOff: (n) => handedOff(n),
  };
}
