import { timingSafeEqual } from 'node:crypto';
import type { WorkerPush } from '../actors/worker.js';
import { WheelhouseError, isWheelhouseError, type ErrorCode } from '../lib/errors.js';
import type { Cancel, Clock } from '../runtime/clock.js';
import type { Assignment, ChannelProgress, CompletionRequest, ProgressRequest, WorkersApi } from './types.js';

/**
 * One worker's socket on this node, as the services see it: the credits it granted, the leases
 * it holds (pushed to it, or resumed), and the one heartbeat that keeps them all alive. The
 * channel (worker-channel.ts) claims for it; the HTTP face turns its frames into calls here and
 * its `NodeFrame`s into JSON.
 *
 * An open socket keeps its leases alive — its worker's liveness — but never past each
 * attempt's deadline: the store caps every extension there (docs/design.md, "Leases and
 * deadlines"). Only the worker moves a deadline, with `extend_seconds` in a `progress` frame.
 * At the deadline this session's refresh is refused and the worker is told `lease_lost`.
 */

/** What the node sends a worker (camel-cased; the HTTP face writes the wire names). */
export type NodeFrame =
  | { type: 'welcome'; nodeId: string; heartbeatMs: number; resumed: string[] }
  | { type: 'tasks'; tasks: Assignment[] }
  | { type: 'acks'; acks: ChannelAck[] }
  | { type: 'cancel'; taskIds: string[] }
  | { type: 'lease_lost'; taskIds: string[] }
  /** Deadlines moved at the worker's request (`extend_seconds`). */
  | { type: 'extended'; tasks: { taskId: string; deadlineMs: number }[] }
  | { type: 'error'; code: ErrorCode; message: string };

export interface ChannelAck {
  taskId: string;
  ok: boolean;
  /**
   * Why not: the lease is not held, or the results could not be recorded — that error as it
   * was raised, whose message may name hosts and ports: the HTTP face tells the worker what it
   * tells an HTTP client of it.
   */
  error?: { code: 'lease_lost'; message: string } | WheelhouseError;
}

/** The socket under a session: the HTTP face implements it over a WebSocket. */
export interface ChannelSocket {
  /**
   * Open, as the socket itself says: false from the moment either side started to close it
   * (a worker's close frame read, a close sent), before the session hears it closed.
   */
  readonly open: boolean;
  /** More is waiting to be written to it than the node lets wait: claim nothing more for it until it reads. */
  readonly backlogged: boolean;
  /**
   * Writes a frame; false when it could not (the socket is not open). `unsent` is called
   * should a frame written here never reach the wire (the connection broke first).
   */
  send(frame: NodeFrame, unsent?: () => void): boolean;
  /** Closes with a WebSocket close code; the session hears of it through `closed()`. */
  close(code: number, reason: string): void;
}

/** A lease a closed session still held, without a result: what a hand-back needs. */
export interface LeftLease {
  taskId: string;
  leaseToken: string;
}

/** A lease a session holds. */
interface HeldLease {
  token: Buffer;
  leaseExpiresMs: number;
  /** The attempt's deadline: the lease never runs past it. */
  deadlineMs: number;
  /** When the channel extends it next: a third of the way through what is left, or at the deadline. */
  refreshAtMs: number;
  /** A third of the lease as it was granted: how far apart refreshes of a lease that runs to its deadline are. */
  spacingMs: number;
  cancelSent: boolean;
}

export type SessionState = 'open' | 'draining' | 'closed';

/** WebSocket close codes the node uses. */
export const CLOSE = {
  normal: 1000,
  goingAway: 1001,
  policy: 1008,
  tooBig: 1009,
  internal: 1011,
  tryAgainLater: 1013,
  /** A newer socket of the same worker took this one's place. */
  replaced: 4001,
} as const;

/** A lease as the session is given it: pushed (an assignment) or resumed. */
export interface LeaseGrant {
  id: string;
  leaseToken: string;
  leaseExpiresMs: number;
  deadlineMs: number;
}

export interface SessionDeps {
  workers: Pick<WorkersApi, 'heartbeat' | 'complete' | 'progress'>;
  clock: Clock;
  onError(error: unknown, context: string): void;
}

