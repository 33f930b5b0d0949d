import { describe, expect, it } from 'vitest';
import { isWheelhouseError } from '../../src/lib/errors.js';
import { WHEEL } from '../../src/actors/wheel-partition.js';
import { decodeWheelSnapshot, WHEEL_SNAPSHOT_VERSION } from '../../src/actors/wheel-state.js';

const full = { cursorMs: 1_000, loadedUntilMs: 120_000, firedTotal: 7, stamp: 3, unplaced: true };

describe('the wheel partition snapshot codec', () => {
  it('is the codec of the wheel kind, at version 1', () => {
    expect(WHEEL.snapshot).toEqual({ version: WHEEL_SNAPSHOT_VERSION, decode: decodeWheelSnapshot });
    expect(WHEEL_SNAPSHOT_VERSION).toBe(1);
  });

  it('decodes version 1 in full', () => {
    expect(decodeWheelSnapshot(full, 1)).toEqual(full);
  });

  it('decodes a version-0 snapshot (before versions), its missing newer fields as 0 and false', () => {
    expect(decodeWheelSnapshot({ cursorMs: 5, loadedUntilMs: 60_000, firedTotal: 2 }, 0)).toEqual({
      cursorMs: 5,
      loadedUntilMs: 60_000,
      firedTotal: 2,
      stamp: 0,
      unplaced: false,
    });
    expect(decodeWheelSnapshot(full, 0)).toEqual(full);
  });

  it('throws a clear internal error on garbage', () => {
    const cases: [unknown, number, RegExp][] = [
      ['oops', 1, /must be an object, got string/],
      [[1, 2], 0, /must be an object, got an array/],
      [{ ...full, stamp: 'three' }, 1, /field 'stamp' is not valid \("three"\)/],
      [{ ...full, unplaced: 'yes' }, 0, /field 'unplaced' is not valid/],
      [{ cursorMs: 1 }, 1, /field 'loadedUntilMs' is missing/],
      [full, 2, /unknown wheel snapshot version 2/],
    ];
    for (const [raw, version, message] of cases) {
      let error: unknown;
      try {
        decodeWheelSnapshot(raw, version);
      } catch (e) {
        error = e;
      }
      expect(isWheelhouseError(error, 'internal'), JSON.stringify(raw)).toBe(true);
      expect((error as Error).message).toMatch(message);
    }
  });
});
