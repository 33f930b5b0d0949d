import { FakeClock, type Cancel, type Clock } from '../../src/runtime/clock.js';

/**
 * A wall clock that can be set back, over timers that keep running: what a process sees when
 * NTP steps its clock. `now()` reads the wall clock; timers are Node's, which count elapsed
 * time, so a timer set for 1 s still runs 1 s later, when the wall clock may read 29 s
 * before the time it was meant for.
 *
 * (`FakeClock.set` to an earlier time is the other model: timers due at a wall time, which
 * run when the clock reads that time again. Tests of a backwards step try both.)
 */
export class SteppedWallClock implements Clock {
  /** Elapsed time, which drives the timers; it only moves forward. */
  readonly elapsed: FakeClock;
  private offsetMs = 0;

  constructor(startMs: number) {
    this.elapsed = new FakeClock(startMs);
  }

  now(): number {
    return this.elapsed.now() + this.offsetMs;
  }

  setTimer(delayMs: number, fn: () => void): Cancel {
    return this.elapsed.setTimer(delayMs, fn);
  }

  /** Lets `ms` pass, running the timers that fall due. */
  advance(ms: number): Promise<void> {
    return this.elapsed.advance(ms);
  }

  /** Steps the wall clock by `ms` (negative: back); no time passes and no timer runs. */
  step(ms: number): void {
    this.offsetMs += ms;
  }
}

/** A clock a test can move forward and set back. */
export interface BackwardsClock {
  clock: Clock;
  /** Lets `ms` pass, running due timers. */
  advance(ms: number): Promise<void>;
  /** Sets the wall clock back by `ms`. */
  back(ms: number): Promise<void>;
}

/** The two models of a clock set back; see {@link SteppedWallClock}. */
export const CLOCK_BACK_MODELS: { name: string; make(startMs: number): BackwardsClock }[] = [
  {
    name: 'timers at wall times (FakeClock set back)',
    make(startMs) {
      const clock = new FakeClock(startMs);
      return { clock, advance: (ms) => clock.advance(ms), back: (ms) => clock.set(clock.now() - ms) };
    },
  },
  {
    name: 'timers on elapsed time (the wall clock stepped back)',
    make(startMs) {
      const clock = new SteppedWallClock(startMs);
      return { clock, advance: (ms) => clock.advance(ms), back: async (ms) => clock.step(-ms) };
    },
  },
];
