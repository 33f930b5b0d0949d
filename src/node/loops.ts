import type { FastifyBaseLogger } from 'fastify';
import type { CompiledOptions } from '../lib/config.js';
import type { AlignedClock } from '../runtime/aligned-clock.js';
import { settle, systemClock, type Cancel, type Clock } from '../runtime/clock.js';
import { DEFAULT_DUTY_RETRY, every, type DutyFailure, type DutyFailuresEnded } from '../runtime/supervision.js';
import type { Backend } from '../store/backend.js';
import { vacuumDeadTables } from '../store/sql/vacuum.js';
import type { DagResolver } from '../actors/dag-resolver.js';
import type { Ownership } from './ownership.js';
import type { SafetyNet } from '../services/safety-net.js';
import type { RetentionSweep } from '../services/retention-sweep.js';
import type { StartDeadlines } from '../services/start-deadlines.js';
import type { OperationRunner } from '../services/operation-runner.js';
import { CATALOG_REFRESH_MS, type LimitCatalog } from '../services/limit-catalog.js';
import type { TaskStatsRollup } from '../services/task-stats.js';
import { CHECK_MS as IDLE_COLLECT_MS, IdleCollector } from './idle-collect.js';

/** How often the node refreshes the ready backlog that admission control reads. */
const BACKLOG_REFRESH_MS = 250;
/** How often the node checks that it runs every partition it owns (one whose activation failed or was fenced comes back). */
const PARTITION_CHECK_MS = 1_000;
/** How often entries taken but never settled are put back in their ready queues. */
const REQUEUE_STALE_MS = 5_000;
/**
 * How often the node removes what passed retention (finished tasks, expired idempotency keys),
 * at most: a short retention (tests, small deployments) is swept as often as it lasts, down to
 * a quarter second, so a task leaves within twice its retention. Every 5 s and not every
 * minute: a pass removes what finished during one interval, and a minute of completions
 * removed at once (120 000 rows at 2 000 tasks/s, 720 000 at the design's 12 000/s in a
 * cluster) is a burst of deletes, WAL and dead index entries that the claims of that moment
 * wait behind; a pass costs two short statements when nothing passed (0015-retention.md).
 */
const RETENTION_MAX_MS = 5_000;
const RETENTION_MIN_MS = 250;
/** How often the node ends the tasks of its partitions that passed their start deadline. */
const START_DEADLINES_MS = 1_000;
/** How often the node looks for running operations on many tasks that it owns and does not run. */
const OPERATIONS_CHECK_MS = 1_000;
/** How often outbox events the live path did not clear are delivered again. */
const DAG_REPLAY_MS = 2_000;
/** How often the node measures its clock against the database's. */
const CLOCK_SAMPLE_MS = 5_000;
/** A clock this far off the database's is worth a warning (it is corrected either way). */
const CLOCK_WARN_MS = 1_000;
/** How often the embedded default looks for tables autovacuum would vacuum (it has no autovacuum). */
const EMBEDDED_VACUUM_MS = 30_000;

export interface LoopDeps {
  /** Task time: what the nets and sweeps compare due times, leases and deadlines with. */
  clock: Clock;
  /**
   * The machine's time, which the loops that only re-read something keep their pace on (the
   * backlog, the limit catalog, the running operations): how often a reading is refreshed is
   * not a matter of task time. Under a test's FakeClock, ninety minutes advanced in a few
   * seconds made them run 32 400 times, each a round trip to the stores. @default systemClock
   */
  cadence?: Clock;
  /** Set when the node reads time as the database does: its offset is measured here. */
  aligned: AlignedClock | null;
  options: CompiledOptions;
  backend: Backend;
  resolver: DagResolver;
  ownership: Ownership;
  safetyNet: SafetyNet;
  retention: RetentionSweep;
  startDeadlines: StartDeadlines;
  /** Runs the operations on many tasks this node owns. */
  operationRunner: Pick<OperationRunner, 'check'>;
  /** The node's copy of the limit declarations, read again when they changed. */
  limits: LimitCatalog;
  /** The node's counts of task activity, flushed to `task_stats` every `statsFlushMs`. */
  stats: Pick<TaskStatsRollup, 'flush'>;
  /** False while this node may have been declared out: it then takes nothing over. */
  mayOwn(): boolean;
  /** Actors that left this node's memory since it started: the idle collection's cue. */
  departedActors(): number;
  setBacklog(entries: number): void;
  log: FastifyBaseLogger;
  /** A duty failed: it runs again after `failure.retryInMs`. */
  onDutyFailure(error: unknown, failure: DutyFailure): void;
  /** A duty that had failed succeeded (or was stopped). */
  onDutyEnded(ended: DutyFailuresEnded): void;
}

