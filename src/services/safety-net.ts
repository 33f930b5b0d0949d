import { WHEEL } from '../actors/wheel-partition.js';
import type { ActorSystemApi } from '../runtime/actor.js';
import { settle, type Clock } from '../runtime/clock.js';
import type { BackoffPolicy } from '../domain/model.js';
import type { NodeEventSink } from '../domain/events.js';
import { handOnExpired } from '../actors/worker-lease.js';
import type { Dependents, Placing, ScheduleWakes } from '../actors/ports.js';
import type { PartitionCursor, ScheduleStore, TaskStore } from '../store/types.js';
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
 * How long at most a partition whose overdue pending tasks were all held by limit keys, walked
 * page by page to their end, is not read again: as long as the gated queue does not offer those
 * tasks again. Each rest is between half of it and all of it, at random: the partitions of a
 * flood rest together, and read together again they made one 90–150 ms statement and 2 000
 * re-offers in one pass.
 */
export const GATED_REST_MS = REOFFER_AFTER_MS;

export class SafetyNet {
  /** Partitions resting (see {@link GATED_REST_MS}), with until when. */
  private readonly resting = new Map<number, number>();
  /**
   * Partitions walking a backlog of held tasks: where their next page starts, and whether
   * every page so far was all gated.
   */
  private readonly walks = new Map<number, { after: PartitionCursor; gated: boolean }>();

  constructor(private readonly deps: SafetyNetDeps) {}

  /**
   * Every partition is read again at the next pass: the ring changed, and an offer made before
   * may have gone to a node that left (the gated queue forgets its offers then too).
   */
  wake(): void {
    this.resting.clear();
    this.walks.clear();
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
   * A partition whose full page is all held (queued, or gated tasks their keys hold) is read
   * on from the end of that page at the next pass, and so on to the end of its overdue tasks:
   * a key that binds (a flood under a concurrency of 50, a paused type) keeps thousands of
   * them waiting, the oldest page of every partition at every pass, and a task lost behind
   * them — due later, gated or not — was never in the page. Read only from the start, such a
   * task waited as long as the backlog did (issue 28's 3-node test: after a node was killed,
   * every page the net read was the ~1 000 tasks its rate case had left waiting for a rate no
   * worker served any more). Walked, it is found within (tasks ahead of it) ÷
   * {@link PENDING_PAGE} passes.
   *
   * Once a walk of gated tasks has reached the end of the overdue ones, all held, the
   * partition rests for {@link GATED_REST_MS} before it starts again from the oldest: the
   * gated queue does not offer those tasks to their keys again sooner, so reading them again
   * every pass found nothing to do (W6's passes read 42 100 such rows in 90 s). A page where
   * something was recovered starts the next pass from the oldest again.
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
    const after = new Map<number, PartitionCursor>();
    for (const p of partitions) {
      const walk = this.walks.get(p);
      if (walk) after.set(p, walk.after);
    }
    const byPartition = await tasks.pendingInPartitions(partitions, now - this.deps.graceMs, PENDING_PAGE, after);
    // Past the end of a walk: nothing overdue is left after its cursor.
    for (const partition of after.keys()) if (!byPartition.has(partition)) this.walked(partition, true, now);
    const recovered = await Promise.all(
      [...byPartition].map(async ([partition, entries]) => {
        const n = await system.ref(WHEEL, String(partition)).ask({ type: 'recover', entries }, RECOVER_ASK_MS);
        const gated = this.deps.allGated?.(entries) === true;
        const last = entries[entries.length - 1];
        if (n === 0 && entries.length >= PENDING_PAGE && last !== undefined) {
          const walk = this.walks.get(partition);
          this.walks.set(partition, {
            after: { dueMs: last.dueMs, taskId: last.taskId },
            gated: gated && (walk?.gated ?? true),
          });
        } else this.walked(partition, n === 0 && gated, now);
        return n;
      }),
    );
    return recovered.reduce((sum, n) => sum + n, 0);
  }

  /**
   * A partition's walk ended (a short page, or nothing after its cursor) or never started:
   * the next pass reads from the oldest. A walk that found every page held by limit keys, to
   * the end, rests the partition first (see {@link GATED_REST_MS}); a queue of free tasks is
   * read from the oldest at the next pass as before (its tasks drain, and resting would only
   * delay finding a lost one).
   */
  private walked(partition: number, lastPageGated: boolean, now: number): void {
    const walk = this.walks.get(partition);
    this.walks.delete(partition);
    if (walk?.gated === true && lastPageGated) this.rest(partition, now);
    else this.resting.delete(partition);
  }

  /** A walk found everything held to the end: the partition rests, then starts from the oldest. */
  private rest(partition: number, now: number): void {
    this.resting.set(partition, now + GATED_REST_MS * (1 - (this.deps.random ?? Math.random)() / 2));
  }
}
