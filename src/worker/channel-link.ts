import { backoffMs, sleep } from './backoff.js';
import { ChannelCredit } from './channel-credit.js';
import { ChannelProgress } from './channel-progress.js';
import { ChannelResults } from './channel-results.js';
import { ChannelSpawns } from './channel-spawns.js';
import type { ChannelSession } from './channel-session.js';
import type { WireAck, WireLease, WorkerFrame } from './channel-wire.js';
import { Notifier } from './notifier.js';
import type { CompiledWorkerOptions } from './options.js';
import type { newCounters } from './task-run.js';
import type { WireResult } from './wire.js';

/**
 * The channel worker's end of its current socket, and what it sends on it: `hello` with the
 * free slots as credit, results (`channel-results.ts`) with the credit granted again beside
 * them (`channel-credit.ts`), progress (`channel-progress.ts`), `goodbye`. Results that finish
 * within `batchCompletions.lingerMs` of each other share a `results` frame. Between sockets
 * nothing is sent: results the old socket did not acknowledge, and progress not sent yet, wait
 * for the next welcome.
 */

/** While stopping, how long the worker waits for an ack before it gives the node up, ms. */
const ACK_PATIENCE_MS = 10_000;

/** Most leases one `hello` may resume (the node refuses more). */
export const MAX_RESUME = 1_000;

/** What the link reads of the worker it serves. */
export interface LinkOwner {
  /** Tasks holding a slot now. */
  running(): number;
  /** Whether the worker takes tasks (grants credit). */
  taking(): boolean;
}

export class ChannelLink {
  readonly progress: ChannelProgress;
  /** `ctx.spawn` requests waiting for their answer. */
  readonly spawns: ChannelSpawns;
  private readonly results: ChannelResults;
  private readonly credit: ChannelCredit;
  /** The socket `hello` went out on (welcomed or not yet), null between sockets. */
  private session: ChannelSession | null = null;
  private flushTimer: NodeJS.Timeout | undefined;
  /** Sends again the results the node could not record, after a backoff. */
  private againTimer: NodeJS.Timeout | undefined;
  /** `acks` frames in a row that asked for results to be sent again: the backoff grows with them. */
  private againInARow = 0;
  /** `close` began: a task pushed from now on is not run (the node hands it on once the socket closes). */
  private closingSocket = false;
  /** Wakes `drain`: an ack came, a result was dropped or added, the socket went. */
  private readonly changed = new Notifier();

  constructor(
    private readonly o: CompiledWorkerOptions,
    private readonly counters: ReturnType<typeof newCounters>,
    private readonly owner: LinkOwner,
  ) {
    this.results = new ChannelResults(o.batch.maxBatchSize);
    this.credit = new ChannelCredit(o.concurrency);
    const sender = () => {
      const session = this.session;
      return session?.ready === true ? (frame: WorkerFrame) => session.send(frame) : null;
    };
    this.progress = new ChannelProgress(o.batch.maxBatchSize, sender);
    this.spawns = new ChannelSpawns(sender);
  }

  /** Whether the worker has begun to close its socket for good (`close`). */
  get closing(): boolean {
    return this.closingSocket;
  }

  /** Results waiting to be sent or acknowledged. */
  get unreported(): number {
    return this.results.size;
  }

  /**
   * Takes `session` as the current socket and says `hello` on it, resuming `held` leases and
   * those of results not acknowledged — at most `MAX_RESUME`, the node's bound on one hello
   * (running tasks first: a result not resumed is refused, a running task not resumed loses its
   * lease; the node hands either on when its lease runs out).
   */
  attach(session: ChannelSession, held: Iterable<WireLease>): void {
    this.session = session;
    const leases = new Map<string, WireLease>();
    for (const lease of held) leases.set(lease.task_id, lease);
    for (const lease of this.results.leases()) leases.set(lease.task_id, lease);
    const resume = [...leases.values()];
    if (resume.length > MAX_RESUME)
      this.o.onError(
        new Error(
          `${resume.length - MAX_RESUME} of ${resume.length} leases not resumed: a hello resumes at most ${MAX_RESUME}`,
        ),
        'reconnecting',
      );
    session.send({
      type: 'hello',
      worker_id: this.o.workerId,
      task_types: this.o.taskTypes,
      credits: this.credit.open(this.owner.running(), this.owner.taking()),
      resume: resume.slice(0, MAX_RESUME),
    });
  }

  /** `session` closed. If it was the current one, its credit is void and what it did not acknowledge is sent again on the next. */
  detach(session: ChannelSession): boolean {
    if (this.session !== session) return false;
    this.session = null;
    this.credit.lose();
    this.results.requeue();
    this.progress.requeue();
    this.spawns.lost();
    this.changed.notify();
    return true;
  }

