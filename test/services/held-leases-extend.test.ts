import { describe, expect, it } from 'vitest';
import { WheelhouseError } from '../../src/lib/errors.js';
import { FakeClock } from '../../src/runtime/clock.js';
import { HeldLeases, type LeaseNews } from '../../src/services/held-leases.js';

/**
 * A deadline extension the store could not take is asked again by the node (the worker waits
 * for an answer to each `extend_seconds`), within a third of the time left to the deadline, and
 * no longer once the deadline has passed.
 */
describe('HeldLeases.extend after a store error', () => {
  const outage = () => new WheelhouseError('store_unavailable', 'the database cannot be reached');

  function leases(storeUp: () => boolean) {
    const clock = new FakeClock();
    const told: LeaseNews[] = [];
    const asked: number[] = [];
    const held = new HeldLeases({
      workers: {
        heartbeat: (_taskId, _token, extendSeconds) => {
          if (extendSeconds !== undefined) asked.push(clock.now());
          if (!storeUp()) return Promise.reject(outage());
          const deadlineMs = clock.now() + (extendSeconds ?? 0) * 1000;
          return Promise.resolve({ leaseExpiresMs: deadlineMs, deadlineMs, cancelRequested: false });
        },
      },
      clock,
      workerId: 'w-1',
      tell: (news) => void told.push(news),
      changed: () => undefined,
      onError: () => undefined,
    });
    const start = clock.now();
    held.hold([{ id: 't-1', leaseToken: 'tok', leaseExpiresMs: start + 3_000, deadlineMs: start + 3_000 }]);
    return { clock, held, told, asked, start };
  }

  it('asks again while the store is out, and tells the deadline once it is back', async () => {
    let up = false;
    const { clock, held, told, asked, start } = leases(() => up);
    await held.extend([{ taskId: 't-1', leaseToken: 'tok', extendSeconds: 10 }]);
    expect(told).toEqual([]);
    await clock.advance(1_000); // a third of the 3 s left is the first wait: 1 s
    expect(asked).toEqual([start, start + 1_000]);
    up = true;
    await clock.advance(700); // a third of the 2 s left: ~667 ms
    expect(asked).toHaveLength(3);
    expect(told).toEqual([{ type: 'extended', tasks: [{ taskId: 't-1', deadlineMs: asked[2]! + 10_000 }] }]);
    await clock.advance(5_000);
    expect(asked).toHaveLength(3); // granted: not asked again
    held.stop();
  });

  it('stops asking once the deadline has passed', async () => {
    const { clock, held, asked, start } = leases(() => false);
    await held.extend([{ taskId: 't-1', leaseToken: 'tok', extendSeconds: 10 }]);
    await clock.advance(10_000);
    expect(asked.length).toBeGreaterThan(2);
    expect(asked.every((at) => at < start + 3_000)).toBe(true);
    const before = asked.length;
    await clock.advance(10_000);
    expect(asked).toHaveLength(before);
    held.stop();
  });
});
