import type { WireProgress, WorkerFrame } from './channel-wire.js';

/**
 * What the channel worker sends in `progress` frames: the running tasks' `ctx.progress` values
 * and their `ctx.extendDeadline` requests.
 *
 * A progress value waits `PROGRESS_LINGER_MS` for later ones to replace it (the latest of each
 * task wins), then the waiting values share frames of at most `maxBatchSize` updates.
 *
 * An extension goes out at once, in an update of its own (`extend_seconds`), and waits for the
 * node's `extended` answer; the node answers a socket's updates in order, so each answer
 * settles the oldest update of that task still unanswered. While no welcomed socket is open,
 * values and extensions wait for the next one; extensions sent on a socket that was lost before
 * it answered are sent again there (asking twice for "at least now + n" is harmless).
 */

/** A progress value waits this long for later ones to replace it before it is sent, ms. */
const PROGRESS_LINGER_MS = 250;

/** One `ctx.extendDeadline` call waiting for the node's answer. */
interface Extension {
  readonly seconds: number;
  resolve(deadlineMs: number): void;
  reject(error: Error): void;
}

/** A task's extensions: not sent yet, and sent (one group per update, oldest first). */
interface TaskExtensions {
  readonly leaseToken: string;
  unsent: Extension[];
  sent: Extension[][];
}

export class ChannelProgress {
  /** The latest progress of running tasks, not sent yet, by task id. */
  private readonly outbox = new Map<string, WireProgress>();
  /** Extensions not answered yet, by task id. */
  private readonly extensions = new Map<string, TaskExtensions>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly maxBatchSize: number,
    /** How to send a frame now, or null while no welcomed socket is open. */
    private readonly outlet: () => ((frame: WorkerFrame) => void) | null,
  ) {}

  /** Takes a task's latest value (replacing one not sent yet) and arms the linger. */
  set(update: WireProgress): void {
    this.outbox.set(update.task_id, update);
    this.timer ??= setTimeout(() => this.flush(), PROGRESS_LINGER_MS);
  }

  /** Forgets a task's value not sent yet (its result says more, or its lease is gone). */
  drop(taskId: string): void {
    this.outbox.delete(taskId);
  }

  /** Asks for a task's deadline to become at least now + `seconds`, at once; resolves with the deadline granted (Unix ms). */
  extend(taskId: string, leaseToken: string, seconds: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const task = this.extensions.get(taskId) ?? { leaseToken, unsent: [], sent: [] };
      this.extensions.set(taskId, task);
      task.unsent.push({ seconds, resolve, reject });
      const send = this.outlet();
      if (send !== null) this.sendIn(send, this.extensionUpdates());
    });
  }

  /** The node's `extended` answer for a task: settles its oldest unanswered update. */
  extended(taskId: string, deadlineMs: number): void {
    const task = this.extensions.get(taskId);
    for (const x of task?.sent.shift() ?? []) x.resolve(deadlineMs);
    if (task !== undefined && task.sent.length === 0 && task.unsent.length === 0) this.extensions.delete(taskId);
  }

  /** A task's attempt is over: its unanswered extensions reject with `end`, or resolve with it (the deadline last known). */
  endExtensions(taskId: string, end: Error | number): void {
    const task = this.extensions.get(taskId);
    if (task === undefined) return;
    this.extensions.delete(taskId);
    for (const x of [...task.sent.flat(), ...task.unsent]) {
      if (typeof end === 'number') x.resolve(end);
      else x.reject(end);
    }
  }

  /** The socket is gone: extensions it did not answer are sent again on the next one. */
  requeue(): void {
    for (const task of this.extensions.values()) {
      task.unsent = [...task.sent.flat(), ...task.unsent];
      task.sent = [];
    }
  }

  /** Sends every waiting value and extension, if a welcomed socket is open. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const send = this.outlet();
    if (send === null) return;
    const updates = this.extensionUpdates();
    for (const update of updates) {
      // One update per task and frame: a waiting value rides with the task's extension.
      const waiting = this.outbox.get(update.task_id);
      if (waiting !== undefined) update.progress = waiting.progress;
      this.outbox.delete(update.task_id);
    }
    updates.push(...this.outbox.values());
    this.outbox.clear();
    this.sendIn(send, updates);
  }

  /** The worker has stopped: no linger left armed. */
  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** One update per task with extensions not sent yet, asking for the most seconds among them; they count as sent. */
  private extensionUpdates(): WireProgress[] {
    const updates: WireProgress[] = [];
    for (const [taskId, task] of this.extensions) {
      if (task.unsent.length === 0) continue;
      const seconds = Math.max(...task.unsent.map((x) => x.seconds));
      updates.push({ task_id: taskId, lease_token: task.leaseToken, extend_seconds: seconds });
      task.sent.push(task.unsent);
      task.unsent = [];
    }
    return updates;
  }

  private sendIn(send: (frame: WorkerFrame) => void, updates: WireProgress[]): void {
    for (let i = 0; i < updates.length; i += this.maxBatchSize)
      send({ type: 'progress', updates: updates.slice(i, i + this.maxBatchSize) });
  }
}
