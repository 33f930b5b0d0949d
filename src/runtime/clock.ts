/**
 * Time as the runtime sees it. Everything that reads the time or waits takes a `Clock`,
 * so tests drive time with {@link FakeClock} instead of sleeping.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /**
   * Runs `fn` once after `delayMs` (clamped to 0 … 2³¹−1 ms). A volatile timer: it is lost
   * when the process dies. Returns a function that cancels it.
   */
  setTimer(delayMs: number, fn: () => void): Cancel;
}

/** Cancels a timer; calling it twice, or after the timer ran, does nothing. */
export type Cancel = () => void;

/** The largest delay `setTimeout` honours; longer ones fire at once in Node. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export function clampDelay(delayMs: number): number {
  if (!Number.isFinite(delayMs) || delayMs < 0) return 0;
  return Math.min(delayMs, MAX_TIMER_MS);
}

/** The wall clock and Node's timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(delayMs, fn) {
    const handle = setTimeout(fn, clampDelay(delayMs));
    return () => clearTimeout(handle);
  },
};

interface FakeTimer {
  readonly id: number;
  readonly atMs: number;
  readonly fn: () => void;
}

/**
 * A clock that moves only when told. `advance` runs every timer that falls due on the way,
 * in due order, letting pending promise callbacks settle between timers. It can also jump
 * backwards (`set` to an earlier time), as a wall clock does when NTP corrects it.
 */
export class FakeClock implements Clock {
  private nowMs: number;
  private nextId = 1;
  private timers: FakeTimer[] = [];

  constructor(startMs = Date.UTC(2026, 10, 30, 12, 0, 0)) {
    this.nowMs = startMs;
  }

  now(): number {
    return this.nowMs;
  }

  setTimer(delayMs: number, fn: () => void): Cancel {
    const timer = { id: this.nextId++, atMs: this.nowMs + clampDelay(delayMs), fn };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t.id !== timer.id);
    };
  }

  /** Timers not yet run. */
  get pendingTimers(): number {
    return this.timers.length;
  }

  /** Moves time forward by `ms`, firing due timers in order. */
  async advance(ms: number): Promise<void> {
    await this.advanceTo(this.nowMs + ms);
  }

  /** Moves time forward to `targetMs`, firing due timers in order. */
  async advanceTo(targetMs: number): Promise<void> {
    for (;;) {
      const next = this.earliest();
      if (next === undefined || next.atMs > targetMs) break;
      this.timers = this.timers.filter((t) => t.id !== next.id);
      this.nowMs = Math.max(this.nowMs, next.atMs);
      next.fn();
      await settle();
    }
    this.nowMs = Math.max(this.nowMs, targetMs);
    await settle();
  }

  /** Sets the time outright, backwards included. Fires timers that are now due. */
  async set(ms: number): Promise<void> {
    this.nowMs = ms;
    await this.advanceTo(ms);
  }

  private earliest(): FakeTimer | undefined {
    let best: FakeTimer | undefined;
    for (const t of this.timers) if (best === undefined || t.atMs < best.atMs) best = t;
    return best;
  }
}

/** Lets queued promise callbacks and I/O callbacks run. */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** `base` read `offsetMs` later (a clock set wrong, for tests of skew); the same timers. */
export function offsetClock(base: Clock, offsetMs: number): Clock {
  if (offsetMs === 0) return base;
  return { now: () => base.now() + offsetMs, setTimer: (delayMs, fn) => base.setTimer(delayMs, fn) };
}
