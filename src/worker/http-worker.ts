import { backoffMs, sleep } from './backoff.js';
import { CompletionReporter } from './completions.js';
import { LeaseLostError, TaskCancelledError } from './errors.js';
import { keepLeaseAlive, type TrackedLease } from './heartbeats.js';
import { NodeAnswerError, NodeClient } from './http.js';
import { Lifecycle } from './lifecycle.js';
import { Notifier } from './notifier.js';
import { MAX_TASKS_PER_REQUEST, stopTimeoutMs, type CompiledWorkerOptions } from './options.js';
import { RunningTasks, type RunningTask } from './running-tasks.js';
import { spawnOverHttp } from './spawn.js';
import { newCounters, type TaskOutcome } from './task-run.js';
import type { StopOptions, Worker, WorkerStats } from './types.js';
import { readPolledTasks, type WirePolledTask } from './wire.js';

/** `idle` until `start()`, `polling` while it takes tasks, `stopping` from `stop()` until `stopped`. */
type HttpPhase = 'idle' | 'polling' | 'stopping' | 'stopped';

const MOVES: Readonly<Record<HttpPhase, readonly HttpPhase[]>> = {
  idle: ['polling', 'stopping'],
  polling: ['stopping'],
  stopping: ['stopped'],
  stopped: [],
};

/** A result is still worth delivering this long after its lease's last known expiry, ms. */
const DELIVERY_GRACE_MS = 5_000;
/** An empty poll answer faster than this did not wait on the node: back off before the next one. */
const EMPTY_POLL_TOO_FAST_MS = 50;
/** Backoff step cap after empty answers (step 3: ≤ 800 ms), so an idle worker still notices work quickly. */
const EMPTY_POLL_MAX_STEP = 3;
/** Results awaiting delivery allowed per slot before polling pauses. */
const UNREPORTED_PER_SLOT = 2;

/**
 * The worker over the HTTP endpoints, at `o.url`: pollers that long-poll for at most as many
 * tasks as there are free slots (credit-based flow control, so a thundering herd waits in the
 * node's ready queue and not in worker memory), a handler call per task with its lease
 * heartbeated (`heartbeats.ts`), and a reporter that sends results back in batches
 * (`completions.ts`). At a task's deadline its handler is aborted and its slot freed with no
 * result and no more heartbeats (`running-tasks.ts`); `ctx.extendDeadline` is a heartbeat with
 * `extend_seconds`, sent at once.
 */
export class HttpWorker implements Worker {
  readonly workerId: string;
  private readonly lifecycle = new Lifecycle<HttpPhase>('HTTP worker', MOVES, 'idle');
  private readonly client: NodeClient;
  private readonly reporter: CompletionReporter;
  private readonly counters = newCounters();
  private readonly running: RunningTasks;
  /** Wakes a poller waiting for credit: a slot freed, a result settled, the worker stopping. */
  private readonly changed = new Notifier();
  /** Aborted by `stop`: ends the waiting polls and backoffs at once. */
  private readonly pollAbort = new AbortController();
  /** Most tasks one poll asks for, so that `pollers` polls share the slots. */
  private readonly perPollMax: number;
  /** Slots promised to polls in flight. */
  private reserved = 0;
  private pollers: Promise<void>[] = [];
  private stopped: Promise<void> | undefined;

  constructor(private readonly o: CompiledWorkerOptions) {
    this.workerId = o.workerId;
    this.running = new RunningTasks(o, this.counters);
    this.client = new NodeClient(o.url, o.token, o.connections);
    this.perPollMax = Math.min(MAX_TASKS_PER_REQUEST, Math.ceil(o.concurrency / o.pollers));
    this.reporter = new CompletionReporter({
      client: this.client,
      options: o.batch,
      onError: o.onError,
      onResult: o.onResult,
      onSettled: (accepted, discarded, answered) => {
        if (answered) this.counters.completionRequests++;
        this.counters.reported += accepted;
        this.counters.discarded += discarded;
        this.changed.notify();
      },
    });
  }

  start(): void {
    if (!this.lifecycle.is('idle')) return;
    this.lifecycle.moveTo('polling');
    this.pollers = Array.from({ length: this.o.pollers }, () =>
      this.pollLoop().catch((error: unknown) => this.o.onError(error, 'poll loop stopped')),
    );
  }

  stop(options: StopOptions = {}): Promise<void> {
    const graceMs = stopTimeoutMs(options.timeoutMs);
    this.stopped ??= this.shutDown(graceMs);
    return this.stopped;
  }

  get stats(): WorkerStats {
    return { ...this.counters, running: this.running.size, unreported: this.reporter.unreported };
  }

  private freeSlots(): number {
    return this.o.concurrency - this.running.size - this.reserved;
  }

