import type { DueEntry } from '../domain/model.js';

/**
 * How long a key's answer that it is open (`LimitGrant.openRoom`) is trusted, ms. The keys of a
 * busy node answer many times a second; a key nobody claimed from lately is offered to first.
 */
export const OPEN_TRUSTED_MS = 1_000;
/** An entry pushed straight that no claim here asked about in this long no longer counts. */
export const STRAIGHT_TTL_MS = 30_000;
/**
 * A room so large that the ready queue does not meet it between two answers (a claim asks
 * about at most a statement's rows): what was pushed straight since the last answer is
 * counted, not which tasks — a map of 50 000 ids, each set and then deleted, was 2–3 µs of a
 * non-binding key's task (W1L; decision 0051).
 */
export const VAST_ROOM = 100_000;

/** What a gate knows of an open key. */
interface OpenKey {
  /** The key's `openRoom` at its last answer. */
  room: number;
  untilMs: number;
  /** Entries pushed straight since, not yet asked about by a claim here, with when. */
  pushed: Map<string, number>;
  /** Of a vast room: how many were pushed straight since the key's last answer. */
  counted: number;
}

/**
 * The keys that told a node's gate they are open (fast admission,
 * docs/decisions/0023-flow-control.md): each key's room at its last answer, less what the gate
 * pushed straight since that no claim here has asked the key about yet.
 */
export class OpenKeys {
  private readonly open = new Map<string, OpenKey>();
  /** When `open` is next swept of the answers no longer trusted. */
  private sweepAtMs = 0;

  /** How many more entries of `key` may go straight now (0: offer them). */
  room(key: string, now: number): number {
    const open = this.open.get(key);
    if (open === undefined) return 0;
    if (now >= open.untilMs) {
      this.open.delete(key);
      return 0;
    }
    for (const [id, at] of open.pushed) {
      if (now - at <= STRAIGHT_TTL_MS) break; // oldest first
      open.pushed.delete(id);
    }
    return open.room - open.pushed.size - open.counted;
  }

  /** `entries` of `key` went straight (the key had `room` for them). */
  pushed(key: string, entries: readonly DueEntry[], now: number): void {
    const open = this.open.get(key) as OpenKey;
    if (open.room >= VAST_ROOM) open.counted += entries.length;
    else for (const entry of entries) open.pushed.set(entry.taskId, now);
  }

  /** An entry of `key` that went straight was not pushed after all (the push failed). */
  notPushed(key: string, taskId: string): void {
    const open = this.open.get(key);
    if (open !== undefined && !open.pushed.delete(taskId) && open.counted > 0) open.counted--;
  }

  /** The key answered a claim here: what it said of its room, and the entries it was asked about. */
  answered(key: string, entries: readonly DueEntry[], openRoom: number | null, now: number): void {
    const open = this.open.get(key);
    if (open && open.pushed.size > 0) for (const entry of entries) open.pushed.delete(entry.taskId);
    if (open) open.counted = 0;
    if (openRoom === null || openRoom <= 0) {
      if (open && open.pushed.size === 0) this.open.delete(key);
      else if (open) open.room = 0;
      return;
    }
    if (open) {
      open.room = openRoom;
      open.untilMs = now + OPEN_TRUSTED_MS;
    } else {
      this.sweep(now);
      this.open.set(key, { room: openRoom, untilMs: now + OPEN_TRUSTED_MS, pushed: new Map(), counted: 0 });
    }
  }

  /** How many keys an answer is held of. */
  get size(): number {
    return this.open.size;
  }

  /**
   * Forgets the keys whose answer is no longer trusted, at most once a trust period: a key
   * that answered once and was never routed again (one of a million `customer:<id>`) would
   * otherwise stay here for good. `room` forgets them too, but only the keys it is asked of.
   */
  private sweep(now: number): void {
    if (now < this.sweepAtMs) return;
    this.sweepAtMs = now + OPEN_TRUSTED_MS;
    for (const [key, open] of this.open) if (now >= open.untilMs) this.open.delete(key);
  }
}
