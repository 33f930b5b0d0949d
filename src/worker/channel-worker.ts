import type WebSocket from 'ws';

import { ChannelLink } from './channel-link.js';
import { ChannelSession } from './channel-session.js';
import { keepConnected } from './channel-socket.js';
import { ChannelError, type NodeFrame, type WireLease } from './channel-wire.js';
import { LeaseLostError, TaskCancelledError, type UpgradeRefusedError } from './errors.js';
import { HttpWorker } from './http-worker.js';
import { Lifecycle } from './lifecycle.js';
import { stopTimeoutMs, type CompiledWorkerOptions } from './options.js';
import { RunningTasks, type RunningTask } from './running-tasks.js';
import { newCounters } from './task-run.js';
import type { StopOptions, Worker, WorkerStats } from './types.js';
import { ProtocolError, type WirePolledTask } from './wire.js';

/**
 * The worker's life on the channel. `idle` until `start()`; `connecting` while it has no
 * welcomed socket (opening one, waiting for the welcome, or backing off after a lost one);
 * `welcomed` while a node has welcomed its socket (it goes back to `connecting` when the socket
 * is lost); `fallback` once every node refused the upgrade with 404 and an HTTP worker runs in
 * its place; `stopping` from `stop()` until `stopped`. Tasks are taken (credit granted) only
 * while `connecting` or `welcomed`.
 */
type ChannelPhase = 'idle' | 'connecting' | 'welcomed' | 'fallback' | 'stopping' | 'stopped';

const MOVES: Readonly<Record<ChannelPhase, readonly ChannelPhase[]>> = {
  idle: ['connecting', 'stopping'],
  connecting: ['welcomed', 'fallback', 'stopping'],
  welcomed: ['connecting', 'stopping'],
  fallback: ['stopping'],
  stopping: ['stopped'],
  stopped: [],
};

/**
 * The worker on the channel (API.md "Workers as remote actors"): one WebSocket to a node, over
 * which the node pushes tasks and the worker sends results back.
 *
 * Credit (`channel-credit.ts`): the node pushes at most as many tasks as the worker has free
 * slots, and a finished task's slot is granted again with its result. A task pushed beyond the
 * credit is not run: it is reported failed and retryable, and the node is told so through
 * `onError`.
 *
 * What goes out on the socket is the link's (`channel-link.ts`): results of tasks that finish
 * within `batchCompletions.lingerMs` of each other share one `results` frame
 * (`channel-results.ts`); `ctx.progress` values wait 250 ms, the latest of each task winning,
 * and share a `progress` frame (`channel-progress.ts`). No heartbeats: the node
 * keeps every lease of the worker alive while the socket lives, and the worker pings it to
 * notice a node that went away without closing (`channel-session.ts`).
 *
 * Reconnect: a lost socket is replaced by one to the next node of `urls`, with backoff. Its
 * `hello` lists in `resume` the leases the worker still holds (running tasks, and finished
 * ones whose results are not acknowledged yet); results not acknowledged on the old socket
 * are sent again on the new one, and the node acknowledges `ok: false` those it can no longer
 * take (counted as discarded). A welcome whose `resumed` list leaves a running task out means
 * its lease is gone: the task's signal is aborted with a `LeaseLostError`.
 *
 * Deadlines: a task's `deadline_at` aborts its handler with a `TaskTimeoutError` and frees its
 * slot (granted again as credit) without a result (`running-tasks.ts`); the node ends the
 * attempt itself and says `lease_lost`. `ctx.extendDeadline` goes out at once as a `progress`
 * update with `extend_seconds`, and the node's `extended` answer moves the deadline.
 *
 * Stop: `goodbye` (no more tasks), running handlers finish (or are aborted after
 * `timeoutMs`), their results go out, and the worker waits for the acks while the socket
 * lives (and the node acknowledges something at least every 10 s). It does not reconnect
 * once stopping: results that could not be delivered are counted as discarded, and the node
 * hands their tasks on when their leases run out.
 */
