import type WebSocket from 'ws';

import { sleep } from './backoff.js';
import {
  ChannelError,
  readNodeFrame,
  type NodeFrame,
  type WireLease,
  type WireProgress,
  type WorkerFrame,
} from './channel-wire.js';
import { keepConnected } from './channel-socket.js';
import { ChannelResults } from './channel-results.js';
import { LeaseLostError, TaskCancelledError, UpgradeRefusedError } from './errors.js';
import { Notifier } from './notifier.js';
import { stopTimeoutMs, type CompiledWorkerOptions } from './options.js';
import { abortAfterGrace, contextOf, newCounters, progressSender, runToOutcome } from './task-run.js';
import type { Worker, WorkerStats } from './types.js';
import { ProtocolError, type WirePolledTask } from './wire.js';

/**
 * The worker on the channel (API.md "Workers as remote actors"): one WebSocket to a node, over
 * which the node pushes tasks and the worker sends results back.
 *
 * Credit: `hello` grants as many credits as there are free slots; each pushed task uses one;
 * a finished task frees its slot and the slot is granted again (a `credit` frame) with the
 * next batch of results, so the tasks running plus the credit outstanding never exceed
 * `concurrency`. A task pushed beyond the credit is not run: it is reported failed and
 * retryable, and the node is told so through `onError`. Results not yet acknowledged also
 * hold credit back (at most two slots' worth may be out), so a node slow to take results is
 * not handed ever more tasks whose results would pile up here.
 *
 * Results of tasks that finish within `batchCompletions.lingerMs` of each other share one
 * `results` frame; `ctx.progress` values wait 250 ms, the latest of each task winning, and
 * share a `progress` frame. No heartbeats: the node keeps every lease of the worker alive while the
 * socket lives, and the worker pings it to notice a node that went away without closing.
 *
 * Reconnect: a lost socket is replaced by one to the next node of `urls`, with backoff. Its
 * `hello` lists in `resume` the leases the worker still holds (running tasks, and finished
 * ones whose results are not acknowledged yet); results not acknowledged on the old socket
 * are sent again on the new one, and the node acknowledges `ok: false` those it can no longer
 * take (counted as discarded). A welcome whose `resumed` list leaves a running task out means
 * its lease is gone: the task's signal is aborted with a `LeaseLostError`.
 *
 * Stop: `goodbye` (no more tasks), running handlers finish (or are aborted after
 * `timeoutMs`), their results go out, and the worker waits for the acks while the socket
 * lives (and the node acknowledges something at least every 10 s). It does not reconnect
 * once stopping: results that could not be delivered are counted as discarded, and the node
 * hands their tasks on when their leases run out.
 */

type ChannelState = 'idle' | 'running' | 'stopping' | 'stopped';

/** A task this worker runs. */
interface RunningTask {
  readonly leaseToken: string;
  readonly controller: AbortController;
  /** The node said the lease is no longer this worker's: the result will be dropped. */
  lost: boolean;
}

/** Ping period when the node's welcome names none, ms. */
const DEFAULT_HEARTBEAT_MS = 5_000;
/** A progress value waits this long for later ones to replace it before it is sent, ms. */
const PROGRESS_LINGER_MS = 250;
/** Results awaiting acknowledgement allowed per slot before credit is held back. */
const UNREPORTED_PER_SLOT = 2;
/** While stopping, how long the worker waits for an ack before it gives the node up, ms. */
const ACK_PATIENCE_MS = 10_000;
const OPEN = 1; // WebSocket.OPEN, without a value import of the class here

