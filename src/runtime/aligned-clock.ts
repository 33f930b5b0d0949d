import type { Cancel, Clock } from './clock.js';

/**
 * How far two samples may disagree beyond their round trips before the later one is taken to
 * show a step of the reference clock, ms: the drift of two clocks over a window of samples
 * (100 ppm over 8 samples 5 s apart is 4 ms) with room to spare.
 */
const DRIFT_SLACK_MS = 25;

/**
 * A clock that reads time as a reference clock does — in a cluster, the database's — by
 * adding an offset measured against it: each sample reads the reference once between two
 * monotonic readings and takes `reference − midpoint` as the offset, good to within
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
  private samples: { offsetMs: number; rttMs: number }[] = [];
  private readonly window: number;
  private readonly elapsed: () => number;

  /**
   * @param base the node's own clock: its timers, and its time until the first sample
   * @param reference reads the reference clock, Unix ms
   * @param options.window how many recent samples the best one is chosen from. @default 8
   * @param options.elapsed a monotonic reading, ms, that the offset is measured against: a
   *   step of the machine's wall clock (an operator, NTP) does not move it, so it does not
   *   move this clock either. @default `performance.now()`
   */
  constructor(
    private readonly base: Clock,
    private readonly reference: () => Promise<number>,
    options: { window?: number; elapsed?: () => number } = {},
  ) {
    this.window = options.window ?? 8;
    this.elapsed = options.elapsed ?? (() => performance.now());
  }

  now(): number {
    // Whole milliseconds, as Date.now(): the monotonic reading has fractions.
    return this.samples.length === 0 ? this.base.now() : Math.floor(this.elapsed() + this.offset);
  }

  setTimer(delayMs: number, fn: () => void): Cancel {
    return this.base.setTimer(delayMs, fn);
  }

  /** How far this clock is from the node's own clock, ms: what an operator's "clock off by" means. */
  get ownSkewMs(): number {
    return this.samples.length === 0 ? 0 : Math.round(this.now() - this.base.now());
  }

  /** The round trip of the sample in use, ms (Infinity before the first). */
  get rttMs(): number {
    return this.rtt;
  }

  /**
   * Reads the reference once and re-chooses the offset. A sample that disagrees with the one
   * in use by more than both could be off (half of each round trip, and drift) means the
   * reference clock was stepped: the samples before it no longer describe it and are dropped,
   * however short their round trips were. Rejects when the reference does.
   */
  async sample(): Promise<void> {
    const before = this.elapsed();
    const referenceMs = await this.reference();
    const after = this.elapsed();
    const sample = { offsetMs: referenceMs - (before + after) / 2, rttMs: after - before };
    const inUse = this.samples.length === 0 ? undefined : { offsetMs: this.offset, rttMs: this.rtt };
    const stepped =
      inUse !== undefined &&
      Math.abs(sample.offsetMs - inUse.offsetMs) > (sample.rttMs + inUse.rttMs) / 2 + DRIFT_SLACK_MS;
    if (stepped) this.samples = [];
    this.samples.push(sample);
    if (this.samples.length > this.window) this.samples.shift();
    let best = this.samples[0]!;
    for (const s of this.samples) if (s.rttMs < best.rttMs) best = s;
    this.offset = Math.round(best.offsetMs);
    this.rtt = best.rttMs;
  }
}
