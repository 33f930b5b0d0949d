import type { FastifyBaseLogger } from 'fastify';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { NodeEvents } from '../domain/events.js';
import type { TypedEvents } from '../lib/events.js';
import { Metrics } from '../lib/metrics.js';
import { CRON } from '../actors/cron-schedule.js';
import { DAG } from '../actors/dag-node.js';
import { WHEEL } from '../actors/wheel-partition.js';
import { LEASE } from '../actors/worker-lease.js';
import type { RequestObserver } from '../http/server.js';
import { isWheelhouseError } from '../lib/errors.js';
import type { HttpTransportStats } from '../runtime/http-transport.js';
import type { AlignedClock } from '../runtime/aligned-clock.js';
import type { Cluster } from '../runtime/cluster.js';
import type { ActorDutyEnded, ActorErrorInfo } from '../runtime/host.js';
import type { LivePlacement } from '../runtime/ring.js';
import type { DutyFailure, DutyFailuresEnded } from '../runtime/supervision.js';
import type { ActorSystem } from '../runtime/system.js';
import { droppedTells } from './dropped-tells.js';
import type { DutyLog } from './duty-log.js';
import { tally, taskMetrics, type TaskMetricSources } from './task-metrics.js';
import { limitMetrics } from './limit-metrics.js';