  /** The node welcomed the current socket: what waited goes out. */
  welcomed(): void {
    this.flush();
    this.progress.flush();
  }

  /** A pushed task uses one credit; false when none was left (it must not run). */
  useCredit(): boolean {
    return this.credit.use();
  }

  /** Queues a task's result for the next `results` frame. */
  report(result: WireResult): void {
    this.results.add(result);
    this.scheduleFlush();
    this.changed.notify();
  }

  /**
   * Counts an `acks` frame; room for results again may mean room for credit again. Results the
   * node could not record now (its store out) are sent again after a backoff: it kept their
   * leases, and a result dropped here would leave its task to run again once the lease ends.
   */
  acknowledged(acks: readonly WireAck[]): void {
    const { accepted, refused, again, againCode } = this.results.ack(acks, (taskId, ok) =>
      this.o.onResult(taskId, ok ? 'accepted' : 'refused'),
    );
    this.counters.reported += accepted;
    this.counters.discarded += refused;
    if (again > 0) this.sendAgain(again, againCode);
    else if (accepted > 0) this.againInARow = 0;
    if (this.credit.grantable(this.owner.running(), this.results.size, this.owner.taking()) > 0) this.scheduleFlush();
    this.changed.notify();
  }

  /** Drops a result not sent yet whose lease is gone; true when there was one. */
  dropWaiting(taskId: string): boolean {
    const dropped = this.results.dropWaiting(taskId);
    if (dropped) this.o.onResult(taskId, 'dropped');
    this.changed.notify();
    return dropped;
  }

  /** A slot was freed without a result: its credit goes out with the next flush. */
  slotFreed(): void {
    this.scheduleFlush();
    this.changed.notify();
  }

  /** Says `goodbye` on the current socket, if it was welcomed. */
  goodbye(): void {
    if (this.session?.welcomed === true) this.session.send({ type: 'goodbye' });
  }

  /**
   * Stopping: waits until `idle` (no handler runs) and every result is acknowledged, or the
   * socket is gone, or the node has acknowledged nothing for `ACK_PATIENCE_MS`.
   */
  async settle(idle: () => Promise<void>): Promise<void> {
    let lastAckMs = Date.now();
    for (;;) {
      await idle();
      this.flush();
      if (this.results.size === 0 || this.session === null) return;
      if (Date.now() - lastAckMs >= ACK_PATIENCE_MS) return; // a node that no longer answers
      const before = this.results.size;
      const patience = new AbortController();
      await Promise.race([this.changed.wait(), sleep(ACK_PATIENCE_MS, patience.signal)]);
      patience.abort();
      if (this.results.size < before) lastAckMs = Date.now();
    }
  }

  /**
   * Stopped: drops the results still unacknowledged (counted as discarded: the node hands their
   * tasks on when their leases run out), closes the socket, and leaves no timer armed.
   */
  async close(): Promise<void> {
    this.closingSocket = true;
    if (this.results.size > 0) {
      const { unsent, unacknowledged } = this.results.clear();
      const dropped = unsent.length + unacknowledged.length;
      this.counters.discarded += dropped;
      for (const taskId of unsent) this.o.onResult(taskId, 'dropped');
      for (const taskId of unacknowledged) this.o.onResult(taskId, 'unacknowledged');
      this.o.onError(
        new Error(`${dropped} result(s) dropped: the node did not acknowledge them before the channel closed`),
        'stopping',
      );
    }
    clearTimeout(this.againTimer);
    this.againTimer = undefined;
    await this.session?.close(1000, 'worker stopped');
    this.progress.close();
  }

  private sendAgain(count: number, code: string | null): void {
    if (this.againTimer !== undefined) return;
    const waitMs = backoffMs(this.againInARow++);
    this.o.onError(
      new Error(
        `the node could not record ${count} result(s) (${code}); sending them again in ${Math.round(waitMs)} ms`,
      ),
      'reporting results',
    );
    this.againTimer = setTimeout(() => {
      this.againTimer = undefined;
      this.flush();
    }, waitMs);
  }

  private scheduleFlush(): void {
    if (this.results.waitingCount >= this.o.batch.maxBatchSize || this.o.batch.lingerMs === 0) this.flush();
    else this.flushTimer ??= setTimeout(() => this.flush(), this.o.batch.lingerMs);
  }

  /** Sends the waiting results (in frames of at most `maxBatchSize`) and the credit that can be granted. */
  private flush(): void {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const session = this.session;
    if (session === null || !session.ready) return;
    this.counters.resultFrames += this.results.send((text) => session.sendText(text));
    const n = this.credit.grant(this.owner.running(), this.results.size, this.owner.taking());
    if (n > 0) session.send({ type: 'credit', n });
  }
}
