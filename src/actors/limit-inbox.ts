import type { DueEntry } from '../domain/model.js';

/**
 * Most offered entries a limit key takes in per message. A larger offer waits in its inbox
 * and is taken in this many at a time, one `absorb` message each, so that a claim's `grant`
 * waits behind one such slice and not behind a flood: at the top of the hour W6's key was
 * offered 200 000 due tasks in 64 messages, took 250 ms of turns to take them in, and a
 * claim of the one worker's socket waited 399 ms for its answer — and every quiet key's task
 * with it (the socket claims one batch at a time).
 */
export const ABSORB_SLICE = 1_024;

/** Offered entries a key has not taken in yet, in the order they came. */
export class LimitInbox {
  private lists: DueEntry[][] = [];
  /** Position in the first list. */
  private at = 0;
  private count = 0;
  /** An `absorb` message is on its way to the key. */
  private absorbing = false;

  get size(): number {
    return this.count;
  }

  /**
   * What the key takes in now: all of a small offer when nothing waits here before it, else
   * nothing (it waits here); the next slice for an `absorb`. The key's turn ends with
   * `askIfLeft`, which asks for the next slice.
   */
  takeIn(message: { type: 'offer'; entries: DueEntry[] } | { type: 'absorb' }): DueEntry[] {
    if (message.type === 'absorb') {
      this.absorbing = false;
      return this.take();
    }
    if (this.count === 0 && message.entries.length <= ABSORB_SLICE) return message.entries;
    this.lists.push(message.entries);
    this.count += message.entries.length;
    return [];
  }

  /** Asks for the next slice if any is left and no ask is on its way (the end of the key's every turn). */
  askIfLeft(askAgain: () => void): void {
    if (this.count === 0 || this.absorbing) return;
    try {
      askAgain();
      this.absorbing = true;
    } catch {
      // A full mailbox: the key's next turn asks again (the tasks are pending in the table).
    }
  }

  /** The next `max` entries, oldest first. */
  take(max: number = ABSORB_SLICE): DueEntry[] {
    const out: DueEntry[] = [];
    while (out.length < max && this.lists.length > 0) {
      const list = this.lists[0] as DueEntry[];
      const end = Math.min(list.length, this.at + (max - out.length));
      for (let i = this.at; i < end; i++) out.push(list[i] as DueEntry);
      this.at = end;
      if (this.at === list.length) {
        this.lists.shift();
        this.at = 0;
      }
    }
    this.count -= out.length;
    return out;
  }
}
