import type { FastifyBaseLogger } from 'fastify';
import { WHEEL_KIND, type WheelMessage } from './actors/wheel-partition.js';
import type { CompiledOptions } from './config.js';
import type { Cancel, Clock } from './runtime/clock.js';
import type { ActorSystem } from './runtime/system.js';
import type { Backend } from './store/backend.js';
import type { DagResolver } from './tasks/dag-resolver.js';
import type { Ownership } from './tasks/ownership.js';

/** How often the node refreshes the ready backlog that admission control reads. */
const BACKLOG_REFRESH_MS = 250;
/**
 * How often the node checks that it runs every partition it owns (one whose activation failed
 * or was fenced comes back) and that the bucket store has not lost them (Redis flushed).
 */
const LOSS_CHECK_MS = 1_000;
/** How often entries taken but never settled are put back in their ready queues. */
const REQUEUE_STALE_MS = 5_000;
/** How often expired idempotency keys are deleted, and how many at most each time. */
const PURGE_KEYS_MS = 60_000;
const PURGE_KEYS_BATCH = 10_000;
/** How often the node looks for active schedules it owns without a live actor. */
const SCHEDULE_CHECK_MS = 30_000;
/** How often outbox events the live path did not clear are delivered again. */
const DAG_REPLAY_MS = 2_000;
/** How long a partition may take to rebuild from the task table. */
const REBUILD_ASK_MS = 60_000;

export interface LoopDeps {
  clock: Clock;
  options: CompiledOptions;
  backend: Backend;
  resolver: DagResolver;
  ownership: Ownership;
  system: ActorSystem;
  /** False while this node may have been declared out: it then takes nothing over. */
  mayOwn(): boolean;
  setBacklog(entries: number): void;
  log: FastifyBaseLogger;
  onError(error: unknown, context: string): void;
}

/**
 * The node's background loops: the nets under the live paths (outbox replay and sweep, owned
 * partitions and schedules kept running, lost buckets rebuilt, stale in-flight entries put
 * back) and the housekeeping (backlog for admission control, expired idempotency keys).
 * Returns their stop functions.
 */
export function startLoops(deps: LoopDeps): Cancel[] {
  const { clock, options, backend, resolver, ownership, system, log, onError } = deps;
  const loop = (intervalMs: number, fn: () => Promise<void>): Cancel => every(clock, intervalMs, fn, onError);
  return [
    loop(DAG_REPLAY_MS, async () => {
      const n = await resolver.replay();
      if (n > 0) log.warn({ count: n }, 'delivered finished predecessors from the outbox');
    }),
    loop(options.dagSweepMs, async () => {
      const n = await resolver.sweep();
      if (n > 0) log.warn({ count: n }, 'the dependency sweep found blocked tasks that nothing had reached');
    }),
    loop(BACKLOG_REFRESH_MS, async () => {
      deps.setBacklog(await backend.ready.backlog());
    }),
    loop(LOSS_CHECK_MS, async () => {
      // A node that may have been declared out (a long pause) takes nothing over until its
      // heartbeat is accepted again; the others may own its partitions by now.
      if (!deps.mayOwn()) return;
      const restarted = await ownership.keepPartitionsActive();
      if (restarted > 0) log.warn({ count: restarted }, 'activated owned wheel partitions that were not running');
      const lost = await backend.buckets.lostPartitions(ownership.ownedPartitions());
      for (const p of lost) {
        log.warn({ partition: p }, 'bucket store lost this partition; rebuilding it from the task table');
        void system
          .ref<WheelMessage>(WHEEL_KIND, String(p))
          .ask({ type: 'rebuild' }, REBUILD_ASK_MS)
          .catch((error: unknown) => onError(error, `rebuild of partition ${p}`));
      }
    }),
    loop(SCHEDULE_CHECK_MS, async () => {
      if (!deps.mayOwn()) return;
      const n = await ownership.keepSchedulesActive();
      if (n > 0) log.warn({ count: n }, 'activated schedules that had no live actor');
    }),
    loop(PURGE_KEYS_MS, async () => {
      await backend.tasks.purgeExpiredIdempotencyKeys(clock.now(), PURGE_KEYS_BATCH);
    }),
    loop(REQUEUE_STALE_MS, async () => {
      const n = await backend.ready.requeueStale(clock.now() - options.inflightTimeoutMs);
      if (n > 0) log.warn({ count: n }, 'put back ready entries taken but never claimed');
    }),
  ];
}

/** Runs `fn` every `intervalMs` on `clock`, never two at once. Returns a stop function. */
function every(clock: Clock, intervalMs: number, fn: () => Promise<void>, onError: (e: unknown, c: string) => void): Cancel {
  let stopped = false;
  let cancel: Cancel = () => undefined;
  const run = (): void => {
    if (stopped) return;
    fn()
      .catch((error: unknown) => onError(error, 'background loop'))
      .finally(() => {
        if (!stopped) cancel = clock.setTimer(intervalMs, run);
      });
  };
  cancel = clock.setTimer(intervalMs, run);
  return () => {
    stopped = true;
    cancel();
  };
}
