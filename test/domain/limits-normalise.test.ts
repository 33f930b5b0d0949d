/** `limits` as a task row stores them: sorted, each once, null for none (src/domain/limits.ts). */
import { describe, expect, it } from 'vitest';
import { normaliseLimits } from '../../src/domain/limits.js';

describe('normaliseLimits', () => {
  it('answers null for none', () => {
    expect(normaliseLimits(undefined)).toBeNull();
    expect(normaliseLimits(null)).toBeNull();
    expect(normaliseLimits([])).toBeNull();
  });

  it('copies names already in order, one or many', () => {
    const one = ['stripe-api'];
    expect(normaliseLimits(one)).toEqual(['stripe-api']);
    expect(normaliseLimits(one)).not.toBe(one);
    expect(normaliseLimits(['customer:42', 'stripe-api'])).toEqual(['customer:42', 'stripe-api']);
  });

  it('sorts names out of order and drops repeats', () => {
    expect(normaliseLimits(['stripe-api', 'customer:42'])).toEqual(['customer:42', 'stripe-api']);
    expect(normaliseLimits(['b', 'a', 'b'])).toEqual(['a', 'b']);
    expect(normaliseLimits(['a', 'a'])).toEqual(['a']);
    expect(normaliseLimits(['a', 'b', 'b'])).toEqual(['a', 'b']);
  });
});
