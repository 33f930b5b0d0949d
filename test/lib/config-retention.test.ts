/**
 * `retentionSeconds` as the other duration options: a default of 7 days, the same in every
 * layer (config file, `WHEELHOUSE_RETENTION_SECONDS`, `--retention-seconds`), compiled to ms,
 * and 0 or less refused naming the key.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, coerce, compileOptions, isOptionKey, optionsFromEnv } from '../../src/lib/config.js';

describe('retentionSeconds', () => {
  it('defaults to 7 days and compiles to milliseconds', () => {
    expect(compileOptions().retentionMs).toBe(7 * 86_400_000);
    expect(compileOptions({ retentionSeconds: 3600 }).retentionMs).toBe(3_600_000);
    expect(compileOptions({ retentionSeconds: 0.5 }).retentionMs).toBe(500);
  });

  it('is read from the environment and from a flag like any option', () => {
    expect(optionsFromEnv({ WHEELHOUSE_RETENTION_SECONDS: '86400' })).toEqual({ retentionSeconds: 86_400 });
    // `--retention-seconds 60`: the CLI turns the flag into the key, then coerces the value.
    expect(isOptionKey('retentionSeconds')).toBe(true);
    expect(coerce('retentionSeconds', '60')).toBe(60);
  });

  it('refuses 0, a negative or a non-number, naming the key', () => {
    for (const bad of [0, -1, Number.NaN, '7d']) {
      let error: unknown;
      try {
        compileOptions({ retentionSeconds: bad as number });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).key).toBe('retentionSeconds');
    }
    expect(() => compileOptions({ retentionSeconds: 0 })).toThrow(
      /config retentionSeconds: 0 must be more than 0: it is how long a finished task is kept/,
    );
    expect(() => optionsFromEnv({ WHEELHOUSE_RETENTION_SECONDS: 'seven' })).toThrow(/retentionSeconds/);
  });
});
