import { WHEEL } from '../actors/wheel-partition.js';
import type { ActorSystemApi } from '../runtime/actor.js';
import { settle, type Clock } from '../runtime/clock.js';
import type { BackoffPolicy } from '../domain/model.js';
import type { NodeEventSink } from '../domain/events.js';
import { handOnExpired } from '../actors/worker-lease.js';
import type { Dependents, Placing, ScheduleWakes } from '../actors/ports.js';
import type { ScheduleStore, TaskStore } from '../store/types.js';
import type { DueEntry } from '../domain/model.js';
import { REOFFER_AFTER_MS } from './gated-ready-queue.js';

/**
 * The safety nets under the two mechanisms that hand a task on, run for the partitions this
 * node owns. Each should find nothing; what it finds it hands on and counts, so a count
 * above 0 says which mechanism failed and how often (docs/decisions/0007-supervision-and-
 * safety-nets.md).
 *
 * - Leases: `running` tasks whose lease ran out more than a grace ago — the lease actor's
 *   expiry (or its recovery by a new owner after a node died) should have handed them on.
 *   Each is expired here, with the same compare-and-set the lease uses.
 * - Pending: `pending` tasks overdue by more than a grace that nothing holds — not in a
 *   ready queue, not in flight between take and claim, not waiting on their wheel for a push
 *   retry. The wheel should have fired them. The partition's wheel pushes them (and counts
 *   them, as it pushes).
 * - Schedules: active cron schedules whose wake time passed more than a grace ago — the
 *   wheel's wake (or the actor's own timer) should have moved it on. A node killed between
 *   the wheel's wake and the schedule's write, a wake told to a node that died, a bucket
 *   store that lost it: each is woken again (its actor finds what it owes from the row).
 *
 * Each reads indexes only, a bounded page per pass (the running tasks of the partitions, the
 * oldest pending tasks and wakes of each), and compares with the node's clock, which is
 * aligned on the database's (see `AlignedClock`).
 */
export interface SafetyNetDeps {
  tasks: Pick<TaskStore, 'expiredLeases' | 'expireLease' | 'pendingInPartitions'>;
  schedules: Pick<ScheduleStore, 'wakesInPartitions'>;
  wakes: ScheduleWakes;
  system: ActorSystemApi;
  clock: Clock;
  backoff: BackoffPolicy;
  /** The wheel partitions this node owns now. */
  ownedPartitions(): number[];
  /** How far past its due time (or lease expiry) a task must be before the net takes it, ms. */
  graceMs: number;
  /** A lease the net expired is handed on as an expiry would (see `handOnExpired`). */
  placement: Pick<Placing, 'requeue'>;
  dependents: Pick<Dependents, 'transitions'>;
  /**
   * Whether every one of these entries names a declared limit (its key holds it: see
   * `gatedReadyQueue`). Absent: none does.
   */
  allGated?(entries: readonly DueEntry[]): boolean;
  /** Spreads the partitions' rests (see {@link GATED_REST_MS}). @default Math.random */
  random?: () => number;
  /**
   * `safety-net:recovered`: kind `lease` for each lease the net expired, `schedule` for the
   * schedules it woke (the wheel tells what it pushes for the net).
   */
  events: NodeEventSink;
}

/** What one pass found and handed on. */
export interface SafetyNetPass {
  leases: number;
  pending: number;
  schedules: number;
}

/** Expired leases looked at per pass, in all. */
const LEASE_PAGE = 500;
/**
 * Overdue pending tasks looked at per partition and pass: the oldest. During a herd thousands
 * are overdue and all held (queued for the workers), and the check of each costs a little of
 * the Redis and Postgres the herd needs; a task left behind is found once those older than it
 * have drained.
 */
const PENDING_PAGE = 100;
/**
 * Partitions whose overdue pages one statement reads. On the embedded default's one connection
 * a statement holds every other one, and the node's thread with it: 64 partitions' pages (6 400
 * rows, all overdue and queued during a bulk retry of 100 000 tasks) took 40–120 ms a pass,
 * the largest stalls a probe's submit met then. Sixteen partitions (1 600 rows) still took
 * 20–27 ms a statement, four a pass back to back with a turn between: once the bulk retry's
 * own pages were ~7 ms, those were what its submit p99 met. Four partitions, ~400 rows.
 */
const PENDING_READ_PARTITIONS = 4;
/** Overdue schedule wakes looked at per partition and pass: the oldest. */
const WAKE_PAGE = 100;
/** How long a partition may take to check and push what the net found. */
const RECOVER_ASK_MS = 30_000;

/**
 * How long at most a partition whose whole page of overdue pending tasks was held by limit keys
 * is not read again: as long as the gated queue does not offer those tasks again. Each rest is
 * between half of it and all of it, at random: the partitions of a flood rest together, and
 * read together again they made one 90–150 ms statement and 2 000 re-offers in one pass.
 */
