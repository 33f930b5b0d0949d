import { timingSafeEqual } from 'node:crypto';
import { isWheelhouseError } from '../lib/errors.js';
import type { Cancel, Clock } from '../runtime/clock.js';
import type { ExtendedLease } from '../store/types.js';
import type { WorkersApi } from './types.js';

/**
 * The leases one worker socket holds (pushed to it, or resumed by it), and the one heartbeat
 * that keeps them all alive: its worker's liveness, never past each attempt's deadline, which
 * the store caps (docs/design.md, "Leases and deadlines"). Each lease is refreshed a third of
 * the way through what is left of it; one that runs to its deadline cannot be extended and is
 * refreshed at the deadline, whose refusal tells the worker `lease_lost`. Only the worker moves
 * a deadline (`extend`, from a `progress` frame's `extend_seconds`). The session (worker-session.ts)
 * owns the socket; it hears what to tell the worker through `tell`.
 */

/** A lease as it is given: pushed (an assignment) or resumed. */
export interface LeaseGrant {
  id: string;
  leaseToken: string;
  /** The token's digest when the claim that granted it is at hand (a pushed task); absent for a resumed lease. */
  leaseTokenDigest?: Buffer;
  leaseExpiresMs: number;
  deadlineMs: number;
}

/** A lease a closed session still held, without a result: what a hand-back needs. */
export interface LeftLease {
  taskId: string;
  leaseToken: string;
}

/** A lease held. */
export interface HeldLease {
  token: Buffer;
  /** The token's digest as the claim minted it; undefined for a resumed lease. */
  digest: Buffer | undefined;
  leaseExpiresMs: number;
  /** The attempt's deadline: the lease never runs past it. */
  deadlineMs: number;
  /** When it is extended next: a third of the way through what is left, or at the deadline. */
  refreshAtMs: number;
  /** A third of the lease as it was granted: how far apart refreshes of a lease that runs to its deadline are. */
  spacingMs: number;
  cancelSent: boolean;
}

/** A deadline extension the worker asked for (`extend_seconds` of a `progress` update). */
interface Extension {
  taskId: string;
  leaseToken: string;
  extendSeconds: number;
}

/** What the leases tell their worker: frames of the session's. */
export type LeaseNews =
  | { type: 'cancel'; taskIds: string[] }
  | { type: 'lease_lost'; taskIds: string[] }
  | { type: 'extended'; tasks: { taskId: string; deadlineMs: number }[] };

export interface HeldLeasesDeps {
  workers: Pick<WorkersApi, 'heartbeat'>;
  clock: Clock;
  /** Whose leases, for logs. */
  workerId: string;
  /** Tells the worker (the session writes the frame). */
  tell(news: LeaseNews): void;
  /** A lease went (lost, or settled): the session may close a draining socket. */
  changed(): void;
  onError(error: unknown, context: string): void;
}

/** Lease refreshes never come closer together than this, ms. */
const MIN_REFRESH_MS = 50;
/** A refresh that failed for a reason other than a lost lease is tried again this soon at most, ms. */
const RETRY_REFRESH_MS = 1_000;

export class HeldLeases {
  private readonly held = new Map<string, HeldLease>();
  private timer: Cancel | null = null;
  private refreshing = false;
  private stopped = false;
  /** Extensions the store could not take, to be asked again (cancelled by `stop`). */
  private readonly extensionRetries = new Set<Cancel>();

  constructor(private readonly deps: HeldLeasesDeps) {}

  get size(): number {
    return this.held.size;
  }

  has(taskId: string): boolean {
    return this.held.has(taskId);
  }

  /** Whether a lease of `taskId` is held with this token (compared in constant time). */
  heldWith(taskId: string, leaseToken: string): boolean {
    const lease = this.held.get(taskId);
    return lease !== undefined && sameToken(lease.token, leaseToken);
  }

  /** Keeps leases alive from now on, up to their deadlines; the refresh timer is armed once for all. */
  hold(leases: readonly LeaseGrant[]): void {
    const now = this.deps.clock.now();
    for (const grant of leases) {
      const lease: HeldLease = {
        token: Buffer.from(grant.leaseToken),
        digest: grant.leaseTokenDigest,
        leaseExpiresMs: grant.leaseExpiresMs,
        deadlineMs: grant.deadlineMs,
        refreshAtMs: 0,
        spacingMs: Math.max(MIN_REFRESH_MS, (grant.leaseExpiresMs - now) / 3),
        cancelSent: false,
      };
      lease.refreshAtMs = refreshAt(lease, now);
      this.held.set(grant.id, lease);
    }
    this.arm();
  }

