import { describe, expect, it } from 'vitest';
import { iso } from '../../src/http/serialize.js';

/** `iso` keeps the last two instants it wrote: a repeat, alternating or not, must read the same as a fresh one. */
describe('iso', () => {
  it('writes every instant as toISOString does, whatever came before', () => {
    const a = Date.UTC(2026, 11, 7, 12, 0, 0, 1);
    const b = a + 30_000;
    const c = a - 86_400_000;
    for (const ms of [a, b, a, b, b, c, a, c, b, 0, a, 0]) expect(iso(ms)).toBe(new Date(ms).toISOString());
  });

  it('answers null for no time, and for one that is not finite', () => {
    for (const ms of [null, undefined, Number.NaN, Number.POSITIVE_INFINITY]) expect(iso(ms)).toBeNull();
  });
});
