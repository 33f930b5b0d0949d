import { describe, expect, it } from 'vitest';
import { AlignedClock } from '../../src/runtime/aligned-clock.js';
import type { Clock } from '../../src/runtime/clock.js';

/**
 * A machine: a wall clock that can be stepped, a monotonic clock that cannot, and a database
 * whose clock runs `dbAheadMs` ahead of the monotonic one. Each read of the database takes
 * `rttMs` of monotonic time (the answer is read at its midpoint).
 */
function machine() {
  const m = { monotonic: 1_000.25, wallAheadMs: 1_700_000_000_000, dbAheadMs: 1_700_000_000_000 + 40, rttMs: 2 };
  const wall: Clock = { now: () => m.monotonic + m.wallAheadMs, setTimer: () => () => undefined };
  const reference = async (): Promise<number> => {
    m.monotonic += m.rttMs / 2;
    const answer = m.monotonic + m.dbAheadMs;
    m.monotonic += m.rttMs / 2;
    return answer;
  };
  const clock = new AlignedClock(wall, reference, { elapsed: () => m.monotonic });
  const dbNow = (): number => Math.floor(m.monotonic + m.dbAheadMs);
  return { m, wall, clock, dbNow };
}

describe('AlignedClock', () => {
  it("reads the database's time, and a step of the machine's wall clock does not move it", async () => {
    const { m, wall, clock, dbNow } = machine();
    expect(clock.now()).toBe(wall.now()); // no sample yet: its own clock
    await clock.sample();
    expect(clock.now()).toBe(dbNow());
    expect(Number.isInteger(clock.now())).toBe(true); // whole ms, as Date.now(), though the monotonic clock has fractions
    expect(clock.ownSkewMs).toBe(40);

    m.wallAheadMs -= 2_000; // the machine's clock is stepped back 2 s
    m.monotonic += 500;
    expect(clock.now()).toBe(dbNow());
    expect(clock.ownSkewMs).toBe(2_040);
  });

  it('follows a step of the reference clock at the next sample, though older samples had shorter round trips', async () => {
    const { m, clock, dbNow } = machine();
    for (let i = 0; i < 4; i++) await clock.sample();
    m.dbAheadMs += 3_000; // the database's host had its clock stepped
    m.rttMs = 12; // and this sample waited longer than the others
    await clock.sample();
    expect(Math.abs(clock.now() - dbNow())).toBeLessThanOrEqual(6);
  });

  it('keeps the sample with the shortest round trip while the reference runs on', async () => {
    const { m, clock, dbNow } = machine();
    await clock.sample();
    m.rttMs = 30; // a slow sample: within its uncertainty, so not a step, and not chosen
    const slowReference = clock.rttMs;
    await clock.sample();
    expect(clock.rttMs).toBe(slowReference);
    expect(clock.now()).toBe(dbNow());
  });
});
