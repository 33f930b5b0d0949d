import { createHash } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { leaseTokenDigest, mintLeaseTokens } from '../../src/domain/lease-token.js';

// Counts how often the random source is read (vi.mock is hoisted above the imports); the rest
// of node:crypto is the real one.
const randomReads = vi.hoisted(() => ({ count: 0 }));
vi.mock('node:crypto', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:crypto')>();
  return {
    ...real,
    randomFillSync: (...args: Parameters<typeof real.randomFillSync>) => {
      randomReads.count++;
      return real.randomFillSync(...args);
    },
  };
});

const sha256 = (text: string): Buffer => createHash('sha256').update(text).digest();

describe('lease tokens', () => {
  it('are 128 random bits each, never repeated, with their SHA-256 digest', () => {
    const minted = mintLeaseTokens(2_500);
    expect(minted).toHaveLength(2_500);
    const misfits = minted.filter((m) => !/^lt2\.[0-9a-f]{32}$/.test(m.token) || !m.digest.equals(sha256(m.token)));
    expect(misfits).toEqual([]);
    expect(new Set(minted.map((m) => m.token)).size).toBe(2_500);
    // Every bit position takes both values across the tokens: no part of the secret is fixed.
    const ones = new Array<number>(128).fill(0);
    for (const { token } of minted) {
      const secret = Buffer.from(token.slice(4), 'hex');
      for (let bit = 0; bit < 128; bit++) if (((secret[bit >> 3] as number) >> (bit & 7)) & 1) ones[bit]!++;
    }
    // 2 500 fair coins: 1 250 ± 25 each; the bounds are 10 standard deviations away.
    expect(Math.min(...ones)).toBeGreaterThan(1_000);
    expect(Math.max(...ones)).toBeLessThan(1_500);
  });

  it('read the random source once per 1 024 tokens, not once per token', () => {
    mintLeaseTokens(1_024 * 4); // start from an empty pool, whatever the other tests took
    randomReads.count = 0;
    mintLeaseTokens(1_000);
    for (let i = 0; i < 1_000; i++) mintLeaseTokens(1);
    expect(randomReads.count).toBeLessThanOrEqual(2);
    expect(mintLeaseTokens(0)).toEqual([]);
  });

  it('are checked by the digest of a well-formed token only', () => {
    const [{ token, digest }] = mintLeaseTokens(1) as [{ token: string; digest: Buffer }];
    expect(leaseTokenDigest(token)).toEqual(digest);
    const wrong = [
      'lt1.1', // the old format: the task's version
      'lt1.zzzzzz', // once an integer overflow in SQL
      `lt1.${Number.MAX_SAFE_INTEGER.toString(36)}`,
      '',
      'lt2.',
      `${token}0`,
      token.slice(0, -1),
      token.toUpperCase(),
      `lt2.${'g'.repeat(32)}`,
      ` ${token.slice(1)}`,
      `lt2.${'0'.repeat(31)}\n`,
      'x'.repeat(10_240),
    ];
    for (const candidate of wrong) expect(leaseTokenDigest(candidate)).toBeNull();
    // Well-formed but not issued: it has a digest, and that digest is no lease's.
    expect(leaseTokenDigest(`lt2.${'0'.repeat(32)}`)).toEqual(sha256(`lt2.${'0'.repeat(32)}`));
  });
});
