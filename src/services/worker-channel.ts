import { randomUUID } from 'node:crypto';
import { WORKER, type LocalSockets, type WorkerMessage, type WorkerPush } from '../actors/worker.js';
import { WheelhouseError, isWheelhouseError } from '../lib/errors.js';
import type { Cancel } from '../runtime/clock.js';
import { RECHECK_MS } from './dispatcher.js';
import { MAX_CLAIM_ROWS } from './poll-claims.js';
import { spawnAnswer, type ChannelSpawn } from './channel-spawn.js';
import type { Assignment } from './types.js';
import { CLOSE, WorkerSession, type ChannelSocket, type NodeFrame } from './worker-session.js';

export { CLOSE, type ChannelAck, type ChannelSocket, type NodeFrame } from './worker-session.js';
export type { ChannelSpawn } from './channel-spawn.js';
export type { ChannelHello, FrameMeter, WorkerChannelApi, WorkerChannelDeps } from './worker-channel-types.js';
import type { ChannelHello, FrameMeter, WorkerChannelApi, WorkerChannelDeps } from './worker-channel-types.js';

/**
 * The worker channel of one node: the WebSocket sessions of the workers connected here
 * (API.md, "Workers as remote actors"). The node pushes claimed tasks to each within the credits
 * it granted; the claims of every session that has credit and may have something ready are
 * started together, once per event-loop turn, when a push lands (the dispatcher's `notify`),
 * when credit arrives, and on a periodic recheck for pushes this node did not see.
 *
 * Each session announces itself to the worker's actor (`("worker", worker_id)`, placed by the
 * ring) on hello and every heartbeat, so that a cancel or a lost lease sent to that actor from
 * any node reaches the socket here (src/actors/worker.ts).
 */

/** Most tasks one claim of a session takes (the long-poll's `max_tasks` bound). */
export const MAX_CLAIM = 1_000;

/** Credits a session can hold at once; more granted is kept at this. */
export const MAX_CREDITS = 1_000_000;

/**
 * Longest wait between the periodic rechecks of a session whose claims keep finding nothing:
 * from `RECHECK_MS` it doubles with each empty claim up to this. Pushes of its task types (this
 * node's and those other nodes announce) and credit still start a claim at once; the recheck
 * is for what no push announced.
 */
export const MAX_RECHECK_MS = 8_000;

export class WorkerChannel implements WorkerChannelApi, LocalSockets {
  readonly heartbeatMs: number;
  readonly frames: FrameMeter = { queuedBytes: 0, peakQueuedBytes: 0, peakBufferedBytes: 0, paused: 0 };
  private readonly sessions = new Set<WorkerSession>();
  /** The newest session of each worker connected here. */
  private readonly byWorker = new Map<string, WorkerSession>();
  /** Sessions by task type, for pushes. */
  private readonly byType = new Map<string, Set<WorkerSession>>();
  private turnScheduled = false;
  private stopped = false;
  private readonly timers: Cancel[] = [];
  private readonly offPush: () => void;

  constructor(private readonly deps: WorkerChannelDeps) {
    this.heartbeatMs = deps.heartbeatMs;
    this.offPush = deps.dispatcher.onPush((types) => this.pushed(types));
    this.every(RECHECK_MS, () => {
      const now = deps.clock.now();
      for (const session of this.sessions) if (session.recheckAtMs <= now) session.wanting = true;
      this.scheduleTurn();
    });
    this.every(deps.heartbeatMs, () => {
      for (const session of this.byWorker.values()) this.announce(session);
    });
  }

  /** Sockets open here whose worker takes `taskType`. */
  connected(taskType: string): number {
    return this.byType.get(taskType)?.size ?? 0;
  }

  /** Sessions open here now. */
  get size(): number {
    return this.sessions.size;
  }

  /** The sessions open here now, newest of each worker (the workers view). */
  get openSessions(): Iterable<WorkerSession> {
    return this.byWorker.values();
  }

  async open(hello: ChannelHello, socket: ChannelSocket): Promise<WorkerSession> {
    this.checkBinding(hello);
    const session = new WorkerSession(randomUUID(), hello.workerId, hello.keyId, hello.taskTypes, socket, {
      workers: this.deps.workers,
      clock: this.deps.clock,
      onError: this.deps.onError,
    });
    const resumed = await this.resume(session, hello.resume);
    try {
      this.checkBinding(hello); // a socket of another key may have said hello meanwhile
    } catch (error) {
      session.closed(); // what it resumed is left as it was: to its own worker
      throw error;
    }
    const previous = this.byWorker.get(hello.workerId);
    if (previous !== undefined && previous !== session) {
      for (const taskId of resumed) previous.drop(taskId);
      previous.close(CLOSE.replaced, 'a newer socket of this worker took its place');
    }
    this.sessions.add(session);
    this.byWorker.set(hello.workerId, session);
    for (const type of session.taskTypes) {
      let set = this.byType.get(type);
      if (set === undefined) this.byType.set(type, (set = new Set()));
      set.add(session);
    }
    session.send({ type: 'welcome', nodeId: this.deps.nodeId, heartbeatMs: this.heartbeatMs, resumed });
    this.announce(session);
    this.credit(session, hello.credits);
    return session;
  }