  /**
   * Room to poll: a free slot, and results not piling up. Results not yet delivered hold credit
   * back, so a node slow to take results is not handed ever more tasks whose results would pile
   * up here. Up to two slots' worth may be out, so one batch of results can be in flight while
   * the next poll is.
   */
  private hasCredit(): boolean {
    return this.freeSlots() > 0 && this.reporter.unreported < UNREPORTED_PER_SLOT * this.o.concurrency;
  }

  private async pollLoop(): Promise<void> {
    let failures = 0;
    let tooFast = 0;
    while (this.lifecycle.is('polling')) {
      if (!this.hasCredit()) {
        await this.changed.wait();
        continue;
      }
      const maxTasks = Math.min(this.freeSlots(), this.perPollMax);
      this.reserved += maxTasks;
      const sentMs = Date.now();
      let tasks: WirePolledTask[];
      try {
        tasks = await this.poll(maxTasks);
        this.counters.polls++;
        failures = 0;
      } catch (error) {
        this.reserved -= maxTasks;
        if (!this.lifecycle.is('polling')) return;
        this.o.onError(error, 'poll');
        const retryAfterMs = error instanceof NodeAnswerError ? error.retryAfterMs : null;
        await sleep(retryAfterMs ?? backoffMs(failures++), this.pollAbort.signal);
        continue;
      }
      this.reserved -= maxTasks;
      for (const task of tasks) this.runTask(task);
      this.changed.notify();
      if (tasks.length === 0 && Date.now() - sentMs < EMPTY_POLL_TOO_FAST_MS) {
        await sleep(backoffMs(Math.min(tooFast++, EMPTY_POLL_MAX_STEP)), this.pollAbort.signal);
      } else {
        tooFast = 0;
      }
    }
  }

  /** One long-poll for at most `maxTasks` tasks. */
  private async poll(maxTasks: number): Promise<WirePolledTask[]> {
    const { o } = this;
    const answer = await this.client.post(
      '/api/workers/poll',
      { worker_id: o.workerId, task_types: o.taskTypes, max_tasks: maxTasks, wait_ms: o.pollWaitMs },
      this.pollAbort.signal,
    );
    if (answer.status !== 200) throw NodeAnswerError.from('/api/workers/poll', answer);
    return readPolledTasks(answer.body);
  }

  private runTask(task: WirePolledTask): void {
    const t = this.running.add(task);
    const lease: TrackedLease = {
      taskId: task.task_id,
      leaseToken: task.lease_token,
      leaseExpiresMs: Date.parse(task.lease_expires_at),
      deadlineMs: t.deadlineMs,
      lost: false,
    };
    const heartbeats = keepLeaseAlive(lease, {
      client: this.client,
      everyMs: this.o.heartbeatEveryMs,
      onError: this.o.onError,
      onLost: (l) => {
        if (t.timedOutByNode()) return;
        t.lost = true;
        this.counters.leasesLost++;
        t.abort(new LeaseLostError(l.taskId));
      },
      onCancelRequested: (l) => t.abort(new TaskCancelledError(l.taskId)),
      onDeadline: (l) => {
        if (l.deadlineMs !== null) t.moveDeadline(l.deadlineMs);
      },
    });
    this.running.start(t, {
      progress: (value) => heartbeats.progress(value),
      extend: (seconds) => heartbeats.extend(seconds),
      spawn: (tasks, traceparent) => spawnOverHttp(this.client, task, tasks, traceparent),
      finished: (ran) => {
        heartbeats.stop(t.timeout ?? t.deadlineMs ?? Date.now());
        // Past its deadline the node ends the attempt itself and would refuse a result (409): none is sent.
        if (ran !== null) this.report(t, lease, ran);
        this.changed.notify();
      },
    });
  }

  private report(t: RunningTask, lease: TrackedLease, { outcome, resultBytes }: TaskOutcome): void {
    if (t.lost) {
      // The node has handed the task on; it would refuse this result with 409.
      this.counters.discarded++;
      return;
    }
    this.reporter.add({
      wire: { task_id: t.task.task_id, lease_token: t.task.lease_token, ...outcome },
      deadlineMs: lease.leaseExpiresMs + DELIVERY_GRACE_MS,
      resultBytes,
    });
  }

  private async shutDown(graceMs: number | undefined): Promise<void> {
    this.lifecycle.moveTo('stopping');
    this.pollAbort.abort();
    this.changed.notify();
    const disarm = this.running.abortAfter(graceMs);
    await Promise.all(this.pollers);
    await this.running.idle();
    disarm();
    await this.reporter.drain();
    await this.client.close();
    this.lifecycle.moveTo('stopped');
  }
}
