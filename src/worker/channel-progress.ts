import type { WireProgress, WorkerFrame } from './channel-wire.js';

/**
 * The channel worker's `ctx.progress` values on their way to the node: each waits
 * `PROGRESS_LINGER_MS` for later ones to replace it (the latest of each task wins), then the
 * waiting values share `progress` frames of at most `maxBatchSize` updates. While no welcomed
 * socket is open they wait for the next one.
 */

/** A progress value waits this long for later ones to replace it before it is sent, ms. */
const PROGRESS_LINGER_MS = 250;

export class ChannelProgress {
  /** The latest progress of running tasks, not sent yet, by task id. */
  private readonly outbox = new Map<string, WireProgress>();
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

  /** Sends every waiting value, if a welcomed socket is open. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const send = this.outlet();
    if (send === null || this.outbox.size === 0) return;
    const updates = [...this.outbox.values()];
    this.outbox.clear();
    for (let i = 0; i < updates.length; i += this.maxBatchSize)
      send({ type: 'progress', updates: updates.slice(i, i + this.maxBatchSize) });
  }

  /** The worker has stopped: no linger left armed. */
  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