  credit(session: WorkerSession, n: number): void {
    if (session.state === 'closed') return;
    session.credits = Math.min(MAX_CREDITS, session.credits + n);
    session.wanting = true;
    this.scheduleTurn();
  }

  spawn(spawn: ChannelSpawn): Promise<NodeFrame> {
    return spawnAnswer(this.deps.children, spawn);
  }

  closed(session: WorkerSession, handBack: boolean): void {
    const left = session.closed();
    if (handBack && left.length > 0) {
      this.deps.handedBack?.(
        'its socket was closed by its worker (or replaced) while it held them',
        session.workerId,
        left.map((l) => l.taskId),
      );
      void this.deps.workers.releaseHeld(left);
    }
    this.sessions.delete(session);
    for (const type of session.taskTypes) {
      const set = this.byType.get(type);
      set?.delete(session);
      if (set?.size === 0) this.byType.delete(type);
    }
    if (this.byWorker.get(session.workerId) === session) {
      this.byWorker.delete(session.workerId);
      this.tellWorker(session.workerId, { type: 'detached', nodeId: this.deps.nodeId, sessionId: session.id });
    }
  }

  /** From the worker's actor, through this node's `worker-sockets` actor. */
  deliver(workerId: string, push: WorkerPush): boolean {
    const session = this.byWorker.get(workerId);
    if (session === undefined) return false;
    session.push(push);
    return true;
  }

  stop(): void {
    this.stopped = true;
    this.offPush();
    for (const cancel of this.timers) cancel();
  }

  /**
   * A worker id is bound to the API key whose socket holds it: a hello from a socket of another
   * key is refused (403 `forbidden`), not allowed to displace it. The same key's newer socket
   * takes the place of the older one.
   */
  private checkBinding(hello: ChannelHello): void {
    const holder = this.byWorker.get(hello.workerId);
    if (holder === undefined || holder.keyId === hello.keyId) return;
    throw new WheelhouseError(
      'forbidden',
      `worker_id: ${JSON.stringify(hello.workerId)} is held by a socket that another API key opened; a worker id belongs to the key that connected it`,
      { details: { field: 'worker_id' } },
    );
  }

  /** Keeps the leases that are still the worker's (each verified by a heartbeat). */
  private async resume(session: WorkerSession, leases: ChannelHello['resume']): Promise<string[]> {
    const seen = new Set<string>();
    const unique = leases.filter((l) => !seen.has(l.taskId) && seen.add(l.taskId));
    const answers = await Promise.all(
      unique.map((l) =>
        this.deps.workers.heartbeat(l.taskId, l.leaseToken).then(
          (extended) => ({ l, extended }),
          (error: unknown) => {
            if (!isWheelhouseError(error, 'lease_not_held'))
              this.deps.onError(error, `resuming the lease of task ${l.taskId}`);
            return { l, extended: null };
          },
        ),
      ),
    );
    const kept: string[] = [];
    for (const { l, extended } of answers) {
      if (extended === null) continue;
      session.hold({
        id: l.taskId,
        leaseToken: l.leaseToken,
        leaseExpiresMs: extended.leaseExpiresMs,
        deadlineMs: extended.deadlineMs,
      });
      kept.push(l.taskId);
    }
    return kept;
  }

  private pushed(types: ReadonlySet<string>): void {
    let any = false;
    for (const type of types) {
      for (const session of this.byType.get(type) ?? []) {
        session.wanting = true;
        session.pushed = true;
        any = true;
      }
    }
    if (any) this.scheduleTurn();
  }

  /**
   * One turn: the sessions that can take tasks, grouped by their task types, each group
   * claimed for in one statement (or a few, past `MAX_CLAIM_ROWS`), all started together.
   */
  private scheduleTurn(): void {
    if (this.turnScheduled || this.stopped) return;
    this.turnScheduled = true;
    setImmediate(() => {
      this.turnScheduled = false;
      if (this.stopped) return;
      const groups = new Map<string, WorkerSession[][]>();
      const rows = new Map<WorkerSession[], number>();
      for (const session of this.sessions) {
        if (!session.claimable) continue;
        const want = claimSize(session);
        let chunks = groups.get(session.taskTypesKey);
        if (chunks === undefined) groups.set(session.taskTypesKey, (chunks = []));
        let chunk = chunks[chunks.length - 1];
        if (chunk === undefined || (rows.get(chunk) as number) + want > MAX_CLAIM_ROWS) chunks.push((chunk = []));
        chunk.push(session);
        rows.set(chunk, (rows.get(chunk) ?? 0) + want);
      }
      for (const chunks of groups.values()) for (const chunk of chunks) void this.claimFor(chunk);
    });
  }

