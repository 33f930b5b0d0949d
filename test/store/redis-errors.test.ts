/**
 * Redis failures onto the catalogue: a reply that means "not now" — out of memory under
 * `noeviction`, loading, busy — is `store_unavailable` (503 with Retry-After), whether Redis
 * sends it as is, wraps it in a script error (before Redis 7) or in a MULTI's EXECABORT;
 * anything else Redis refuses is a bug (`internal`).
 */
import { describe, expect, it } from 'vitest';
import { isRedisUnavailable, redisOperation, toStoreError } from '../../src/store/redis.js';

/** An error reply as ioredis raises it (a `ReplyError`). */
const reply = (message: string, extra: Record<string, unknown> = {}): Error =>
  Object.assign(new Error(message), { name: 'ReplyError', ...extra });

describe('Redis errors', () => {
  it.each([
    "OOM command not allowed when used memory > 'maxmemory'.",
    "OOM command not allowed when used memory > 'maxmemory'. script: b11a7775e8718aa4aac6449ec4bea87ea0929636, on @user_script:95.",
    "ERR Error running script (call to f_b11a7775e8718aa4aac6449ec4bea87ea0929636): @user_script:95: @user_script: 95: -OOM command not allowed when used memory > 'maxmemory'.",
    'LOADING Redis is loading the dataset in memory',
    'BUSY Redis is busy running a script.',
  ])('%s is store_unavailable with Retry-After', (message) => {
    expect(isRedisUnavailable(reply(message))).toBe(true);
    const error = toStoreError(reply(message), 'ready.push');
    expect(error).toMatchObject({ code: 'store_unavailable', status: 503, retryAfterSeconds: 1 });
  });

  it('a MULTI aborted because a command met OOM is store_unavailable', () => {
    const aborted = reply('EXECABORT Transaction discarded because of previous errors.', {
      previousErrors: [reply("OOM command not allowed when used memory > 'maxmemory'.")],
    });
    expect(toStoreError(aborted, 'ready.held').code).toBe('store_unavailable');
    const wrong = reply('EXECABORT Transaction discarded because of previous errors.', {
      previousErrors: [reply('ERR wrong number of arguments')],
    });
    expect(toStoreError(wrong, 'ready.held').code).toBe('internal');
  });

  it('other replies are bugs, not outages', () => {
    for (const message of [
      'ERR wrong number of arguments for command',
      'WRONGTYPE Operation against a key holding the wrong kind of value',
      'ERR Error running script (call to f_x): @user_script:1: user_script:1: Script attempted to access nonexistent global variable',
      'OOMPH not a code',
    ]) {
      expect(isRedisUnavailable(reply(message)), message).toBe(false);
      expect(toStoreError(reply(message), 'x').code).toBe('internal');
    }
    expect(isRedisUnavailable(new Error('Connection is closed.'))).toBe(true);
  });

  it('an operation that never answers fails as store_unavailable at its deadline', async () => {
    // ioredis #1604: on Redis Cluster a command held back while the client looks for the
    // slot's node has no timeout; without the deadline this promise would never settle.
    const never = new Promise<string>(() => undefined);
    await expect(redisOperation('ready.push', () => never, 50)).rejects.toMatchObject({
      code: 'store_unavailable',
      retryAfterSeconds: 1,
      message: expect.stringContaining('ready.push') as unknown,
    });
    // An answer after the deadline changes nothing (and is not an unhandled rejection).
    let fail: (e: Error) => void = () => undefined;
    const late = new Promise<string>((_, reject) => (fail = reject));
    await expect(redisOperation('ready.take', () => late, 20)).rejects.toMatchObject({ code: 'store_unavailable' });
    fail(new Error('connection closed'));
    await expect(redisOperation('ready.ack', () => Promise.resolve('ok'), 20)).resolves.toBe('ok');
  });
});
