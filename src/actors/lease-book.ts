import type { ActorSystemApi, PassiveActor, PassiveActors } from '../runtime/actor.js';
import type { Cancel, Clock } from '../runtime/clock.js';
import { LEASE } from './worker-lease.js';

/**
 * The passive leases of this node: the lease actors `("lease", task_id)` that have nothing to
 * do yet, kept as one entry each instead of a live actor.
 *
 * Most leases end the way they began — granted at the claim, released by the result a few
 * milliseconds later — without a heartbeat or an expiry in between. As live actors each cost a
 * cell, a mailbox, a timer and their promises (measured: ~20–30 µs of CPU per lease on this
 * machine, most of it garbage collection, against a node that spends ~85 µs on the whole
 * task). So a lease is in memory as an actor only while it has work: a heartbeat to check
 * against its token, or an expiry to write. Until then it is `(version, expiry)` here, and:
 *
 * - `granted` records the entry (or tells the actor, if it is live);
 * - `released` drops the entry (or tells the actor, here or on the ring's owner);
 * - `wake` (a heartbeat arrived) starts the actor from its entry, which then handles the
 *   heartbeat as it always did;
 * - at its expiry, found by one timer per node over 100 ms buckets, the entry wakes its actor,
 *   which writes the expiry with its compare-and-set as before (at most a bucket late).
 *
 * The entries are this node's part of the actor kind, not a second mechanism: the runtime lists
 * and inspects them as the kind's actors (`ActorSystem.registerPassive`), and `holds` counts
 * them, so a ring change does not start a second instance on this node. A node that dies loses
 * its entries with its live actors, and the ring's owner recovers the leases from the task rows
 * the same way for both (`Ownership.recoverLeases`).
 */
export class LeaseBook implements PassiveActors {
  private readonly entries = new Map<string, PassiveLease>();
  /**
   * Bucket end (ms) → the ids whose expiry falls in it. An entry leaves its bucket when it ends
   * (released, woken, forgotten), so what the book holds is bounded by the leases it holds, not by
   * those granted within a lease's length.
   */
  private readonly buckets = new Map<number, Set<string>>();
  private timer: Cancel | null = null;
  private timerAtMs = Infinity;

  constructor(
    private readonly system: Pick<ActorSystemApi, 'tellHere' | 'ref'> & {
      holdsLive(kind: string, key: string): boolean;
    },
    private readonly clock: Clock,
    private readonly bucketMs = LEASE_BUCKET_MS,
  ) {}

  /** How many leases are passive here. */
  get size(): number {
    return this.entries.size;
  }

  /** A task was claimed here at `version`; its lease runs until `leaseExpiresMs`. */
  granted(taskId: string, version: number, leaseExpiresMs: number): void {
    if (this.system.holdsLive(LEASE.name, taskId)) {
      this.system.tellHere(LEASE, taskId, { type: 'granted', version, leaseExpiresMs });
      return;
    }
    const held = this.entries.get(taskId);
    if (held !== undefined) {
      if (held.version > version) return;
      this.unfile(taskId, held);
    }
    const lease = { version, leaseExpiresMs, grantedAtMs: this.clock.now(), bucket: this.bucketOf(leaseExpiresMs) };
    this.entries.set(taskId, lease);
    this.file(taskId, lease.bucket);
  }

  /** The result of the attempt granted at `version` was recorded: the lease is over. */
  released(taskId: string, version: number): void {
    const held = this.entries.get(taskId);
    if (held !== undefined && held.version <= version) {
      this.unfile(taskId, held);
      return;
    }
    this.system.ref(LEASE, taskId).tell({ type: 'released', version });
  }

  /** Starts the actor of a passive lease here (a message for it needs the actor). */
  wake(taskId: string): void {
    const held = this.entries.get(taskId);
    if (held === undefined) return;
    this.unfile(taskId, held);
    if (this.system.holdsLive(LEASE.name, taskId)) return; // started otherwise meanwhile (a recovery)
    this.system.tellHere(LEASE, taskId, {
      type: 'granted',
      version: held.version,
      leaseExpiresMs: held.leaseExpiresMs,
    });
  }

  has(taskId: string): boolean {
    return this.entries.has(taskId);
  }

  keys(): IterableIterator<string> {
    return this.entries.keys();
  }

  /** What the admin endpoint shows of a passive lease; null if none. */
  describe(taskId: string): PassiveActor | null {
    const held = this.entries.get(taskId);
    if (held === undefined) return null;
    return {
      sinceMs: held.grantedAtMs,
      state: { version: held.version, leaseExpiresAt: new Date(held.leaseExpiresMs).toISOString(), passive: true },
    };
  }

  /** Drops one entry: the lease is left to the ring's owner and the safety net. */
  forget(taskId: string): void {
    const held = this.entries.get(taskId);
    if (held !== undefined) this.unfile(taskId, held);
  }

  /** Drops every entry and the timer (the node is shutting down, or was declared out). */
  clear(): void {
    this.timer?.();
    this.timer = null;
    this.timerAtMs = Infinity;
    this.entries.clear();
    this.buckets.clear();
  }

  private arm(atMs: number): void {
    this.timer?.();
    this.timerAtMs = atMs;
    this.timer = this.clock.setTimer(atMs - this.clock.now(), () => this.expire());
  }

  /** Wakes every lease whose expiry has come; re-arms for the earliest bucket left. */
  private expire(): void {
    this.timer = null;
    this.timerAtMs = Infinity;
    const now = this.clock.now();
    let next = Infinity;
    for (const [end, ids] of [...this.buckets]) {
      if (end > now) {
        next = Math.min(next, end);
        continue;
      }
      // Every lease filed here expires by `end`: their time has come.
      for (const id of [...ids]) this.wake(id);
    }
    if (next !== Infinity) this.arm(next);
  }

  private bucketOf(ms: number): number {
    return Math.ceil(ms / this.bucketMs) * this.bucketMs;
  }

  private file(id: string, end: number): void {
    const ids = this.buckets.get(end);
    if (ids === undefined) this.buckets.set(end, new Set([id]));
    else ids.add(id);
    if (end < this.timerAtMs) this.arm(end);
  }

  /** Drops the entry and its place in its bucket. */
  private unfile(id: string, held: PassiveLease): void {
    this.entries.delete(id);
    const ids = this.buckets.get(held.bucket);
    if (ids === undefined) return;
    ids.delete(id);
    if (ids.size === 0) this.buckets.delete(held.bucket);
  }
}

interface PassiveLease {
  version: number;
  leaseExpiresMs: number;
  grantedAtMs: number;
  /** The end of the bucket it is filed under. */
  bucket: number;
}

/** How finely passive leases' expiries are grouped: each wakes at most this late, ms. */
export const LEASE_BUCKET_MS = 100;