/** Creates the channel worker; `httpWorker` builds the HTTP one it falls back to against a node without the channel. */
export function createChannelWorker(
  o: CompiledWorkerOptions,
  httpWorker: (o: CompiledWorkerOptions) => Worker,
): Worker {
  const counters = newCounters();
  const running = new Map<string, RunningTask>();
  /** The running tasks' controllers, for `stop({ timeoutMs })`. */
  const controllers = new Map<string, AbortController>();
  const handlers = new Set<Promise<void>>();
  const results = new ChannelResults(o.batch.maxBatchSize);
  /** The latest progress of running tasks, not sent yet, by task id. */
  const progressOutbox = new Map<string, WireProgress>();
  let progressTimer: NodeJS.Timeout | undefined;
  const changed = new Notifier();
  const connectAbort = new AbortController();

  let state: ChannelState = 'idle';
  /** The socket `hello` went out on (welcomed or not yet), null between sockets. */
  let socket: WebSocket | null = null;
  let welcomed = false;
  let everWelcomed = false;
  /** Credit granted on `socket` that no pushed task has used yet. */
  let outstanding = 0;
  let flushTimer: NodeJS.Timeout | undefined;
  let connecting: Promise<void> | undefined;
  let stopping: Promise<void> | undefined;
  let fallback: Worker | undefined;

  const send = (ws: WebSocket, frame: WorkerFrame): void => {
    // A send on a socket that is closing fails quietly here; its 'close' handles what was lost.
    if (ws.readyState === OPEN) ws.send(JSON.stringify(frame), () => undefined);
  };

  /** Credit the worker can grant now: free slots not yet granted, unless results are piling up or it is stopping. */
  const grantable = (): number => {
    if (state !== 'running') return 0;
    if (results.size >= UNREPORTED_PER_SLOT * o.concurrency) return 0;
    return Math.max(0, o.concurrency - running.size - outstanding);
  };

  function fallBackToHttp(error: UpgradeRefusedError): void {
    o.onError(
      new Error(`${error.message}: the node has no worker channel, so this worker falls back to HTTP long-poll`, {
        cause: error,
      }),
      'connecting',
    );
    fallback = httpWorker(o);
    fallback.start();
  }

  /** Runs one socket from `hello` to its close; resolves with whether the node welcomed it. */
  function session(ws: WebSocket, base: string): Promise<boolean> {
    return new Promise((resolve) => {
      let sawWelcome = false;
      let heard = true;
      let pinger: NodeJS.Timeout | undefined;
      ws.on('error', (error) => o.onError(error, `channel to ${base}`));
      ws.on('ping', () => (heard = true));
      ws.on('pong', () => (heard = true));
      ws.on('message', (data: WebSocket.RawData) => {
        heard = true;
        let frame: NodeFrame | null;
        try {
          frame = readNodeFrame(text(data));
        } catch (error) {
          o.onError(error, `channel to ${base}`);
          ws.terminate();
          return;
        }
        if (frame === null) return;
        if (frame.type === 'welcome') {
          sawWelcome = true;
          const everyMs = frame.heartbeat_ms ?? DEFAULT_HEARTBEAT_MS;
          // No frame, ping or pong from the node for a whole period: it is gone without closing.
          pinger = setInterval(() => {
            if (!heard) return ws.terminate();
            heard = false;
            ws.ping();
          }, everyMs);
        }
        handle(ws, frame);
      });
      ws.on('close', () => {
        clearInterval(pinger);
        if (socket === ws) socketGone();
        resolve(sawWelcome);
      });
      socket = ws;
      welcomed = false;
      outstanding = state === 'running' ? Math.max(0, o.concurrency - running.size) : 0;
      send(ws, {
        type: 'hello',
        worker_id: o.workerId,
        task_types: o.taskTypes,
        credits: outstanding,
        resume: heldLeases(),
      });
    });
  }

  /** Leases still held: running tasks not lost, and finished ones whose results wait for an ack. */
  function heldLeases(): WireLease[] {
    const leases = new Map<string, WireLease>();
    for (const [taskId, t] of running) if (!t.lost) leases.set(taskId, { task_id: taskId, lease_token: t.leaseToken });
    for (const lease of results.leases()) leases.set(lease.task_id, lease);
    return [...leases.values()];
  }

  function socketGone(): void {
    socket = null;
    welcomed = false;
    outstanding = 0;
    // Results the node may not have seen are sent again on the next socket.
    results.requeue();
    changed.notify();
  }

  function handle(ws: WebSocket, frame: NodeFrame): void {
    switch (frame.type) {
      case 'welcome':
        welcomed = true;
        if (everWelcomed) counters.reconnects++;
        everWelcomed = true;
        if (frame.resumed !== null) {
          for (const [taskId, t] of running) if (!frame.resumed.has(taskId)) loseLease(taskId, t);
        }
        if (state === 'stopping') send(ws, { type: 'goodbye' });
        flush();
        flushProgress();
        return;
      case 'tasks':
        for (const task of frame.tasks) {
          if (running.has(task.task_id)) {
            o.onError(new ProtocolError(`task ${task.task_id} was pushed while it already runs here`), 'channel');
          } else if (outstanding <= 0) {
            o.onError(
              new ProtocolError(`task ${task.task_id} was pushed beyond the credit granted: not run`),
              'channel',
            );
            results.add({
              task_id: task.task_id,
              lease_token: task.lease_token,
              status: 'failed',
              error: 'pushed to the worker beyond the credit it granted; not run',
              retryable: true,
            });
            scheduleFlush();
          } else {
            outstanding--;
            runTask(task);
          }
        }
        return;
      case 'acks':
        {
          const { accepted, refused } = results.ack(frame.acks);
          counters.reported += accepted;
          counters.discarded += refused;
        }
        // Room for results again may mean room for credit again.
        if (grantable() > 0) scheduleFlush();
        changed.notify();
        return;
      case 'cancel':
        for (const taskId of frame.task_ids) running.get(taskId)?.controller.abort(new TaskCancelledError(taskId));
        return;
      case 'lease_lost':
        for (const taskId of frame.task_ids) {
          const t = running.get(taskId);
          if (t !== undefined) loseLease(taskId, t);
          else if (results.dropWaiting(taskId)) {
            counters.leasesLost++;
            counters.discarded++;
          }
        }
        changed.notify();
        return;
      case 'error':
        o.onError(new ChannelError(frame.error.code, frame.error.message), 'channel');
        return;
    }
  }

  function loseLease(taskId: string, t: RunningTask): void {
    if (t.lost) return;
    t.lost = true;
    progressOutbox.delete(taskId);
    counters.leasesLost++;
    t.controller.abort(new LeaseLostError(taskId));
  }

  function runTask(task: WirePolledTask): void {
    const controller = new AbortController();
    const entry: RunningTask = { leaseToken: task.lease_token, controller, lost: false };
    running.set(task.task_id, entry);
    controllers.set(task.task_id, controller);
    counters.started++;
    const progress = progressSender(task.task_id, o, (value) => {
      if (entry.lost || !running.has(task.task_id)) return;
      progressOutbox.set(task.task_id, { task_id: task.task_id, lease_token: task.lease_token, progress: value });
      progressTimer ??= setTimeout(flushProgress, PROGRESS_LINGER_MS);
    });
    const run = (async () => {
      const { outcome } = await runToOutcome(o.handler, contextOf(task, controller.signal, progress), o.maxResultBytes);
      if (outcome.status === 'succeeded') counters.succeeded++;
      else counters.failed++;
      running.delete(task.task_id);
      controllers.delete(task.task_id);
      progressOutbox.delete(task.task_id); // the result says more
      // The node has handed a lost task on; it would refuse this result.
      if (entry.lost) counters.discarded++;
      else results.add({ task_id: task.task_id, lease_token: task.lease_token, ...outcome });
      scheduleFlush();
      changed.notify();
    })();
    handlers.add(run);
    void run.finally(() => handlers.delete(run));
  }

  /** Sends the latest progress of each running task that reported some, in frames of at most `maxBatchSize`. */
  function flushProgress(): void {
    clearTimeout(progressTimer);
    progressTimer = undefined;
    const ws = socket;
    // Not connected: the latest values wait for the next welcome.
    if (ws === null || !welcomed || ws.readyState !== OPEN || progressOutbox.size === 0) return;
    const updates = [...progressOutbox.values()];
    progressOutbox.clear();
    for (let i = 0; i < updates.length; i += o.batch.maxBatchSize)
      send(ws, { type: 'progress', updates: updates.slice(i, i + o.batch.maxBatchSize) });
  }

  function scheduleFlush(): void {
    if (results.waitingCount >= o.batch.maxBatchSize || o.batch.lingerMs === 0) flush();
    else flushTimer ??= setTimeout(flush, o.batch.lingerMs);
  }

  /** Sends the waiting results (in frames of at most `maxBatchSize`) and the credit that can be granted. */
  function flush(): void {
    clearTimeout(flushTimer);
    flushTimer = undefined;
    const ws = socket;
    if (ws === null || !welcomed || ws.readyState !== OPEN) return;
    counters.resultFrames += results.send((text) => {
      if (ws.readyState === OPEN) ws.send(text, () => undefined);
    });
    const n = grantable();
    if (n > 0) {
      outstanding += n;
      send(ws, { type: 'credit', n });
    }
  }

  const unreported = (): number => results.size;

  return {
    workerId: o.workerId,
    start() {
      if (state !== 'idle') return;
      state = 'running';
      connecting = keepConnected({
        urls: o.urls,
        token: o.token,
        signal: connectAbort.signal,
        running: () => state === 'running',
        everWelcomed: () => everWelcomed,
        session,
        fallBack: fallBackToHttp,
        onError: o.onError,
      }).catch((error: unknown) => o.onError(error, 'channel loop stopped'));
    },
    stop(options = {}) {
      const graceMs = stopTimeoutMs(options.timeoutMs);
      stopping ??= (async () => {
        state = 'stopping';
        connectAbort.abort();
        if (socket !== null && welcomed) send(socket, { type: 'goodbye' });
        if (fallback !== undefined) await fallback.stop(options);
        const disarm = graceMs === undefined ? undefined : abortAfterGrace(controllers, graceMs);
        // Tasks pushed before the node read `goodbye` still arrive and run: loop until none runs
        // and every result is acknowledged, or the socket is gone.
        let lastAckMs = Date.now();
        for (;;) {
          while (handlers.size > 0) await Promise.all(handlers);
          flush();
          if (unreported() === 0 || socket === null) break;
          if (Date.now() - lastAckMs >= ACK_PATIENCE_MS) break; // a node that no longer answers
          const before = unreported();
          const patience = new AbortController();
          await Promise.race([changed.wait(), sleep(ACK_PATIENCE_MS, patience.signal)]);
          patience.abort();
          if (unreported() < before) lastAckMs = Date.now();
        }
        disarm?.();
        if (unreported() > 0) {
          // Undelivered: the node hands these tasks on when their leases run out.
          const dropped = unreported();
          counters.discarded += dropped;
          results.clear();
          o.onError(
            new Error(`${dropped} result(s) dropped: the node did not acknowledge them before the channel closed`),
            'stopping',
          );
        }
        const ws = socket;
        if (ws !== null) {
          const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
          ws.close(1000, 'worker stopped');
          await closed;
        }
        await connecting;
        clearTimeout(progressTimer);
        state = 'stopped';
      })();
      return stopping;
    },
    get stats(): WorkerStats {
      if (fallback !== undefined) return fallback.stats;
      return { ...counters, running: running.size, unreported: unreported() };
    },
  };
}

/** A message's bytes as text (ws hands over a Buffer, or fragments). */
function text(data: WebSocket.RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}
