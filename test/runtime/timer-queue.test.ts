import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/runtime/clock.js';
import { TimerQueue, type TimerTarget } from '../../src/runtime/timer-queue.js';

/** The node's shared timer queue: many actor timers on one clock timer. */
describe('TimerQueue', () => {
  const recorder = (): { fired: string[]; target: TimerTarget<string> } => {
    const fired: string[] = [];
    return { fired, target: { onTimer: (payload) => fired.push(payload) } };
  };

  it('runs timers in due order, same-instant ones in the order they were set, on one clock timer', async () => {
    const clock = new FakeClock(0);
    const queue = new TimerQueue<string>(clock);
    const { fired, target } = recorder();
    queue.add(300, target, 'c');
    queue.add(100, target, 'a1');
    queue.add(200, target, 'b');
    queue.add(100, target, 'a2');
    expect(clock.pendingTimers).toBe(1);
    expect(queue.size).toBe(4);
    await clock.advance(150);
    expect(fired).toEqual(['a1', 'a2']);
    await clock.advance(1_000);
    expect(fired).toEqual(['a1', 'a2', 'b', 'c']);
    expect(clock.pendingTimers).toBe(0);
    expect(queue.size).toBe(0);
  });

  it('does not run a cancelled timer and disarms the clock when nothing is left', async () => {
    const clock = new FakeClock(0);
    const queue = new TimerQueue<string>(clock);
    const { fired, target } = recorder();
    const a = queue.add(100, target, 'a');
    const b = queue.add(200, target, 'b');
    queue.cancel(a);
    queue.cancel(a);
    expect(queue.size).toBe(1);
    await clock.advance(150);
    expect(fired).toEqual([]);
    queue.cancel(b);
    expect(clock.pendingTimers).toBe(0);
    await clock.advance(1_000);
    expect(fired).toEqual([]);
  });

  it('runs a timer set from inside a callback, and an earlier one set later', async () => {
    const clock = new FakeClock(0);
    const queue = new TimerQueue<string>(clock);
    const fired: string[] = [];
    const target: TimerTarget<string> = {
      onTimer: (payload) => {
        fired.push(payload);
        if (payload === 'first') queue.add(0, target, 'chained');
      },
    };
    queue.add(500, target, 'late');
    queue.add(100, target, 'first');
    await clock.advance(100);
    await clock.advance(0);
    expect(fired).toEqual(['first', 'chained']);
    await clock.advance(400);
    expect(fired).toEqual(['first', 'chained', 'late']);
  });

  it('drops cancelled entries in bulk once they outnumber the live ones', async () => {
    const clock = new FakeClock(0);
    const queue = new TimerQueue<string>(clock);
    const { fired, target } = recorder();
    const entries = Array.from({ length: 5_000 }, (_, i) => queue.add(1_000 + i, target, `t${i}`));
    // Cancel all but every tenth, as re-armed leases do.
    entries.forEach((entry, i) => {
      if (i % 10 !== 0) queue.cancel(entry);
    });
    expect(queue.size).toBe(500);
    await clock.advance(10_000);
    expect(fired).toEqual(Array.from({ length: 500 }, (_, i) => `t${i * 10}`));
  });
});