/** Lease refreshes never come closer together than this, ms. */
const MIN_REFRESH_MS = 50;
/** A refresh that failed for a reason other than a lost lease is tried again this soon at most, ms. */
const RETRY_REFRESH_MS = 1_000;

export class WorkerSession {
  state: SessionState = 'open';
  /** Tasks the worker may still be sent. */
  credits = 0;
  /** A claim for this session is in flight. */
  claiming = false;
  /** Something may be ready for it: a push of its types, new credit, a recheck. */
  wanting = true;
  /** Claims in a row that found nothing: its periodic recheck backs off with them. */
  emptyClaims = 0;
  /** When the periodic recheck may next look for it (pushes and credit do at once). */
  recheckAtMs = 0;
  readonly taskTypes: ReadonlySet<string>;
  /** Its task types, sorted, as one string: sessions with the same key are claimed for together. */
  readonly taskTypesKey: string;
  private readonly held = new Map<string, HeldLease>();
  private refreshTimer: Cancel | null = null;
  private refreshing = false;

  constructor(
    readonly id: string,
    readonly workerId: string,
    /** The API key that opened its socket (null while the node asks for none): its worker id is bound to it. */
    readonly keyId: string | null,
    taskTypes: readonly string[],
    readonly socket: ChannelSocket,
    private readonly deps: SessionDeps,
  ) {
    this.taskTypes = new Set(taskTypes);
    this.taskTypesKey = [...this.taskTypes].sort().join('\n');
  }

  get heldCount(): number {
    return this.held.size;
  }

  /**
   * Ready to be claimed for: open (its socket too, and reading what it is sent), with credit,
   * no claim in flight, something may be ready.
   */
  get claimable(): boolean {
    return (
      this.state === 'open' &&
      this.socket.open &&
      !this.socket.backlogged &&
      this.credits > 0 &&
      !this.claiming &&
      this.wanting
    );
  }

  /**
   * Pushes claimed tasks and holds their leases; false, holding nothing, when the frame could
   * not be written (the caller hands them back). `unsent`: the frame was written but never
   * reached the wire.
   */
  deliver(tasks: readonly Assignment[], unsent: () => void): boolean {
    if (this.state !== 'open' || !this.send({ type: 'tasks', tasks: [...tasks] }, unsent)) return false;
    this.holdAll(tasks);
    return true;
  }

  /** Keeps a lease (pushed or resumed) alive from now on, up to its deadline. */
  hold(lease: LeaseGrant): void {
    this.keep(lease);
    this.armRefresh();
  }

  /** `hold` for a batch of pushed tasks: the refresh timer is armed once, not once per task. */
  holdAll(leases: readonly LeaseGrant[]): void {
    for (const lease of leases) this.keep(lease);
    this.armRefresh();
  }

  /** Stops keeping a lease (another socket of the worker resumed it). */
  drop(taskId: string): boolean {
    return this.held.delete(taskId);
  }

  holds(taskId: string): boolean {
    return this.held.has(taskId);
  }

  /** Writes a frame; false when it could not be (the socket closed or closing). */
  send(frame: NodeFrame, unsent?: () => void): boolean {
    if (this.state === 'closed') return false;
    try {
      return this.socket.send(frame, unsent);
    } catch (error) {
      this.deps.onError(error, `sending a ${frame.type} frame to worker ${this.workerId}`);
      return false;
    }
  }

  close(code: number, reason: string): void {
    if (this.state === 'closed') return;
    try {
      this.socket.close(code, reason);
    } catch (error) {
      this.deps.onError(error, `closing the socket of worker ${this.workerId}`);
    }
  }

  /**
   * The socket closed: nothing more is sent or kept alive. Answers the leases it held without
   * a result, for the channel to hand back or to leave to run out (or to be resumed).
   */
  closed(): LeftLease[] {
    this.state = 'closed';
    this.refreshTimer?.();
    this.refreshTimer = null;
    const left = [...this.held].map(([taskId, lease]) => ({ taskId, leaseToken: lease.token.toString() }));
    this.held.clear();
    return left;
  }

  /** `goodbye`: no more tasks; the socket closes once every lease is settled. */
  goodbye(): void {
    if (this.state !== 'open') return;
    this.state = 'draining';
    this.closeIfDrained();
  }

