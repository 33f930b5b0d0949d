import { describe, expect, it } from 'vitest';
import { isUuid, uuidv7, uuidv7Floor, uuidv7Ms } from '../../src/lib/ids.js';

/** The v7 layout `uuidv7` writes by hand (RFC 9562): time, version 7, variant 10, random bits. */
describe('uuidv7', () => {
  it('writes the millisecond, version 7 and variant 10, and sorts by time', () => {
    const ms = Date.UTC(2026, 11, 7, 20, 30, 0, 123);
    const id = uuidv7(ms);
    expect(isUuid(id)).toBe(true);
    expect(id.slice(0, 8) + id.slice(9, 13)).toBe(ms.toString(16).padStart(12, '0'));
    expect(id[14]).toBe('7');
    expect('89ab').toContain(id[19]);
    expect(uuidv7Ms(id)).toBe(ms);
    expect(uuidv7(ms + 1) > uuidv7(ms)).toBe(true);
    expect(uuidv7Floor(ms) <= id && uuidv7Floor(ms + 1) > id).toBe(true);
    expect(uuidv7Ms(uuidv7(0))).toBe(0);
  });

  it('gives 100 000 ids of one millisecond apart, every random digit spread over 0–f', () => {
    const ms = Date.UTC(2026, 11, 7);
    const ids = Array.from({ length: 100_000 }, () => uuidv7(ms));
    expect(new Set(ids).size).toBe(ids.length);
    // Each random digit (not the time, the dashes, the version) takes all 16 values, and the
    // variant digit all four of 8, 9, a, b.
    for (let at = 15; at < 36; at++) {
      if (at === 18 || at === 23) continue;
      const seen = new Set(ids.map((id) => id[at]));
      expect(seen.size, `digit ${at}`).toBe(at === 19 ? 4 : 16);
    }
  });
});
