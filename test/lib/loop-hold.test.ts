import { describe, expect, it } from 'vitest';
import { holdingTheLoop } from '../../src/lib/loop-hold.js';

const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

describe('holdingTheLoop', () => {
  // Node waits out V8's background tasks whenever its loop holds nothing: a node starting on
  // the embedded backend holds nothing until it listens (decision 0047).
  it('holds the event loop with a timer of its own while the work runs, and lets it go after', async () => {
    const before = timers();
    let during = -1;
    const answer = await holdingTheLoop(async () => {
      await new Promise<void>((resolve) => setImmediate(resolve));
      during = timers();
      return 42;
    });
    expect(answer).toBe(42);
    expect(during).toBe(before + 1);
    expect(timers()).toBe(before);
  });

  it('lets it go when the work fails too', async () => {
    const before = timers();
    await expect(holdingTheLoop(() => Promise.reject(new Error('no')))).rejects.toThrow('no');
    expect(timers()).toBe(before);
  });
});
