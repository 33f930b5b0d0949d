/**
 * The node's keys in its configuration (docs/security.md): the admin key comes from
 * `adminToken` (WHEELHOUSE_ADMIN_TOKEN) or `adminTokenFile` only — never from
 * WHEELHOUSE_AUTH_TOKEN, which is the key clients send.
 */
import { describe, expect, it } from 'vitest';
import { compileOptions, optionsFromEnv } from '../../src/lib/config.js';

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