export class ChannelWorker implements Worker {
  readonly workerId: string;
  private readonly lifecycle = new Lifecycle<ChannelPhase>('channel worker', MOVES, 'idle');
  private readonly counters = newCounters();
  private readonly running: RunningTasks;
  /** The current socket and what goes out on it. */
  private readonly link: ChannelLink;
  /** Aborted by `stop`: ends a reconnect's backoff at once. */
  private readonly connectAbort = new AbortController();
  private everWelcomed = false;
  /** The loop that keeps a socket open, from `start` until it gives up or the worker stops. */
  private connectLoop: Promise<void> | undefined;
  private stopped: Promise<void> | undefined;
  /** The HTTP worker that runs in this one's place against a node without the channel. */
  private fallback: Worker | undefined;

  constructor(private readonly o: CompiledWorkerOptions) {
    this.workerId = o.workerId;
    this.running = new RunningTasks(o, this.counters);
    this.link = new ChannelLink(o, this.counters, { running: () => this.running.size, taking: () => this.taking });
  }

  start(): void {
    if (!this.lifecycle.is('idle')) return;
    this.lifecycle.moveTo('connecting');
    this.connectLoop = keepConnected({
      urls: this.o.urls,
      token: this.o.token,
      signal: this.connectAbort.signal,
      running: () => this.taking,
      everWelcomed: () => this.everWelcomed,
      session: (ws, base) => this.openSession(ws, base),
      fallBack: (error) => this.fallBackToHttp(error),
      onError: this.o.onError,
    }).catch((error: unknown) => this.o.onError(error, 'channel loop stopped'));
  }

  stop(options: StopOptions = {}): Promise<void> {
    const graceMs = stopTimeoutMs(options.timeoutMs);
    this.stopped ??= this.shutDown(options, graceMs);
    return this.stopped;
  }

  get stats(): WorkerStats {
    if (this.fallback !== undefined) return this.fallback.stats;
    return { ...this.counters, running: this.running.size, unreported: this.link.unreported };
  }

  /** Whether the worker takes tasks (grants credit, keeps a socket). */
  private get taking(): boolean {
    return this.lifecycle.is('connecting', 'welcomed');
  }

  private fallBackToHttp(error: UpgradeRefusedError): void {
    this.lifecycle.moveTo('fallback');
    this.o.onError(
      new Error(`${error.message}: the node has no worker channel, so this worker falls back to HTTP long-poll`, {
        cause: error,
      }),
      'connecting',
    );
    this.fallback = new HttpWorker(this.o);
    this.fallback.start();
  }

  /** Runs one socket from `hello` to its close; resolves with whether the node welcomed it. */
  private openSession(ws: WebSocket, base: string): Promise<boolean> {
    const session = new ChannelSession(ws, base, {
      frame: (_session, frame) => this.receive(frame),
      closed: (s) => {
        if (this.link.detach(s) && this.lifecycle.is('welcomed')) this.lifecycle.moveTo('connecting');
      },
      onError: this.o.onError,
    });
    this.link.attach(session, this.heldLeases());
    return session.ended;
  }

  /** Leases of running tasks not lost (those of results on their way the link adds). */
  private *heldLeases(): Iterable<WireLease> {
    for (const { task, lost } of this.running.values())
      if (!lost) yield { task_id: task.task_id, lease_token: task.lease_token };
  }

  private receive(frame: NodeFrame): void {
    switch (frame.type) {
      case 'welcome':
        return this.welcomed(frame.resumed);
      case 'tasks':
        return this.pushed(frame.tasks);
      case 'acks':
        return this.link.acknowledged(frame.acks);
      case 'cancel':
        for (const taskId of frame.task_ids) this.running.get(taskId)?.abort(new TaskCancelledError(taskId));
        return;
      case 'lease_lost':
        return this.leasesLost(frame.task_ids);
      case 'extended':
        for (const { task_id: taskId, deadlineMs } of frame.tasks) {
          this.running.get(taskId)?.moveDeadline(deadlineMs);
          this.link.progress.extended(taskId, deadlineMs);
        }
        return;
      case 'error':
        this.o.onError(new ChannelError(frame.error.code, frame.error.message), 'channel');
        return;
      case 'spawned':
        return this.link.spawns.answered(frame.request_id, frame.tasks, frame.error);
    }
  }

