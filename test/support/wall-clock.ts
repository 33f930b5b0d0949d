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