export const GATED_REST_MS = REOFFER_AFTER_MS;

export class SafetyNet {
  /** Partitions resting (see {@link GATED_REST_MS}), with until when. */
  private readonly resting = new Map<number, number>();

  constructor(private readonly deps: SafetyNetDeps) {}

  /**
   * Every partition is read again at the next pass: the ring changed, and an offer made before
   * may have gone to a node that left (the gated queue forgets its offers then too).
   */
  wake(): void {
    this.resting.clear();
  }

  /**
   * One pass over the owned partitions: a statement for leases, one for wakes, and one for
   * pending tasks per {@link PENDING_READ_PARTITIONS} partitions.
   */
  async sweep(): Promise<SafetyNetPass> {
    const partitions = this.deps.ownedPartitions();
    if (partitions.length === 0) return { leases: 0, pending: 0, schedules: 0 };
    // The loop turns between statements: on the embedded default each holds the node's thread,
    // and awaited one after another they ran as one stall (100–160 ms during a bulk retry).
    // Here, not after every PGlite statement: turning there too made the bulk retry's claim
    // lag p99 6.8–8.2× idle instead of 3.2× (two runs), the claims' statements waiting a turn each.
    const leases = await this.expiredLeases(partitions);
    await settle();
    const pending = await this.overduePending(partitions);
    await settle();
    const schedules = await this.overdueWakes(partitions);
    return { leases, pending, schedules };
  }

  private async overdueWakes(partitions: number[]): Promise<number> {
    const { schedules, clock } = this.deps;
    const byPartition = await schedules.wakesInPartitions(partitions, clock.now() - this.deps.graceMs, WAKE_PAGE);
    const overdue = [...byPartition.values()].flat();
    if (overdue.length === 0) return 0;
    this.deps.events.emit('safety-net:recovered', { kind: 'schedule', count: overdue.length });
    this.deps.wakes.wake(overdue);
    return overdue.length;
  }

  private async expiredLeases(partitions: number[]): Promise<number> {
    const { tasks, clock, backoff } = this.deps;
    const now = clock.now();
    let recovered = 0;
    for (const lease of await tasks.expiredLeases(partitions, now - this.deps.graceMs, LEASE_PAGE)) {
      const transition = await tasks.expireLease(lease.taskId, lease.version, now, backoff);
      if (transition === null) continue; // heartbeated or handed on meanwhile
      recovered++;
      this.deps.events.emit('safety-net:recovered', { kind: 'lease', count: 1 });
      handOnExpired(this.deps, transition);
    }
    return recovered;
  }

  /**
   * Each partition that has overdue tasks held by nothing is asked to push them (in parallel).
   *
   * A partition whose oldest page is all gated tasks rests for {@link GATED_REST_MS}: a key
   * that binds (a flood under a concurrency of 50) keeps thousands of them waiting, and they
   * are the oldest page of every partition at every pass. The gated queue offers them to their
   * key at most once in that time, so reading them again every pass found nothing to do: W6's
   * passes read 42 100 such rows in 90 s, and checked each in the ready queue, where they now
   * read 12 200. (What the statement costs in Postgres is mostly something else: the dead
   * index entries of the tasks claimed since a partition was last read, which resting does not
   * remove, only gathers.) Only a full page rests: nothing overdue is behind a short one, and a
   * task lost later is due after the page's own, so it would not have been in the page either.
   */
  private async overduePending(partitions: number[]): Promise<number> {
    const now = this.deps.clock.now();
    const reading = partitions.filter((p) => !((this.resting.get(p) ?? 0) > now));
    let recovered = 0;
    // A few partitions a statement, each lot asked before the next is read (see PENDING_READ_PARTITIONS).
    for (let i = 0; i < reading.length; i += PENDING_READ_PARTITIONS) {
      if (i > 0) await settle();
      recovered += await this.recoverPending(reading.slice(i, i + PENDING_READ_PARTITIONS), now);
    }
    return recovered;
  }

  private async recoverPending(partitions: number[], now: number): Promise<number> {
    const { tasks, system } = this.deps;
    const byPartition = await tasks.pendingInPartitions(partitions, now - this.deps.graceMs, PENDING_PAGE);
    const recovered = await Promise.all(
      [...byPartition].map(async ([partition, entries]) => {
        const n = await system.ref(WHEEL, String(partition)).ask({ type: 'recover', entries }, RECOVER_ASK_MS);
        if (n === 0 && entries.length >= PENDING_PAGE && this.deps.allGated?.(entries))
          this.resting.set(partition, now + GATED_REST_MS * (1 - (this.deps.random ?? Math.random)() / 2));
        else this.resting.delete(partition);
        return n;
      }),
    );
    return recovered.reduce((sum, n) => sum + n, 0);
  }
}