  private welcomed(resumed: ReadonlySet<string> | null): void {
    if (this.lifecycle.is('connecting')) this.lifecycle.moveTo('welcomed');
    if (this.everWelcomed) this.counters.reconnects++;
    this.everWelcomed = true;
    if (resumed !== null) {
      for (const t of this.running.values()) if (!resumed.has(t.task.task_id)) this.loseLease(t);
    }
    if (this.lifecycle.is('stopping')) this.link.goodbye();
    this.link.welcomed();
  }

  private pushed(tasks: readonly WirePolledTask[]): void {
    if (this.link.closing) {
      // Pushed before the node read our close frame: it hands back what this socket held
      // without a result as soon as it does, so running it here would run it twice at once.
      this.counters.notRun += tasks.length;
      return;
    }
    for (const task of tasks) {
      if (this.running.get(task.task_id) !== undefined) {
        this.o.onError(new ProtocolError(`task ${task.task_id} was pushed while it already runs here`), 'channel');
      } else if (!this.link.useCredit()) {
        this.o.onError(
          new ProtocolError(`task ${task.task_id} was pushed beyond the credit granted: not run`),
          'channel',
        );
        this.link.report({
          task_id: task.task_id,
          lease_token: task.lease_token,
          status: 'failed',
          error: 'pushed to the worker beyond the credit it granted; not run',
          retryable: true,
        });
      } else {
        this.runTask(task);
      }
    }
  }

  private leasesLost(taskIds: readonly string[]): void {
    for (const taskId of taskIds) {
      const t = this.running.get(taskId);
      if (t !== undefined) this.loseLease(t);
      else if (this.link.dropWaiting(taskId)) {
        this.counters.leasesLost++;
        this.counters.discarded++;
      }
    }
  }

  private loseLease(t: RunningTask): void {
    if (t.lost || t.timedOutByNode()) return;
    t.lost = true;
    const error = new LeaseLostError(t.task.task_id);
    this.link.progress.drop(t.task.task_id);
    this.link.progress.endExtensions(t.task.task_id, error);
    this.counters.leasesLost++;
    t.abort(error);
  }

  private runTask(task: WirePolledTask): void {
    const t = this.running.add(task);
    const { task_id: taskId, lease_token: leaseToken } = task;
    this.running.start(t, {
      progress: (value) => {
        if (t.lost || this.running.get(taskId) !== t) return;
        this.link.progress.set({ task_id: taskId, lease_token: leaseToken, progress: value });
      },
      extend: (seconds) => this.link.progress.extend(taskId, leaseToken, seconds),
      spawn: (tasks, traceparent) => this.link.spawns.spawn(taskId, leaseToken, tasks, traceparent),
      finished: (ran) => {
        this.link.progress.drop(taskId); // the result says more
        this.link.progress.endExtensions(taskId, t.timeout ?? t.deadlineMs ?? Date.now());
        if (ran === null) {
          // Past its deadline the node ends the attempt itself and would refuse a result.
          this.link.slotFreed();
        } else if (t.lost) {
          // The node has handed a lost task on; it would refuse this result.
          this.counters.discarded++;
          this.link.slotFreed();
        } else {
          this.link.report({ task_id: taskId, lease_token: leaseToken, ...ran.outcome });
        }
      },
    });
  }

  private async shutDown(options: StopOptions, graceMs: number | undefined): Promise<void> {
    this.lifecycle.moveTo('stopping');
    this.connectAbort.abort();
    this.link.goodbye();
    if (this.fallback !== undefined) await this.fallback.stop(options);
    const disarm = this.running.abortAfter(graceMs);
    // Tasks pushed before the node read `goodbye` still arrive and run meanwhile.
    await this.link.settle(() => this.running.idle());
    disarm();
    await this.link.close();
    await this.connectLoop;
    this.lifecycle.moveTo('stopped');
  }
}