  closeIfDrained(): void {
    if (this.state === 'draining' && this.held.size === 0 && !this.claiming)
      this.close(CLOSE.normal, 'goodbye: every lease settled');
  }

  /** A push from the cluster (through the worker's actor): only for leases this socket holds. */
  push(push: WorkerPush): void {
    const taskIds = push.taskIds.filter((id) => this.held.has(id));
    if (taskIds.length === 0) return;
    if (push.type === 'cancel') {
      const fresh = taskIds.filter((id) => !this.held.get(id)!.cancelSent);
      for (const id of fresh) this.held.get(id)!.cancelSent = true;
      if (fresh.length > 0) this.send({ type: 'cancel', taskIds: fresh });
    } else {
      for (const id of taskIds) this.held.delete(id);
      this.send({ type: 'lease_lost', taskIds });
      this.closeIfDrained();
    }
  }

  /**
   * `results`: each must name a lease pushed to (or resumed by) this socket, with its token;
   * the others are refused without reaching the store. Answers one `acks` frame, in order.
   */
  async results(results: readonly CompletionRequest[]): Promise<void> {
    const acks: ChannelAck[] = [];
    const sent = new Map<string, CompletionRequest>();
    const taken = new Map<string, HeldLease>();
    for (const r of results) {
      const lease = this.held.get(r.taskId);
      if (lease === undefined || sent.has(r.taskId) || !sameToken(lease.token, r.leaseToken)) continue;
      sent.set(r.taskId, r);
      taken.set(r.taskId, lease);
      this.held.delete(r.taskId); // no heartbeat for a lease whose result is on its way
    }
    let outcome = new Map<string, boolean>();
    let failure: WheelhouseError | null = null;
    if (sent.size > 0) {
      try {
        const answers = await this.deps.workers.complete([...sent.values()]);
        outcome = new Map(answers.map((a) => [a.taskId, a.ok]));
      } catch (error) {
        // Not recorded (the store is out, say): the leases are kept, and the worker may send again.
        failure = isWheelhouseError(error)
          ? error
          : new WheelhouseError('internal', 'the results could not be recorded; send them again', { cause: error });
        if (!isWheelhouseError(error)) this.deps.onError(error, `recording results of worker ${this.workerId}`);
        for (const [taskId, lease] of taken) if (this.state !== 'closed') this.held.set(taskId, lease);
      }
    }
    for (const r of results) {
      if (sent.get(r.taskId) !== r) {
        acks.push({ taskId: r.taskId, ok: false, error: { code: 'lease_lost', message: notHeld(r.taskId) } });
      } else if (failure !== null) {
        acks.push({ taskId: r.taskId, ok: false, error: failure });
      } else if (outcome.get(r.taskId) === true) {
        acks.push({ taskId: r.taskId, ok: true });
      } else {
        acks.push({
          taskId: r.taskId,
          ok: false,
          error: { code: 'lease_lost', message: 'the lease is no longer held: the result was discarded' },
        });
      }
    }
    this.send({ type: 'acks', acks });
    this.armRefresh();
    this.closeIfDrained();
  }

  /**
   * `progress`: the latest progress of leases this socket holds, recorded in one batch. An
   * update for a lease it does not hold, or with another token, is dropped (the frame has no
   * answer; a lost lease is told by `lease_lost`). A store that cannot take it is logged: the
   * next update carries the latest value again. An update with `extendSeconds` asks for the
   * attempt's deadline to be pushed later: each is a heartbeat that says so, answered with one
   * `extended` frame (the deadlines granted), or `lease_lost` for a lease that ended meanwhile.
   */
  async progress(updates: readonly ChannelProgress[]): Promise<void> {
    const held = updates.filter((u) => {
      const lease = this.held.get(u.taskId);
      return lease !== undefined && sameToken(lease.token, u.leaseToken);
    });
    if (held.length === 0) return;
    const values: ProgressRequest[] = [];
    for (const u of held) {
      if (u.progress !== undefined) values.push({ taskId: u.taskId, leaseToken: u.leaseToken, progress: u.progress });
    }
    const extensions = held.filter((u) => u.extendSeconds !== undefined);
    await Promise.all([
      values.length === 0
        ? undefined
        : this.deps.workers
            .progress(values)
            .catch((error: unknown) => this.deps.onError(error, `recording progress of worker ${this.workerId}`)),
      extensions.length === 0 ? undefined : this.extend(extensions),
    ]);
  }

