import { backoffMs, sleep } from './backoff.js';
import { createChannelWorker } from './channel-worker.js';
import { CompletionReporter } from './completions.js';
import { LeaseLostError, TaskCancelledError } from './errors.js';
import { keepLeaseAlive, type TrackedLease } from './heartbeats.js';
import { NodeAnswerError, NodeClient } from './http.js';
import { Notifier } from './notifier.js';
import { compileWorkerOptions, MAX_TASKS_PER_REQUEST, stopTimeoutMs, type CompiledWorkerOptions } from './options.js';
import { abortAfterGrace, contextOf, newCounters, progressSender, runToOutcome } from './task-run.js';
import type { Worker, WorkerOptions, WorkerStats } from './types.js';
import { readPolledTasks, type WirePolledTask } from './wire.js';

/**
 * The HTTP worker: pollers that long-poll for at most as many tasks as there are free slots
 * (credit-based flow control, so a thundering herd waits in the node's ready queue and not
 * in worker memory), a handler call per task with its lease heartbeated, and a reporter
 * that sends results back in batches.
 */

type WorkerState = 'idle' | 'running' | 'stopping' | 'stopped';

/** A result is still worth delivering this long after its lease's last known expiry, ms. */
const DELIVERY_GRACE_MS = 5_000;
/** An empty poll answer faster than this did not wait on the node: back off before the next one. */
const EMPTY_POLL_TOO_FAST_MS = 50;
/** Backoff step cap after empty answers (step 3: ≤ 800 ms), so an idle worker still notices work quickly. */
const EMPTY_POLL_MAX_STEP = 3;
/** Results awaiting delivery allowed per slot before polling pauses. */
const UNREPORTED_PER_SLOT = 2;

/**
 * Creates a worker that runs `taskTypes` tasks from the node at `url` (or the nodes of `urls`)
 * with `handler`: over a WebSocket channel by default (`channel-worker.ts`), or over the HTTP
 * worker endpoints with `transport: 'http'`. Nothing happens until `start()`.
 *
 * @example
 * ```ts
 * const worker = createWorker({
 *   url: 'http://127.0.0.1:7070',
 *   taskTypes: ['email.send'],
 *   concurrency: 20,
 *   handler: async ({ payload, signal }) => sendEmail(payload, { signal }),
 * });
 * worker.start();
 * process.on('SIGTERM', () => void worker.stop());
 * ```
 */
export function createWorker(options: WorkerOptions): Worker {
  const o = compileWorkerOptions(options);
  return o.transport === 'channel' ? createChannelWorker(o, createHttpWorker) : createHttpWorker(o);
}

