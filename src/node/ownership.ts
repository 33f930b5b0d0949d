import { CRON } from '../actors/cron-schedule.js';
import type { CronActivation } from '../actors/cron-activation.js';
import { WHEEL } from '../actors/wheel-partition.js';
import { LEASE } from '../actors/worker-lease.js';
import { isWheelhouseError } from '../lib/errors.js';
import type { Clock } from '../runtime/clock.js';
import type { SnapshotStore } from '../runtime/snapshots.js';
import type { ActorSystem } from '../runtime/system.js';
import type { PartitionCursor, ScheduleStore, TaskStore } from '../store/types.js';

/** Overdue schedule wakes read (and their schedules activated) per page. */
const WAKE_PAGE = 1_000;
/** Partitions whose overdue wakes are read at once: a round of reads, a bounded number of pages in memory. */
const WAKE_PARTITIONS_AT_ONCE = 8;
/** Longest wait for a live previous owner to release a partition before taking it anyway, ms. */
const RELEASE_WAIT_MS = 500;
/** How often the fencing rows are read while waiting for releases, ms. */
const RELEASE_POLL_MS = 20;

export interface OwnershipDeps {
  system: ActorSystem;
  tasks: Pick<TaskStore, 'runningInPartitions'>;
  schedules: Pick<ScheduleStore, 'wakesInPartition'>;
  snapshots: Pick<SnapshotStore, 'owners'>;
  clock: Clock;
  partitions: number;
  /** Whether a node is in the ring this node routes by. */
  isLive(nodeId: string): boolean;
  /** Activates schedules by id, wherever the ring puts them. */
  activation: Pick<CronActivation, 'ids'>;
  /**
   * An activation was fenced while it started: another node (whose ring, a beat ahead or
   * behind, names itself) took the actor meanwhile. Not an error; the periodic check
   * activates it again if the ring still names this node once the views agree.
   */
  onFenced(kind: string, key: string): void;
  onError(error: unknown, context: string): void;
}

/** What one pass of `takeOwnership` did. */
export interface OwnershipPass {
  handedOff: number;
  partitions: number;
  schedules: number;
  leases: number;
}

/**
 * Which actors must run on this node, and making it so. Wheel partitions are always on: each
 * must be active on the node the ring names, so the node activates the ones it owns and does
 * not hold — at start, after every ring change, and periodically (an activation that failed
 * or was fenced comes back within a second). Cron schedules are in memory only around their
 * fire times, woken by the wheel partition of their row; before this node takes partitions
 * on, it wakes the schedules whose wake has passed in the partitions it owns (a misfire to
 * resolve, or a wake told to a node that died). Leases, DAG nodes and everything else
 * activate on their next message; leases are the exception after a ring change, because a
 * lease whose worker has died gets no next message: its new owner re-reads the running tasks
 * and takes over the lease of each.
 */
export class Ownership {
  private readonly partitionKeys: string[];

  constructor(private readonly deps: OwnershipDeps) {
    this.partitionKeys = Array.from({ length: deps.partitions }, (_, p) => String(p));
  }

  /** The partitions the ring puts on this node. */
  ownedPartitions(): number[] {
    const { system } = this.deps;
    return this.partitionKeys.filter((key) => system.ownerOf(WHEEL, key) === system.nodeId).map(Number);
  }

  /**
   * After a ring change (and at start): hands off what moved away, wakes the overdue
   * schedules of the partitions it owns — first, so that a misfire policy applies before the
   * wheel fires an overdue instance — then activates the partitions that moved here, and
   * takes over the leases of running tasks that are now this node's.
   */
  async takeOwnership(): Promise<OwnershipPass> {
    const handedOff = this.deps.system.handOff();
    const schedules = await this.wakeOverdueSchedules();
    const partitions = await this.keepPartitionsActive(true);
    const leases = await this.recoverLeases();
    return { handedOff, partitions, schedules, leases };
  }