  /** Stops keeping a lease: its result is on its way, or another socket of the worker resumed it. Answers it. */
  release(taskId: string): HeldLease | undefined {
    const lease = this.held.get(taskId);
    this.held.delete(taskId);
    return lease;
  }

  /** Keeps again leases `release` gave up (their results could not be recorded). */
  restore(leases: ReadonlyMap<string, HeldLease>): void {
    if (this.stopped) return;
    for (const [taskId, lease] of leases) this.held.set(taskId, lease);
    this.arm();
  }

  /** Of these, the held leases whose cancel the worker was not told yet, now marked told. */
  freshCancels(taskIds: readonly string[]): string[] {
    const fresh: string[] = [];
    for (const id of taskIds) {
      const lease = this.held.get(id);
      if (lease === undefined || lease.cancelSent) continue;
      lease.cancelSent = true;
      fresh.push(id);
    }
    return fresh;
  }

  /** No more refreshes: answers the leases still held, and holds none. */
  stop(): LeftLease[] {
    this.stopped = true;
    this.timer?.();
    this.timer = null;
    for (const cancel of this.extensionRetries) cancel();
    this.extensionRetries.clear();
    const left = [...this.held].map(([taskId, lease]) => ({ taskId, leaseToken: lease.token.toString() }));
    this.held.clear();
    return left;
  }

  /**
   * Deadline extensions the worker asked for (`extend_seconds`), each a heartbeat that says so:
   * the deadlines granted are told in one `extended`, leases that ended meanwhile as `lease_lost`;
   * one the store could not take is asked again, within a third of the time left to its deadline.
   */
  async extend(extensions: readonly Extension[]): Promise<void> {
    const answers = await Promise.all(
      extensions.map((u) =>
        this.deps.workers.heartbeat(u.taskId, u.leaseToken, u.extendSeconds).then(
          (extended) => ({ u, extended, error: null }),
          (error: unknown) => ({ u, extended: null, error }),
        ),
      ),
    );
    const granted: { taskId: string; deadlineMs: number }[] = [];
    const lost: string[] = [];
    const again: Extension[] = [];
    for (const { u, extended, error } of answers) {
      const lease = this.held.get(u.taskId);
      if (lease === undefined) continue; // settled meanwhile
      if (extended !== null) {
        this.update(lease, extended);
        granted.push({ taskId: u.taskId, deadlineMs: extended.deadlineMs });
      } else if (isWheelhouseError(error, 'lease_not_held')) {
        this.held.delete(u.taskId);
        lost.push(u.taskId);
      } else {
        this.deps.onError(error, `extending the deadline of task ${u.taskId} for worker ${this.deps.workerId}`);
        again.push(u);
      }
    }
    if (granted.length > 0) this.deps.tell({ type: 'extended', tasks: granted });
    if (lost.length > 0) this.deps.tell({ type: 'lease_lost', taskIds: lost });
    // Not recorded (the store out): asked again shortly, while the lease is held. The worker
    // waits for an answer to each extension, and without one its handler would be cut off at
    // the deadline it asked to move.
    if (again.length > 0) this.extendLater(again);
    this.arm();
    this.deps.changed();
  }

  private extendLater(extensions: readonly Extension[]): void {
    if (this.stopped) return;
    // Soon enough to land before the deadline it would move: a third of what is left of the earliest.
    const now = this.deps.clock.now();
    let waitMs = RETRY_REFRESH_MS;
    for (const u of extensions) {
      const lease = this.held.get(u.taskId);
      if (lease !== undefined) waitMs = Math.min(waitMs, Math.max(MIN_REFRESH_MS, (lease.deadlineMs - now) / 3));
    }
    const cancel = this.deps.clock.setTimer(waitMs, () => {
      this.extensionRetries.delete(cancel);
      if (this.stopped) return;
      // Past its deadline the attempt is over: an extension would only be refused.
      const at = this.deps.clock.now();
      const still = extensions.filter(
        (u) => this.heldWith(u.taskId, u.leaseToken) && (this.held.get(u.taskId) as HeldLease).deadlineMs > at,
      );
      if (still.length === 0) return;
      this.extend(still).catch((error: unknown) =>
        this.deps.onError(error, `extending deadlines for worker ${this.deps.workerId}`),
      );
    });
    this.extensionRetries.add(cancel);
  }

