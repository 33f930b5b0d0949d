import { backoffMs, sleep } from './backoff.js';
import { CompletionReporter, encodeWorkerJson } from './completions.js';
import { LeaseLostError, PermanentTaskError, TaskCancelledError } from './errors.js';
import { keepLeaseAlive, type TrackedLease } from './heartbeats.js';
import { NodeAnswerError, NodeClient } from './http.js';
import { Notifier } from './notifier.js';
import { compileWorkerOptions, MAX_TASKS_PER_REQUEST } from './options.js';
import type { Worker, WorkerOptions, WorkerStats } from './types.js';
import { readPolledTasks, type WirePolledTask, type WireResult } from './wire.js';

/**
 * The worker: pollers that long-poll for at most as many tasks as there are free slots
 * (credit-based flow control, so a thundering herd waits in the node's ready queue and not
 * in worker memory), a handler call per task with its lease heartbeated, and a reporter
 * that sends results back in batches.
 */

type WorkerState = 'idle' | 'running' | 'stopping' | 'stopped';

/** Most of an error message sent to the node (it keeps 4 KiB). */
const MAX_ERROR_CHARS = 4096;
/** A result is still worth delivering this long after its lease's last known expiry, ms. */
const DELIVERY_GRACE_MS = 5_000;
/** An empty poll answer faster than this did not wait on the node: back off before the next one. */
const EMPTY_POLL_TOO_FAST_MS = 50;
/** Backoff step cap after empty answers (step 3: ≤ 800 ms), so an idle worker still notices work quickly. */
const EMPTY_POLL_MAX_STEP = 3;
/** Results awaiting delivery allowed per slot before polling pauses. */
const UNREPORTED_PER_SLOT = 2;

/**
 * Creates a worker that runs `taskTypes` tasks from the node at `url` with `handler`.
 * Nothing happens until `start()`.
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
  const client = new NodeClient(o.url, o.token, o.connections);
  const changed = new Notifier();
  const pollAbort = new AbortController();
  const handlers = new Set<Promise<void>>();
  const counters = {
    started: 0,
    succeeded: 0,
    failed: 0,
    reported: 0,
    discarded: 0,
    leasesLost: 0,
    polls: 0,
    completionRequests: 0,
  };
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
    const progress = (value: unknown): void => {
      try {
        const encoded = encodeWorkerJson(value, o.maxResultBytes);
        if ('problem' in encoded) {
          o.onError(new TypeError(`progress ${encoded.problem}`), `progress of task ${task.task_id}, dropped`);
        } else {
          // A copy: what the handler changes after this call is not sent.
          heartbeats.progress(JSON.parse(encoded.json));
        }
      } catch (error) {
        o.onError(error, `progress of task ${task.task_id}`);
      }
    };
    const run = (async () => {
      let outcome: Omit<WireResult, 'task_id' | 'lease_token'>;
      let resultBytes = 0;
      try {
        const value = await o.handler({
          taskId: task.task_id,
          taskType: task.task_type,
          payload: task.payload ?? null,
          attempt: task.attempt,
          signal: controller.signal,
          progress,
        });
        outcome = { status: 'succeeded' };
        if (value !== undefined) {
          const encoded = encodeWorkerJson(value, o.maxResultBytes);
          if ('problem' in encoded) throw new PermanentTaskError(`the handler's result ${encoded.problem}`);
          outcome.result = value;
          resultBytes = encoded.bytes;
        }
        counters.succeeded++;
      } catch (error) {
        counters.failed++;
        outcome = { status: 'failed', error: messageOf(error), retryable: !isPermanent(error) };
      } finally {
        heartbeats.stop();
        running--;
      }
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
    stop() {
      stopping ??= (async () => {
        state = 'stopping';
        pollAbort.abort();
        changed.notify();
        await Promise.all(pollers);
        while (handlers.size > 0) await Promise.all(handlers);
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

function messageOf(error: unknown): string {
  const text = error instanceof Error ? error.message || error.name : String(error);
  return text.length > MAX_ERROR_CHARS ? text.slice(0, MAX_ERROR_CHARS) : text;
}

/** An error that says `retryable: false` fails the task for good. */
function isPermanent(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { retryable?: unknown }).retryable === false;
}