  /**
   * Activates the owned partitions this node does not hold. Returns how many it started.
   *
   * `handOver`: after a ring change, a partition whose previous owner is still live (a node
   * joined, or the previous owner is leaving) is taken once that owner has taken its final
   * snapshot and released it — or after `RELEASE_WAIT_MS`, whichever comes first; fencing
   * makes taking it early safe, waiting makes the hand-over clean. A dead owner is not waited
   * for.
   */
  async keepPartitionsActive(handOver = false): Promise<number> {
    const { system } = this.deps;
    const idle = this.ownedPartitions().filter((p) => !system.holds(WHEEL, String(p)));
    if (idle.length === 0) return 0;
    if (handOver) await this.awaitReleases(idle);
    const results = await Promise.allSettled(idle.map((p) => system.ensureActive(WHEEL, String(p))));
    results.forEach((r, i) => {
      if (r.status === 'fulfilled') return;
      if (isWheelhouseError(r.reason, 'stale_epoch')) this.deps.onFenced(WHEEL.name, String(idle[i]));
      else this.deps.onError(r.reason, `activating wheel partition ${idle[i]}`);
    });
    return idle.length;
  }

  /** Waits (bounded) until no live node other than this one holds any of `partitions`. */
  private async awaitReleases(partitions: number[]): Promise<void> {
    const { clock, system } = this.deps;
    const wanted = new Set(partitions.map(String));
    const deadline = clock.now() + RELEASE_WAIT_MS;
    for (;;) {
      const rows = await this.deps.snapshots.owners(WHEEL.name);
      const held = rows.some(
        (r) =>
          wanted.has(r.key) && r.ownerNode !== null && r.ownerNode !== system.nodeId && this.deps.isLive(r.ownerNode),
      );
      if (!held || clock.now() >= deadline) return;
      await new Promise<void>((resolve) => clock.setTimer(RELEASE_POLL_MS, resolve));
    }
  }

  /**
   * Activates, wherever the ring puts them, the active schedules of this node's partitions
   * whose wake time has passed: each handles what it owes (a misfire policy applies) and
   * leaves memory again. Read page by page through the wake index, a few partitions at a
   * time, so that a node that restarts after an outage brings in a few pages of schedules at
   * a time, never all of them, and one with nothing overdue costs a round of short index
   * reads. Returns how many it woke.
   */
  async wakeOverdueSchedules(): Promise<number> {
    const untilMs = this.deps.clock.now();
    const partitions = this.ownedPartitions();
    let woken = 0;
    const next = async (): Promise<void> => {
      for (let p = partitions.shift(); p !== undefined; p = partitions.shift()) {
        woken += await this.wakeOverdueIn(p, untilMs);
      }
    };
    await Promise.all(Array.from({ length: WAKE_PARTITIONS_AT_ONCE }, next));
    return woken;
  }

  private async wakeOverdueIn(partition: number, untilMs: number): Promise<number> {
    let woken = 0;
    for (let after: PartitionCursor | null = null; ;) {
      const page = await this.deps.schedules.wakesInPartition(partition, after, untilMs, WAKE_PAGE);
      const ids = page.map((w) => w.taskId);
      const results = await this.deps.activation.ids(ids);
      results.forEach((r, i) => {
        if (r.status === 'fulfilled') return;
        if (isWheelhouseError(r.reason, 'stale_epoch')) this.deps.onFenced(CRON.name, ids[i]!);
        else this.deps.onError(r.reason, `activating cron schedule ${ids[i]}`);
      });
      woken += page.length;
      const last = page[page.length - 1];
      if (page.length < WAKE_PAGE || last === undefined) return woken;
      after = { dueMs: last.dueMs, taskId: last.taskId };
    }
  }

  /**
   * Starts the lease actor of every running task whose lease the ring now puts here and this
   * node does not hold, from the task row's version and expiry. Returns how many.
   */
  async recoverLeases(): Promise<number> {
    const { system, tasks } = this.deps;
    const all = Array.from({ length: this.deps.partitions }, (_, p) => p);
    let recovered = 0;
    for (const running of await tasks.runningInPartitions(all)) {
      if (system.ownerOf(LEASE, running.taskId) !== system.nodeId || system.holds(LEASE, running.taskId)) continue;
      system.ref(LEASE, running.taskId).tell({
        type: 'granted',
        version: running.version,
        leaseExpiresMs: running.leaseExpiresMs,
      });
      recovered++;
    }
    return recovered;
  }
}
