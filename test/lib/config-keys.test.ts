/**
 * The node's keys in its configuration (docs/security.md): the admin key comes from
 * `adminToken` (WHEELHOUSE_ADMIN_TOKEN) or `adminTokenFile` only — never from
 * WHEELHOUSE_AUTH_TOKEN, which is the key clients send — and a secret given empty (a variable
 * that expanded to nothing) is an error naming it, not "no key".
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, coerce, compileOptions, optionsFromEnv } from '../../src/lib/config.js';

/** The ConfigError `run` throws, or a failure. */
function configError(run: () => unknown): ConfigError {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('no ConfigError');
}

describe('the admin key', () => {
  it('is WHEELHOUSE_ADMIN_TOKEN', () => {
    const secret = 'an-admin-key-of-some-length';
    expect(compileOptions(optionsFromEnv({ WHEELHOUSE_ADMIN_TOKEN: secret })).adminToken).toBe(secret);
  });

  it('is never WHEELHOUSE_AUTH_TOKEN (a client key: a worker would become an admin)', () => {
    const workKey = `whk_${'w'.repeat(43)}`;
    expect(compileOptions(optionsFromEnv({ WHEELHOUSE_AUTH_TOKEN: workKey })).adminToken).toBeNull();
    expect(
      compileOptions(optionsFromEnv({ WHEELHOUSE_AUTH_TOKEN: workKey, WHEELHOUSE_ADMIN_TOKEN: 'x'.repeat(20) }))
        .adminToken,
    ).toBe('x'.repeat(20));
  });
});

describe('a secret given empty', () => {
  it('is an error naming its key, from the environment', () => {
    for (const raw of ['', 'null']) {
      for (const [variable, key] of [
        ['WHEELHOUSE_ADMIN_TOKEN', 'adminToken'],
        ['WHEELHOUSE_ADMIN_TOKEN_FILE', 'adminTokenFile'],
        ['WHEELHOUSE_CLUSTER_SECRET', 'clusterSecret'],
        ['WHEELHOUSE_CLUSTER_SECRET_FILE', 'clusterSecretFile'],
      ] as const) {
        const error = configError(() => optionsFromEnv({ [variable]: raw }));
        expect(error.key, `${variable}=${raw}`).toBe(key);
        expect(error.message).toMatch(/leave it unset for none/);
      }
    }
  });

  it('is an error naming its key, from a flag (`--admin-token ""`)', () => {
    expect(configError(() => coerce('adminToken', '')).key).toBe('adminToken');
    expect(configError(() => compileOptions({ adminToken: '' })).key).toBe('adminToken');
  });

  it('leaves the other options that may be null as they were', () => {
    expect(optionsFromEnv({ WHEELHOUSE_ADVERTISE_URL: '' })).toEqual({ advertiseUrl: null });
  });
});
