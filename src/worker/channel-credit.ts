/**
 * The channel worker's credit: how many tasks the node may still push on the current socket.
 * `hello` grants every free slot; each pushed task uses one credit; a finished task frees its
 * slot, which is granted again (a `credit` frame) with the next batch of results. So the tasks
 * running plus the credit outstanding never exceed `concurrency`. Results not acknowledged
 * yet also hold credit back (at most `UNREPORTED_PER_SLOT` slots' worth may be out), so a node
 * slow to take results is not handed ever more tasks whose results would pile up here.
 */

/** Results awaiting acknowledgement allowed per slot before credit is held back. */
const UNREPORTED_PER_SLOT = 2;

export class ChannelCredit {
  /** Credit granted on the current socket that no pushed task has used yet. */
  private outstanding = 0;

  constructor(private readonly concurrency: number) {}

  /** A new socket: its `hello` grants every free slot while the worker takes tasks, none otherwise. Returns the credits. */
  open(running: number, taking: boolean): number {
    this.outstanding = taking ? Math.max(0, this.concurrency - running) : 0;
    return this.outstanding;
  }

  /** The socket is gone, and the credit granted on it with it. */
  lose(): void {
    this.outstanding = 0;
  }

  /** A pushed task uses one credit; false when none was left (pushed beyond the credit: not to be run). */
  use(): boolean {
    if (this.outstanding <= 0) return false;
    this.outstanding--;
    return true;
  }

  /** Credit the worker can grant now: free slots not yet granted, unless results pile up or it takes no tasks. */
  grantable(running: number, unreported: number, taking: boolean): number {
    if (!taking) return 0;
    if (unreported >= UNREPORTED_PER_SLOT * this.concurrency) return 0;
    return Math.max(0, this.concurrency - running - this.outstanding);
  }

  /** Takes what `grantable` allows as granted and returns it (0: no `credit` frame to send). */
  grant(running: number, unreported: number, taking: boolean): number {
    const n = this.grantable(running, unreported, taking);
    this.outstanding += n;
    return n;
  }
}
