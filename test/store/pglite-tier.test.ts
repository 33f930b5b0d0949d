import { describe, expect, it } from 'vitest';
import { pgliteTierFromEnv } from '../../src/store/pglite-tier.js';

describe("PGlite's WebAssembly tier in `wheelhouse dev`", () => {
  it('is the baseline compiler alone unless WHEELHOUSE_PGLITE_OPTIMIZE asks for both tiers', () => {
    expect(pgliteTierFromEnv({})).toBe('baseline');
    expect(pgliteTierFromEnv({ WHEELHOUSE_PGLITE_OPTIMIZE: '0' })).toBe('baseline');
    expect(pgliteTierFromEnv({ WHEELHOUSE_PGLITE_OPTIMIZE: '1' })).toBe('optimizing');
    expect(pgliteTierFromEnv({ WHEELHOUSE_PGLITE_OPTIMIZE: 'true' })).toBe('optimizing');
  });
});