/** What the node's metrics read when `/metrics` is scraped. */
export interface MetricSources extends TaskMetricSources {
  backlog(): number;
  system(): ActorSystem;
  placement(): LivePlacement;
  cluster(): Cluster | null;
  aligned: AlignedClock | null;
  /** Distinct `task_type` label values, the rest counted as `other` (`metricsTaskTypesMax`). */
  maxTaskTypes: number;
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
  /** An HTTP request was answered (see `BuildServerOptions.onAnswered`). */
  onAnswered: RequestObserver;
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
 * Every metric of `/metrics`, on prom-client: counters follow the node's events
 * (`domain/events.ts`), gauges are read at scrape time, the tasks' own metrics are in
 * `task-metrics.ts` and the process's in `lib/metrics.ts`.
 */
export function nodeMetrics(
  events: TypedEvents<NodeEvents>,
  log: FastifyBaseLogger,
  sources: MetricSources,
  reports: MetricReports,
): NodeMetrics {
  const metrics = new Metrics();
  const registers = [metrics.registry];
  const { duties, onError } = reports;
  const counter = <L extends string = never>(name: string, help: string, labelNames: readonly L[] = []) =>
    new Counter<L>({ name, help, labelNames, registers });
  const gauge = (name: string, help: string, collect: (this: Gauge) => void) =>
    new Gauge({ name, help, registers, collect });

  const claimed = counter('wheelhouse_tasks_claimed_total', 'Tasks claimed by workers.');
  const completed = counter('wheelhouse_tasks_completed_total', 'Results recorded, by resulting status.', ['status']);
  const requeued = counter('wheelhouse_tasks_requeued_total', 'Tasks sent back to pending (retry or expired lease).');
  const replayed = counter(
    'wheelhouse_dag_events_replayed_total',
    'Finished predecessors delivered to their dependents from the outbox, after the live path did not.',
  );
  const recovered = counter(
    'wheelhouse_safety_net_recovered_total',
    'Tasks a safety net found left behind by their mechanism and handed on, by kind: lease (expired, never handed on), pending (overdue, held by nothing), blocked (predecessors done, never reconciled), schedule (cron schedules whose wake passed, woken again). Should stay 0.',
    ['kind'],
  );
  const rebuilds = counter(
    'wheelhouse_partition_rebuilds_total',
    'Wheel partitions rebuilt in full from Postgres because the bucket store had lost their data (a flush, a restart, an older snapshot) or never had it (a first start).',
  );
  const retained = counter(
    'wheelhouse_retention_removed_total',
    'Rows retention removed, by kind: task (finished longer than retentionSeconds ago, with its executions), idempotency_key (expired).',
    ['kind'],
  );
  const dutyFailures = counter(
    'wheelhouse_duty_failures_total',
    'Failures of duties (actor timers, node loops, placements), each retried after a backoff, by duty.',
    ['duty'],
  );
  const cron = counter(
    'wheelhouse_cron_fire_times_total',
    'Cron fire times reached, by outcome (fired, skipped for overlap, missed by misfire policy).',
    ['outcome'],
  );
  const fenced = counter(
    'wheelhouse_stale_epoch_total',
    'Writes refused because a newer activation of the actor owns it (the activation stopped).',
  );
  const handedOff = counter(
    'wheelhouse_actors_handed_off_total',
    'Actors stopped here because a ring change moved them to another node.',
  );
  const droppedCount = counter(
    'wheelhouse_messages_dropped_total',
    'Told messages no node accepted before their deadline, by actor kind.',
    ['kind'],
  );
  const dropped = droppedTells(log, (n, labels) => droppedCount.inc(labels, n));

  events.on('task:claimed', (e) => claimed.inc(e.taskIds.length));
  events.on('task:completed', (e) => {
    for (const [status, n] of tally(e.transitions, (t) => t.status)) completed.inc({ status }, n);
  });
  events.on('lease:expired', (e) => {
    if (e.requeued) requeued.inc();
  });
  events.on('dag:replayed', (e) => replayed.inc(e.count));
  events.on('safety-net:recovered', (e) => recovered.inc({ kind: e.kind }, e.count));
  events.on('partition:rebuilt', () => rebuilds.inc());
  events.on('retention:removed', (e) => {
    if (e.tasks > 0) retained.inc({ kind: 'task' }, e.tasks);
    if (e.idempotencyKeys > 0) retained.inc({ kind: 'idempotency_key' }, e.idempotencyKeys);
  });
  events.on('cron:fired', (e) => cron.inc({ outcome: e.outcome }, e.count));

  gauge('wheelhouse_ready_backlog', 'Entries waiting in the ready queues.', function () {
    this.set(sources.backlog());
  });
  new Gauge({
    name: 'wheelhouse_actors_live',
    help: 'Live actors on this node, by kind.',
    labelNames: ['kind'],
    registers,
    collect() {
      const counts = sources.system().countByKind();
      for (const kind of [WHEEL.name, LEASE.name, CRON.name, DAG.name]) this.set({ kind }, counts.get(kind) ?? 0);
      for (const [kind, n] of counts) this.set({ kind }, n);
    },
  });
  gauge('wheelhouse_clock_offset_seconds', "What this node adds to its own clock to read the database's.", function () {
    this.set((sources.aligned?.ownSkewMs ?? 0) / 1000);
  });
  gauge('wheelhouse_cluster_live_nodes', 'Nodes in the ring this node routes by.', function () {
    this.set(sources.placement().ring.nodes().length);
  });
  transportCounters(registers, () => sources.cluster()?.transport.stats() ?? null);
  metrics.onCollect(taskMetrics(metrics.registry, events, sources.maxTaskTypes, sources, onError));
  // Limits are capped as task types are: their keys are as unbounded (`customer:<anything>`).
  metrics.onCollect(limitMetrics(metrics.registry, events, sources.maxTaskTypes, sources.system));
  const onAnswered = requestMetrics(registers);

  const onDutyFailure = (error: unknown, failure: DutyFailure): void => {
    dutyFailures.inc({ duty: failure.duty });
    duties.failed(error, failure);
  };
  return {
    registry: metrics,
    onAnswered,
    onDutyFailure,
    onDutyEnded: (ended) => duties.ended(ended),
    onActorDutyEnded: ({ kind, key, messageType, failures, outcome }) =>
      duties.ended({ duty: `${kind}.${messageType}`, subject: `${kind}/${key}`, failures, outcome }),
    onActorError(error, info) {
      if (dropped(error, info)) return;
      if (isWheelhouseError(error, 'stale_epoch')) {
        fenced.inc();
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
      fenced.inc();
      log.warn({ kind, key }, 'an activation was fenced while it started: another node took the actor');
    },
    onHandedOff: (n) => handedOff.inc(n),
  };
}

/**
 * The node-to-node transport's counts (`HttpTransportStats`) as counters. The transport keeps
 * them; each scrape adds what it counted since the one before.
 */
function transportCounters(registers: Registry[], stats: () => HttpTransportStats | null): void {
  const counters: Record<keyof HttpTransportStats, [name: string, help: string]> = {
    requests: ['wheelhouse_transport_requests_total', 'Node-to-node HTTP requests sent, each a batch of envelopes.'],
    envelopes: ['wheelhouse_transport_envelopes_total', 'Envelopes sent to other nodes, counting each attempt.'],
    retries: ['wheelhouse_transport_retries_total', 'Envelopes routed again after a failed attempt.'],
    failed: [
      'wheelhouse_transport_envelopes_failed_total',
      "Envelopes given up on: their sender's promise was rejected.",
    ],
  };
  for (const [stat, [name, help]] of Object.entries(counters) as [keyof HttpTransportStats, [string, string]][]) {
    let counted = 0;
    new Counter({
      name,
      help,
      registers,
      collect() {
        const now = stats()?.[stat] ?? counted;
        if (now > counted) this.inc(now - counted);
        counted = now;
      },
    });
  }
}

/** HTTP answers take from a millisecond to a long poll's wait (`pollMaxWaitSeconds`, up to 60 s). Seconds. */
const HTTP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * The time to answer HTTP requests, labelled with the route's pattern (`/api/tasks/:task_id`),
 * never the URL, so the series stay as few as the routes.
 */
function requestMetrics(registers: Registry[]): RequestObserver {
  const duration = new Histogram({
    name: 'wheelhouse_http_request_duration_seconds',
    help: 'Time to answer an HTTP request, by method, route pattern (unmatched: no route) and status code.',
    labelNames: ['method', 'route', 'status_code'],
    buckets: HTTP_BUCKETS,
    registers,
  });
  const series = new Map<string, ReturnType<typeof duration.labels>>();
  return (method, route, statusCode, seconds) => {
    const key = `${method} ${statusCode} ${route ?? ''}`;
    let child = series.get(key);
    if (child === undefined)
      series.set(key, (child = duration.labels(method, route ?? 'unmatched', String(statusCode))));
    child.observe(seconds);
  };
}
