import { describe, expect, it } from 'vitest';
import {
  Gcra,
  RateWindow,
  familiesOf,
  isFamily,
  isLimitName,
  resolveLimit,
  type LimitSpec,
} from '../../src/domain/limits.js';
import { maxInWindow } from '../../bench/stats.js';

/**
 * The rate as a limit actor applies it, against a simulated clock: the hard bound (in any window
 * of one period at most limit + burst starts), the starts a late caller can still make up, and
 * the names and families of limits.
 */
describe('RateWindow', () => {
  it('never allows more than limit + burst starts in any window of one period', () => {
    for (const [limit, burst] of [
      [100, 0],
      [100, 10],
      [5, 0],
      [1, 0],
    ] as const) {
      const rate = new RateWindow({ limit, periodMs: 1000, burst });
      const starts: number[] = [];
      // A caller that asks at irregular instants, taking all it may each time.
      for (let now = 0; now < 20_000; now += 1 + ((now * 7919) % 37)) {
        const n = rate.available(now, 1_000);
        for (let i = 0; i < n; i++) {
          rate.take(now);
          starts.push(now);
        }
      }
      expect(maxInWindow(starts, 1000)).toBeLessThanOrEqual(limit + burst);
      // And it uses what it may: ≥ 95 % of limit per period over the run.
      expect(starts.length).toBeGreaterThanOrEqual(0.95 * limit * 20);
    }
  });

  it('makes up starts a caller came late for within the period (plain GCRA loses them)', () => {
    // A caller that comes every 15 ms for a rate of one per 10 ms, as a claim's round trip does.
    const window = new RateWindow({ limit: 100, periodMs: 1000, burst: 0 });
    const gcra = new Gcra({ limit: 100, periodMs: 1000, burst: 0 });
    let viaWindow = 0;
    let viaGcra = 0;
    for (let now = 0; now < 10_000; now += 15) {
      const n = window.available(now, 1_000);
      for (let i = 0; i < n; i++) window.take(now);
      viaWindow += n;
      const g = gcra.available(now, 1_000);
      gcra.take(now, g);
      viaGcra += g;
    }
    expect(viaGcra).toBeLessThan(700); // one per visit: the slack is lost
    expect(viaWindow).toBeGreaterThanOrEqual(950);
  });

  it('says when the next start is allowed', () => {
    const rate = new RateWindow({ limit: 2, periodMs: 1000, burst: 0 });
    rate.take(0);
    rate.take(0);
    expect(rate.available(10, 5)).toBe(0);
    expect(rate.nextAllowedMs(10)).toBeGreaterThan(10);
    expect(rate.startsInPeriod(500)).toBe(2);
    expect(rate.available(rate.nextAllowedMs(10), 5)).toBeGreaterThan(0);
    expect(rate.startsInPeriod(1001)).toBe(0);
  });
});

describe('limit names and families', () => {
  it('knows names, families and what covers a key', () => {
    expect(isLimitName('customer:42')).toBe(true);
    expect(isLimitName('customer:*')).toBe(true);
    expect(isLimitName('a*b')).toBe(false);
    expect(isLimitName('')).toBe(false);
    expect(isFamily('customer:*')).toBe(true);
    expect(familiesOf('a:b:c')).toEqual(['a:b:*', 'a:*']);
    const declared = new Map<string, LimitSpec>([
      ['a:*', { concurrency: 5, rate: null, onLimit: 'queue', weight: 1 }],
      ['a:b:c', { concurrency: 1, rate: null, onLimit: 'queue', weight: 2 }],
    ]);
    expect(resolveLimit('a:b:c', (n) => declared.get(n))).toMatchObject({ concurrency: 1, declaredAs: 'a:b:c' });
    expect(resolveLimit('a:x', (n) => declared.get(n))).toMatchObject({ concurrency: 5, declaredAs: 'a:*' });
    expect(resolveLimit('b:x', (n) => declared.get(n))).toBeNull();
  });

  it("names the family a key shares workers with, whether its own declaration or the family's applies", () => {
    const declared = new Map<string, LimitSpec>([
      ['a:*', { concurrency: 5, rate: null, onLimit: 'queue', weight: 1 }],
      ['a:b:c', { concurrency: 1, rate: null, onLimit: 'queue', weight: 2 }],
      ['solo', { concurrency: 9, rate: null, onLimit: 'queue', weight: 1 }],
      ['x:y', { concurrency: 9, rate: null, onLimit: 'queue', weight: 1 }],
    ]);
    const family = (key: string) => resolveLimit(key, (n) => declared.get(n))?.family;
    expect(family('a:b:c')).toBe('a:*'); // declared exactly: an override, still a member
    expect(family('a:x')).toBe('a:*');
    expect(family('solo')).toBeNull();
    expect(family('x:y')).toBeNull(); // no `x:*` declared
  });
});
