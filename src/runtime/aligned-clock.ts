import type { Cancel, Clock } from './clock.js';

/**
 * A clock that reads time as a reference clock does — in a cluster, the database's — by
 * adding an offset measured against it: each sample reads the reference once between two
 * readings of the base clock and takes `reference − midpoint` as the offset, good to within
 * half the round trip. Of the last few samples the one with the shortest round trip is
 * used (a sample that waited in a queue is the least exact). Timers are the base clock's:
 * a delay is a duration on any clock.
 *
 * Every node that reads time this way agrees with every other to within its round trip to
 * the database, whatever its own clock says: the wheel fires, the claim compares and the
 * lease expires on one time, and times written to the task table mean the same to all.
 */
export class AlignedClock implements Clock {
  private offset = 0;
  private rtt = Infinity;
  private readonly samples: { offsetMs: number; rttMs: number }[] = [];

  /**
   * @param base the node's own clock
   * @param reference reads the reference clock, Unix ms
   * @param window how many recent samples the best one is chosen from. @default 8
   */
  constructor(
    private readonly base: Clock,
    private readonly reference: () => Promise<number>,
    private readonly window = 8,
  ) {}

  now(): number {
    return this.base.now() + this.offset;
  }

  setTimer(delayMs: number, fn: () => void): Cancel {
    return this.base.setTimer(delayMs, fn);
  }

  /** What is added to the base clock, ms (0 before the first sample). */
  get offsetMs(): number {
    return this.offset;
  }

  /** The round trip of the sample in use, ms (Infinity before the first). */
  get rttMs(): number {
    return this.rtt;
  }

  /** Reads the reference once and re-chooses the offset. Rejects when the reference does. */
  async sample(): Promise<void> {
    const before = this.base.now();
    const referenceMs = await this.reference();
    const after = this.base.now();
    this.samples.push({ offsetMs: referenceMs - (before + after) / 2, rttMs: after - before });
    if (this.samples.length > this.window) this.samples.shift();
    let best = this.samples[0]!;
    for (const s of this.samples) if (s.rttMs < best.rttMs) best = s;
    this.offset = Math.round(best.offsetMs);
    this.rtt = best.rttMs;
  }
}
