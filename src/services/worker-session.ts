import type { WorkerPush } from '../actors/worker.js';
import { WheelhouseError, isWheelhouseError, type ErrorCode } from '../lib/errors.js';
import type { SubmitResult } from '../domain/model.js';
import type { Clock } from '../runtime/clock.js';
import { HeldLeases, type HeldLease, type LeaseGrant, type LeftLease } from './held-leases.js';
import type { Assignment, ChannelProgress, CompletionRequest, ProgressRequest, WorkersApi } from './types.js';
import { taskTypesKey } from './poll-claims.js';

export type { LeaseGrant, LeftLease } from './held-leases.js';

/**
 * One worker's socket on this node, as the services see it: the credits it granted, the leases
 * it holds (pushed to it, or resumed) and the one heartbeat that keeps them alive up to each
 * attempt's deadline (held-leases.ts), its results and progress. The channel
 * (worker-channel.ts) claims for it; the HTTP face turns its frames into calls here and its
 * `NodeFrame`s into JSON.
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
  | { type: 'error'; code: ErrorCode; message: string }
  /**
   * The answer to a `spawn` frame, named by its `request_id`: the children in request order, or
   * why none was added (the HTTP face tells the worker what it tells an HTTP client of it).
   */
  | { type: 'spawned'; requestId: string; tasks: SubmitResult[] }
  | { type: 'spawned'; requestId: string; error: WheelhouseError };

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

export interface SessionDeps {
  workers: Pick<WorkersApi, 'heartbeat' | 'complete' | 'progress'>;
  clock: Clock;
  onError(error: unknown, context: string): void;
}

/**
 * Claims a socket may have in flight at once. A second one starts only when something is
 * pushed while the first is still in Postgres (`pushed`): under a flood whose claims wait for a
 * pool connection and run 20–50 ms, a task of another key pushed meanwhile waited for that
 * claim to end before its own began (W6: the quiet keys' first starts, T + 110 → 190 ms).
 * Credit that arrives meanwhile waits for the first claim to end, as before: started by credit
 * too, a drain's claims came in pairs of half the size (W2's p99 17.6–19.1 s against
 * 15.4–15.9 s). The credits are taken before each claim, so the tasks in flight to a socket
 * still never pass what it granted.
 */
export const CLAIMS_IN_FLIGHT = 2;

export class WorkerSession {
  state: SessionState = 'open';
  /** Tasks the worker may still be sent. */
  credits = 0;
  /** Claims for this session in flight (at most {@link CLAIMS_IN_FLIGHT}). */
  claims = 0;
  /** Something may be ready for it: a push of its types, new credit, a recheck. */
  wanting = true;
  /** A push of its types landed since its last claim began: a second claim may start beside one in flight. */
  pushed = false;
  /** Its last claim took all it asked for: the queue holds more, so its next claim keeps no credit back. */
  filled = false;
  /** Claims in a row that found nothing: its periodic recheck backs off with them. */
  emptyClaims = 0;
  /** When the periodic recheck may next look for it (pushes and credit do at once). */
  recheckAtMs = 0;
  readonly taskTypes: ReadonlySet<string>;
  /** Its task types, sorted, as one string: sessions with the same key are claimed for together. */
  readonly taskTypesKey: string;
  /** When its worker said hello, Unix ms (the dashboard's workers view). */
  readonly openedMs: number;
  private readonly held: HeldLeases;
  /**
   * `results` frames being recorded: their leases are released already (no heartbeat for a
   * result on its way) and their acks not yet sent, so a draining socket must not close yet.
   */
  private recording = 0;

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
    this.taskTypesKey = taskTypesKey(this.taskTypes);
    this.openedMs = deps.clock.now();
    this.held = new HeldLeases({
      workers: deps.workers,
      clock: deps.clock,
      workerId,
      tell: (news) => void this.send(news),
      changed: () => this.closeIfDrained(),
      onError: deps.onError,
    });
  }

  get heldCount(): number {
    return this.held.size;
  }

  /**
   * Ready to be claimed for: open (its socket too, and reading what it is sent), with credit,
   * something may be ready, and no claim in flight — or one, and a push since it began.
   */
  get claimable(): boolean {
    return (
      this.state === 'open' &&
      this.socket.open &&
      !this.socket.backlogged &&
      this.credits > 0 &&
      (this.claims === 0 || (this.claims < CLAIMS_IN_FLIGHT && this.pushed)) &&
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
    this.held.hold([lease]);
  }

  /** `hold` for a batch of pushed tasks: the refresh timer is armed once, not once per task. */
  holdAll(leases: readonly LeaseGrant[]): void {
    this.held.hold(leases);
  }

  /** Stops keeping a lease (another socket of the worker resumed it). */
  drop(taskId: string): boolean {
    return this.held.release(taskId) !== undefined;
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
    return this.held.stop();
  }

  /** `goodbye`: no more tasks; the socket closes once every lease is settled. */
  goodbye(): void {
    if (this.state !== 'open') return;
    this.state = 'draining';
    this.closeIfDrained();
  }

  closeIfDrained(): void {
    if (this.state === 'draining' && this.held.size === 0 && this.claims === 0 && this.recording === 0)
      this.close(CLOSE.normal, 'goodbye: every lease settled');
  }

  /** A push from the cluster (through the worker's actor): only for leases this socket holds. */
  push(push: WorkerPush): void {
    const taskIds = push.taskIds.filter((id) => this.held.has(id));
    if (taskIds.length === 0) return;
    if (push.type === 'cancel') {
      const fresh = this.held.freshCancels(taskIds);
      if (fresh.length > 0) this.send({ type: 'cancel', taskIds: fresh });
    } else {
      for (const id of taskIds) this.held.release(id);
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
      if (sent.has(r.taskId) || !this.held.heldWith(r.taskId, r.leaseToken)) continue;
      sent.set(r.taskId, r);
      const lease = this.held.release(r.taskId) as HeldLease; // no heartbeat for a lease whose result is on its way
      taken.set(r.taskId, lease);
      // The token is the one this socket was given (compared above): its digest is the claim's.
      if (lease.digest !== undefined) r.tokenDigest = lease.digest;
    }
    let outcome = new Map<string, boolean>();
    let failure: WheelhouseError | null = null;
    this.recording++;
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
        this.held.restore(taken);
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
    this.recording--;
    this.held.arm();
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
    const held = updates.filter((u) => this.held.heldWith(u.taskId, u.leaseToken));
    if (held.length === 0) return;
    const values: ProgressRequest[] = [];
    for (const u of held) {
      if (u.progress !== undefined) values.push({ taskId: u.taskId, leaseToken: u.leaseToken, progress: u.progress });
    }
    const extensions: { taskId: string; leaseToken: string; extendSeconds: number }[] = [];
    for (const u of held) {
      if (u.extendSeconds !== undefined)
        extensions.push({ taskId: u.taskId, leaseToken: u.leaseToken, extendSeconds: u.extendSeconds });
    }
    await Promise.all([
      values.length === 0
        ? undefined
        : this.deps.workers
            .progress(values)
            .catch((error: unknown) => this.deps.onError(error, `recording progress of worker ${this.workerId}`)),
      extensions.length === 0 ? undefined : this.held.extend(extensions),
    ]);
  }
}

function notHeld(taskId: string): string {
  return `task ${taskId}: no lease with this token was pushed to this worker on this socket (or it was already reported)`;
}
