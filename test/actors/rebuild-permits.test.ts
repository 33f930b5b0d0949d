import { describe, expect, it } from 'vitest';
import { RebuildPermits } from '../../src/actors/rebuild-permits.js';

/** The node-wide bound on partitions reading a full rebuild's far pages at once. */
describe('RebuildPermits', () => {
  it('starts up to the limit at once, the rest first come first served as permits come back', () => {
    const permits = new RebuildPermits(2);
    const started: number[] = [];
    for (const p of [1, 2, 3, 4]) permits.request(p, () => started.push(p));
    expect(started).toEqual([1, 2]);
    expect(permits.counts).toEqual({ holding: 2, waiting: 2 });
    permits.release(2);
    expect(started).toEqual([1, 2, 3]);
    permits.release(1);
    expect(started).toEqual([1, 2, 3, 4]);
    expect(permits.counts).toEqual({ holding: 2, waiting: 0 });
  });

  it('releases idempotently, and a release of a waiting partition takes it out of the queue', () => {
    const permits = new RebuildPermits(1);
    const started: number[] = [];
    permits.request(1, () => started.push(1));
    permits.request(2, () => started.push(2));
    permits.request(3, () => started.push(3));
    permits.release(2); // gave up waiting (deactivated)
    permits.release(9); // holds nothing: nothing happens
    expect(permits.counts).toEqual({ holding: 1, waiting: 1 });
    permits.release(1);
    permits.release(1); // again: the permit is 3's now
    expect(started).toEqual([1, 3]);
    expect(permits.counts).toEqual({ holding: 1, waiting: 0 });
  });

  it('lets a partition that holds a permit go on with it', () => {
    const permits = new RebuildPermits(1);
    const started: string[] = [];
    permits.request(1, () => started.push('1a'));
    permits.request(1, () => started.push('1b'));
    expect(started).toEqual(['1a', '1b']);
    expect(() => new RebuildPermits(0)).toThrow(RangeError);
  });
});