  /** Heartbeats that push deadlines later (see `progress`). */
  private async extend(extensions: readonly ChannelProgress[]): Promise<void> {
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
        this.deps.onError(error, `extending the deadline of task ${u.taskId} for worker ${this.workerId}`);
      }
    }
    if (granted.length > 0) this.send({ type: 'extended', tasks: granted });
    if (lost.length > 0) this.send({ type: 'lease_lost', taskIds: lost });
    this.armRefresh();
    this.closeIfDrained();
  }

  /**
   * The one heartbeat of the worker: every lease a third of the way through what is left of it
   * is extended (concurrent heartbeats of the node share statements). A refused one is pushed
   * as `lease_lost`, one whose cancel was requested as `cancel`.
   */
  private async refresh(): Promise<void> {
    this.refreshTimer = null;
    if (this.state === 'closed' || this.refreshing) return;
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
          this.deps.onError(error, `extending the lease of task ${taskId} for worker ${this.workerId}`);
          lease.refreshAtMs =
            after + Math.min(RETRY_REFRESH_MS, Math.max(MIN_REFRESH_MS, (lease.leaseExpiresMs - after) / 3));
        }
      }
      if (cancel.length > 0) this.send({ type: 'cancel', taskIds: cancel });
      if (lost.length > 0) this.send({ type: 'lease_lost', taskIds: lost });
    } finally {
      this.refreshing = false;
    }
    this.armRefresh();
    this.closeIfDrained();
  }

  /** Arms the refresh timer for the earliest lease due. */
  private armRefresh(): void {
    if (this.state === 'closed' || this.refreshing) return;
    this.refreshTimer?.();
    this.refreshTimer = null;
    let earliest = Infinity;
    for (const lease of this.held.values()) if (lease.refreshAtMs < earliest) earliest = lease.refreshAtMs;
    if (earliest === Infinity) return;
    this.refreshTimer = this.deps.clock.setTimer(Math.max(0, earliest - this.deps.clock.now()), () => {
      this.refresh().catch((error: unknown) =>
        this.deps.onError(error, `the lease heartbeat of worker ${this.workerId}`),
      );
    });
  }

  private keep(lease: LeaseGrant): void {
    const spacingMs = Math.max(MIN_REFRESH_MS, (lease.leaseExpiresMs - this.deps.clock.now()) / 3);
    const held: HeldLease = {
      token: Buffer.from(lease.leaseToken),
      leaseExpiresMs: lease.leaseExpiresMs,
      deadlineMs: lease.deadlineMs,
      refreshAtMs: 0,
      spacingMs,
      cancelSent: false,
    };
    held.refreshAtMs = this.refreshAt(held);
    this.held.set(lease.id, held);
  }

  private update(lease: HeldLease, extended: { leaseExpiresMs: number; deadlineMs: number }): void {
    lease.leaseExpiresMs = extended.leaseExpiresMs;
    lease.deadlineMs = extended.deadlineMs;
    lease.refreshAtMs = this.refreshAt(lease);
  }

  /**
   * When to extend a lease next: a third of the way through what is left of it. A lease that
   * already runs to its deadline cannot be extended; it is still refreshed every third of the
   * lease as first granted (the refresh is how a dropped `cancel` push still reaches the worker),
   * and once more at the deadline itself, whose refusal tells the worker `lease_lost` — not
   * every third of what is left, which would crowd refreshes ever closer before the deadline.
   */
  private refreshAt(lease: HeldLease): number {
    const now = this.deps.clock.now();
    if (lease.leaseExpiresMs < lease.deadlineMs)
      return now + Math.max(MIN_REFRESH_MS, (lease.leaseExpiresMs - now) / 3);
    return Math.max(now + MIN_REFRESH_MS, Math.min(now + lease.spacingMs, lease.deadlineMs));
  }
}

function sameToken(held: Buffer, presented: string): boolean {
  const bytes = Buffer.from(presented);
  return bytes.length === held.length && timingSafeEqual(bytes, held);
}

function notHeld(taskId: string): string {
  return `task ${taskId}: no lease with this token was pushed to this worker on this socket (or it was already reported)`;
}
