import { describe, expect, it } from 'vitest';
import { START_LAG_BOUNDS_MS, addStart, emptyCounts, lagBucket, lagQuantileMs } from '../../src/domain/task-stats.js';

/** The start-lag histogram of `task_stats`: its buckets and the quantiles read from them. */
describe('the start-lag histogram', () => {
  it('puts a lag in the first bucket whose bound holds it, and past the last in the overflow', () => {
    expect(lagBucket(0)).toBe(0);
    expect(lagBucket(5)).toBe(0);
    expect(lagBucket(6)).toBe(1);
    expect(lagBucket(1_000)).toBe(START_LAG_BOUNDS_MS.indexOf(1_000));
    expect(lagBucket(10_000_000)).toBe(START_LAG_BOUNDS_MS.length);
  });

  it('estimates p50 and p99 within the bucket the rank falls in, never past the longest lag', () => {
    const c = emptyCounts();
    for (let i = 0; i < 99; i++) addStart(c, 20); // the (10, 25] bucket
    addStart(c, 4_000); // the (2500, 5000] bucket
    const p50 = lagQuantileMs(c.lagBuckets, 0.5, c.lagMaxMs)!;
    expect(p50).toBeGreaterThan(10);
    expect(p50).toBeLessThanOrEqual(25);
    expect(lagQuantileMs(c.lagBuckets, 0.99, c.lagMaxMs)).toBeLessThanOrEqual(25);
    expect(lagQuantileMs(c.lagBuckets, 1, c.lagMaxMs)).toBe(4_000);
    expect(c).toMatchObject({ started: 100, lagMaxMs: 4_000, lagSumMs: 99 * 20 + 4_000 });
  });

  it('has no quantile without starts, and reads the overflow up to the longest lag', () => {
    expect(lagQuantileMs(emptyCounts().lagBuckets, 0.99, 0)).toBeNull();
    const c = emptyCounts();
    addStart(c, 3_600_000);
    expect(lagQuantileMs(c.lagBuckets, 0.99, c.lagMaxMs)).toBeLessThanOrEqual(3_600_000);
    expect(lagQuantileMs(c.lagBuckets, 0.99, c.lagMaxMs)).toBeGreaterThan(900_000);
  });
});