  /**
   * Claims up to each session's credits, for sessions of the same task types in one statement.
   * The credits are taken before the claim, so the tasks in flight to a socket never pass what
   * it granted; what the claim did not use is given back.
   */
  private async claimFor(group: readonly WorkerSession[]): Promise<void> {
    const shares = group.map((session) => {
      const want = claimSize(session);
      session.credits -= want;
      session.claims++;
      session.wanting = false;
      session.pushed = false;
      return { workerId: session.workerId, maxTasks: want };
    });
    const taskTypes = [...(group[0] as WorkerSession).taskTypes];
    let claimed: Assignment[][] = [];
    try {
      claimed = await this.deps.dispatcher.claimReadyFor(taskTypes, shares);
      this.backOff(group, claimed);
    } catch (error) {
      this.deps.onError(error, `claiming tasks of ${taskTypes.join(', ')} for ${group.length} worker(s)`);
    } finally {
      for (const session of group) session.claims--;
    }
    // Gone, closing or saying goodbye while their tasks were being claimed, or their frame
    // could not be written: handed back now rather than left to wait out leases nobody holds.
    const handBack: Assignment[] = [];
    for (const [i, session] of group.entries()) {
      const mine = claimed[i] ?? [];
      const want = (shares[i] as { maxTasks: number }).maxTasks;
      session.credits += want - mine.length;
      session.filled = mine.length === want;
      if (mine.length === 0) continue;
      if (!session.deliver(mine, () => this.unsent(session, mine))) {
        this.deps.handedBack?.(
          'claimed for a socket that closed or began to drain meanwhile',
          session.workerId,
          mine.map((t) => t.id),
        );
        handBack.push(...mine);
      } else if (mine.length === want) {
        session.wanting = true; // there may be more
      }
    }
    if (handBack.length > 0) await this.deps.workers.release(handBack);
    let again = false;
    for (const session of group) {
      session.closeIfDrained();
      again ||= session.claimable;
    }
    if (again) this.scheduleTurn();
  }

  /** Sessions that found nothing are rechecked later each time; one that found something at once again. */
  private backOff(group: readonly WorkerSession[], claimed: readonly Assignment[][]): void {
    const now = this.deps.clock.now();
    for (const [i, session] of group.entries()) {
      if ((claimed[i]?.length ?? 0) > 0) {
        session.emptyClaims = 0;
        session.recheckAtMs = 0;
      } else {
        session.emptyClaims++;
        session.recheckAtMs = now + Math.min(MAX_RECHECK_MS, RECHECK_MS * 2 ** Math.min(session.emptyClaims - 1, 16));
      }
    }
  }

  /** A `tasks` frame that never reached the wire: its tasks still held without a result go back. */
  private unsent(session: WorkerSession, tasks: readonly Assignment[]): void {
    const lost = tasks.filter((task) => session.drop(task.id));
    if (lost.length === 0) return;
    this.deps.handedBack?.(
      'their tasks frame was written but never reached the wire',
      session.workerId,
      lost.map((t) => t.id),
    );
    void this.deps.workers.release(lost);
  }

  private announce(session: WorkerSession): void {
    this.tellWorker(session.workerId, { type: 'attached', nodeId: this.deps.nodeId, sessionId: session.id });
  }

  private tellWorker(workerId: string, message: WorkerMessage): void {
    try {
      this.deps.system.ref(WORKER, workerId).tell(message);
    } catch (error) {
      // A full mailbox or a node shutting down: the next announcement says it again.
      this.deps.onError(error, `telling the actor of worker ${workerId}`);
    }
  }

  private every(periodMs: number, fn: () => void): void {
    const index = this.timers.length;
    const arm = (): void => {
      this.timers[index] = this.deps.clock.setTimer(periodMs, () => {
        if (this.stopped) return;
        fn();
        arm();
      });
    };
    arm();
  }
}

/**
 * Credits kept back from the first claim of a session that holds at least four times as many:
 * a second claim may start while the first is in flight (`CLAIMS_IN_FLIGHT`), and it needs
 * credit of its own. A session with fewer credits claims them all at once, as before: its
 * second claim waits for the first to end. So does one whose last claim filled: a deep queue
 * (a herd's drain) is claimed in whole claims — kept back there, the spare split every claim
 * in two and the worker's results came in 350–371 frames instead of 200 (W2).
 */
const SPARE_FOR_SECOND_CLAIM = 32;

/** How many tasks a claim for this session asks for now. */
function claimSize(session: WorkerSession): number {
  const credits = session.credits;
  const spare =
    session.claims === 0 && !session.filled && credits >= 4 * SPARE_FOR_SECOND_CLAIM ? SPARE_FOR_SECOND_CLAIM : 0;
  return Math.min(credits - spare, MAX_CLAIM);
}