/** The worker over the HTTP endpoints, at `o.url`. */
export function createHttpWorker(o: CompiledWorkerOptions): Worker {
  const client = new NodeClient(o.url, o.token, o.connections);
  const changed = new Notifier();
  const pollAbort = new AbortController();
  const handlers = new Set<Promise<void>>();
  /** Running tasks' controllers, by task id: what `stop({ timeoutMs })` aborts. */
  const controllers = new Map<string, AbortController>();
  const counters = newCounters();
  let state: WorkerState = 'idle';
  let running = 0;
  /** Slots promised to polls in flight. */
  let reserved = 0;
  let pollers: Promise<void>[] = [];
  let stopping: Promise<void> | undefined;

  const reporter = new CompletionReporter({
    client,
    options: o.batch,
    onError: o.onError,
    onSettled(accepted, discarded, answered) {
      if (answered) counters.completionRequests++;
      counters.reported += accepted;
      counters.discarded += discarded;
      changed.notify();
    },
  });

  const perPollMax = Math.min(MAX_TASKS_PER_REQUEST, Math.ceil(o.concurrency / o.pollers));
  const freeSlots = (): number => o.concurrency - running - reserved;
  // Results not yet delivered also hold credit back, so a node slow to take results is not
  // handed ever more tasks whose results would pile up here. Up to two slots' worth may be
  // out, so one batch of results can be in flight while the next poll is.
  const hasCredit = (): boolean => freeSlots() > 0 && reporter.unreported < UNREPORTED_PER_SLOT * o.concurrency;

  async function pollLoop(): Promise<void> {
    let failures = 0;
    let tooFast = 0;
    while (state === 'running') {
      if (!hasCredit()) {
        await changed.wait();
        continue;
      }
      const maxTasks = Math.min(freeSlots(), perPollMax);
      reserved += maxTasks;
      const sentMs = Date.now();
      let tasks: WirePolledTask[];
      try {
        const answer = await client.post(
          '/api/workers/poll',
          { worker_id: o.workerId, task_types: o.taskTypes, max_tasks: maxTasks, wait_ms: o.pollWaitMs },
          pollAbort.signal,
        );
        if (answer.status !== 200) throw NodeAnswerError.from('/api/workers/poll', answer);
        tasks = readPolledTasks(answer.body);
        counters.polls++;
        failures = 0;
      } catch (error) {
        reserved -= maxTasks;
        if (state !== 'running') return;
        o.onError(error, 'poll');
        const retryAfterMs = error instanceof NodeAnswerError ? error.retryAfterMs : null;
        await sleep(retryAfterMs ?? backoffMs(failures++), pollAbort.signal);
        continue;
      }
      reserved -= maxTasks;
      for (const task of tasks) runTask(task);
      changed.notify();
      if (tasks.length === 0 && Date.now() - sentMs < EMPTY_POLL_TOO_FAST_MS) {
        await sleep(backoffMs(Math.min(tooFast++, EMPTY_POLL_MAX_STEP)), pollAbort.signal);
      } else {
        tooFast = 0;
      }
    }
  }

  function runTask(task: WirePolledTask): void {
    running++;
    counters.started++;
    const controller = new AbortController();
    controllers.set(task.task_id, controller);
    const lease: TrackedLease = {
      taskId: task.task_id,
      leaseToken: task.lease_token,
      leaseExpiresMs: Date.parse(task.lease_expires_at),
      lost: false,
    };
    const heartbeats = keepLeaseAlive(lease, {
      client,
      everyMs: o.heartbeatEveryMs,
      onError: o.onError,
      onLost(l) {
        counters.leasesLost++;
        controller.abort(new LeaseLostError(l.taskId));
      },
      onCancelRequested(l) {
        controller.abort(new TaskCancelledError(l.taskId));
      },
    });
    const progress = progressSender(task.task_id, o, (value) => heartbeats.progress(value));
    const run = (async () => {
      const { outcome, resultBytes } = await runToOutcome(
        o.handler,
        contextOf(task, controller.signal, progress),
        o.maxResultBytes,
      );
      if (outcome.status === 'succeeded') counters.succeeded++;
      else counters.failed++;
      heartbeats.stop();
      controllers.delete(task.task_id);
      running--;
      if (lease.lost) {
        // The node has handed the task on; it would refuse this result with 409.
        counters.discarded++;
      } else {
        reporter.add({
          wire: { task_id: task.task_id, lease_token: task.lease_token, ...outcome },
          deadlineMs: lease.leaseExpiresMs + DELIVERY_GRACE_MS,
          resultBytes,
        });
      }
      changed.notify();
    })();
    handlers.add(run);
    void run.finally(() => handlers.delete(run));
  }

  return {
    workerId: o.workerId,
    start() {
      if (state !== 'idle') return;
      state = 'running';
      pollers = Array.from({ length: o.pollers }, () =>
        pollLoop().catch((error: unknown) => o.onError(error, 'poll loop stopped')),
      );
    },
    stop(options = {}) {
      const graceMs = stopTimeoutMs(options.timeoutMs);
      stopping ??= (async () => {
        state = 'stopping';
        pollAbort.abort();
        changed.notify();
        const disarm = graceMs === undefined ? undefined : abortAfterGrace(controllers, graceMs);
        await Promise.all(pollers);
        while (handlers.size > 0) await Promise.all(handlers);
        disarm?.();
        await reporter.drain();
        await client.close();
        state = 'stopped';
      })();
      return stopping;
    },
    get stats(): WorkerStats {
      return { ...counters, running, unreported: reporter.unreported };
    },
  };
}