  /** Arms the refresh timer for the earliest lease due. */
  arm(): void {
    if (this.stopped || this.refreshing) return;
    this.timer?.();
    this.timer = null;
    let earliest = Infinity;
    for (const lease of this.held.values()) if (lease.refreshAtMs < earliest) earliest = lease.refreshAtMs;
    if (earliest === Infinity) return;
    this.timer = this.deps.clock.setTimer(Math.max(0, earliest - this.deps.clock.now()), () => {
      this.refresh().catch((error: unknown) =>
        this.deps.onError(error, `the lease heartbeat of worker ${this.deps.workerId}`),
      );
    });
  }

  /**
   * The one heartbeat of the worker: every lease due is extended (concurrent heartbeats of the
   * node share statements). A refused one is told as `lease_lost`, one whose cancel was
   * requested as `cancel`.
   */
  private async refresh(): Promise<void> {
    this.timer = null;
    if (this.stopped || this.refreshing) return;
    this.refreshing = true;
    try {
      const now = this.deps.clock.now();
      const due = [...this.held].filter(([, lease]) => lease.refreshAtMs <= now + MIN_REFRESH_MS);
      const answers = await Promise.all(
        due.map(([taskId, lease]) =>
          this.deps.workers.heartbeat(taskId, lease.token.toString()).then(
            (extended) => ({ taskId, lease, extended, error: null }),
            (error: unknown) => ({ taskId, lease, extended: null, error }),
          ),
        ),
      );
      const lost: string[] = [];
      const cancel: string[] = [];
      const after = this.deps.clock.now();
      for (const { taskId, lease, extended, error } of answers) {
        if (this.held.get(taskId) !== lease) continue; // settled or resumed elsewhere meanwhile
        if (extended !== null) {
          this.update(lease, extended);
          if (extended.cancelRequested && !lease.cancelSent) {
            lease.cancelSent = true;
            cancel.push(taskId);
          }
        } else if (isWheelhouseError(error, 'lease_not_held')) {
          this.held.delete(taskId);
          lost.push(taskId);
        } else {
          this.deps.onError(error, `extending the lease of task ${taskId} for worker ${this.deps.workerId}`);
          lease.refreshAtMs =
            after + Math.min(RETRY_REFRESH_MS, Math.max(MIN_REFRESH_MS, (lease.leaseExpiresMs - after) / 3));
        }
      }
      if (cancel.length > 0) this.deps.tell({ type: 'cancel', taskIds: cancel });
      if (lost.length > 0) this.deps.tell({ type: 'lease_lost', taskIds: lost });
    } finally {
      this.refreshing = false;
    }
    this.arm();
    this.deps.changed();
  }

  private update(lease: HeldLease, extended: Pick<ExtendedLease, 'leaseExpiresMs' | 'deadlineMs'>): void {
    lease.leaseExpiresMs = extended.leaseExpiresMs;
    lease.deadlineMs = extended.deadlineMs;
    lease.refreshAtMs = refreshAt(lease, this.deps.clock.now());
  }
}

/**
 * When to extend a lease next: a third of the way through what is left of it. A lease that
 * already runs to its deadline cannot be extended; it is still refreshed every third of the
 * lease as first granted (the refresh is how a dropped `cancel` push still reaches the worker),
 * and once more at the deadline itself, whose refusal tells the worker `lease_lost` — not every
 * third of what is left, which would crowd refreshes ever closer before the deadline.
 */
function refreshAt(lease: HeldLease, now: number): number {
  if (lease.leaseExpiresMs < lease.deadlineMs) return now + Math.max(MIN_REFRESH_MS, (lease.leaseExpiresMs - now) / 3);
  return Math.max(now + MIN_REFRESH_MS, Math.min(now + lease.spacingMs, lease.deadlineMs));
}

function sameToken(held: Buffer, presented: string): boolean {
  const bytes = Buffer.from(presented);
  return bytes.length === held.length && timingSafeEqual(bytes, held);
}
