import { WheelhouseError } from '../lib/errors.js';

/**
 * The one budget of workers waiting on a node (docs/decisions/0021-one-budget-for-waiting-workers.md):
 * long-polls in flight and worker-channel sockets open count against `max` together
 * (`pollMaxConcurrent`), and the sockets alone against `maxSockets` (`workerSocketsMax`). Each
 * of them is woken by the pushes of its task types and rechecks the ready queues, whichever
 * way it waits, so a node bounds them as one.
 */
export class WorkerSlots {
  polls = 0;
  sockets = 0;

  constructor(
    readonly max: number,
    readonly maxSockets: number = max,
  ) {}

  /** Takes a poll's slot; throws 429 `too_many_polls` when there is none. */
  takePoll(): void {
    if (this.polls + this.sockets >= this.max) {
      throw new WheelhouseError(
        'too_many_polls',
        `this node holds ${this.polls} long-polls and ${this.sockets} worker sockets, the most it allows together ` +
          '(pollMaxConcurrent); retry later or poll another node',
        { retryAfterSeconds: 1, details: { limit: this.max } },
      );
    }
    this.polls++;
  }

  givePoll(): void {
    this.polls--;
  }

  /** Takes a socket's slot; null when taken, or why it is refused (`too_many_sockets`). */
  takeSocket(): string | null {
    if (this.sockets >= this.maxSockets)
      return `this node holds ${this.sockets} worker sockets, the most it allows (workerSocketsMax)`;
    if (this.polls + this.sockets >= this.max) {
      return (
        `this node holds ${this.sockets} worker sockets and ${this.polls} long-polls, the most it allows together ` +
        '(pollMaxConcurrent)'
      );
    }
    this.sockets++;
    return null;
  }

  giveSocket(): void {
    this.sockets--;
  }
}