/**
 * The node's background duties: the nets under the live paths (outbox replay and sweep,
 * the lease, pending and schedule safety nets, owned partitions kept running, stale
 * in-flight entries put back), start deadlines, and the housekeeping (backlog for admission
 * control, retention of finished tasks and expired idempotency keys, the clock's offset, the
 * limit catalog, and on the embedded default VACUUM). Each is supervised (`every`): a failure is reported
 * and the duty comes back after a backoff. Returns their stop functions.
 */
export function startLoops(deps: LoopDeps): Cancel[] {
  const { clock, options, backend, resolver, ownership, log } = deps;
  const loopOn = (on: Clock, duty: string, intervalMs: number, fn: () => Promise<void>): Cancel =>
    every(on, duty, intervalMs, fn, deps.onDutyFailure, DEFAULT_DUTY_RETRY, deps.onDutyEnded);
  const loop = (duty: string, intervalMs: number, fn: () => Promise<void>): Cancel =>
    loopOn(clock, duty, intervalMs, fn);
  const paced = (duty: string, intervalMs: number, fn: () => Promise<void>): Cancel =>
    loopOn(deps.cadence ?? systemClock, duty, intervalMs, fn);
  const loops = [
    loop('dag_replay', DAG_REPLAY_MS, async () => {
      const n = await resolver.replay();
      if (n > 0) log.warn({ count: n }, 'delivered finished predecessors from the outbox');
    }),
    loop('dag_sweep', options.dagSweepMs, async () => {
      const n = await resolver.sweep();
      if (n > 0) log.warn({ count: n }, 'the dependency sweep found blocked tasks that nothing had reached');
    }),
    loop('safety_net', options.safetyNetMs, async () => {
      if (!deps.mayOwn()) return;
      const pass = await deps.safetyNet.sweep();
      if (pass.leases + pass.pending + pass.schedules > 0)
        log.warn(pass, 'the safety net handed on tasks (or woke schedules) their mechanism had left behind');
    }),
    paced('backlog', BACKLOG_REFRESH_MS, async () => {
      deps.setBacklog(await backend.ready.backlog());
    }),
    loop('partitions', PARTITION_CHECK_MS, async () => {
      // A node that may have been declared out (a long pause) takes nothing over until its
      // heartbeat is accepted again; the others may own its partitions by now.
      if (!deps.mayOwn()) return;
      const restarted = await ownership.keepPartitionsActive();
      if (restarted > 0) log.warn({ count: restarted }, 'activated owned wheel partitions that were not running');
    }),
    loop('retention', Math.min(RETENTION_MAX_MS, Math.max(RETENTION_MIN_MS, options.retentionMs)), async () => {
      if (!deps.mayOwn()) return;
      await deps.retention.sweep();
    }),
    loop('start_deadlines', START_DEADLINES_MS, async () => {
      if (!deps.mayOwn()) return;
      await deps.startDeadlines.sweep();
    }),
    paced('operations', OPERATIONS_CHECK_MS, async () => {
      if (!deps.mayOwn()) return;
      await deps.operationRunner.check();
    }),
    paced('limit_catalog', CATALOG_REFRESH_MS, async () => {
      await deps.limits.refresh();
    }),
    // On the machine's time: a flush writes what the events counted, whatever task time says.
    paced('task_stats', options.statsFlushMs, () => deps.stats.flush()),
    loop('requeue_stale', REQUEUE_STALE_MS, async () => {
      const n = await backend.ready.requeueStale(clock.now() - options.inflightTimeoutMs);
      if (n > 0) log.warn({ count: n }, 'put back ready entries taken but never claimed');
    }),
    idleCollection(deps, (duty, fn) => loopOn(systemClock, duty, IDLE_COLLECT_MS, fn)),
  ];
  const db = backend.db;
  if (db.driver === 'pglite')
    loops.push(
      paced('embedded_vacuum', EMBEDDED_VACUUM_MS, async () => {
        const vacuumed = await vacuumDeadTables(db, settle);
        if (vacuumed.length > 0) log.debug({ tables: vacuumed }, 'vacuumed the embedded database');
      }),
    );
  const aligned = deps.aligned;
  if (aligned !== null) {
    let warned = false;
    loops.push(
      loop('clock_sample', CLOCK_SAMPLE_MS, async () => {
        await aligned.sample();
        const off = Math.abs(aligned.ownSkewMs) > CLOCK_WARN_MS;
        if (off && !warned)
          log.warn(
            { offsetMs: aligned.ownSkewMs },
            "this node's clock is off the database's; the node reads time as the database does",
          );
        warned = off;
      }),
    );
  }
  return loops;
}

/** On the machine's time: how quiet the node was is measured by it, whatever task time says. */
function idleCollection(deps: LoopDeps, loop: (duty: string, fn: () => Promise<void>) => Cancel): Cancel {
  const collector = new IdleCollector({ departed: deps.departedActors });
  return loop('idle_collect', async () => {
    const done = await collector.check();
    if (done !== null) deps.log.info(done, 'collected the garbage of actors that left, the node being quiet');
  });
}
