import { describe, expect, it } from 'vitest';
import type { NodeEvents } from '../../src/domain/events.js';
import { TypedEvents } from '../../src/lib/events.js';
import { waitForEvent } from '../support/waits.js';

/** The tests' event wait: subscribed before the action, and never left subscribed. */
describe('waitForEvent', () => {
  it('hears an event emitted right after it was created, the first its predicate accepts', async () => {
    const events = new TypedEvents<NodeEvents>();
    const fired = waitForEvent(events, 'wheel:fired', (e) => e.partition === 2);
    expect(events.listenerCount('wheel:fired')).toBe(1);
    events.emit('wheel:fired', { partition: 1, count: 5 });
    events.emit('wheel:fired', { partition: 2, count: 3 });
    expect(await fired).toEqual({ partition: 2, count: 3 });
    expect(events.listenerCount('wheel:fired')).toBe(0);
  });

  it('rejects after its timeout, unsubscribed', async () => {
    const events = new TypedEvents<NodeEvents>();
    const fired = waitForEvent(events, 'cron:fired', undefined, 20);
    await expect(fired).rejects.toThrow(/timed out after 20 ms waiting for the event cron:fired/);
    expect(events.listenerCount('cron:fired')).toBe(0);
  });
});
