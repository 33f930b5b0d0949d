import { hash, randomFillSync } from 'node:crypto';

/**
 * Lease tokens. A claim hands each task's worker a secret for that attempt: `lt2.` and 128
 * random bits in hex. The worker shows it with every heartbeat and result; nothing else proves
 * that a report comes from the worker that holds the lease.
 *
 * Only a SHA-256 digest of the token is kept, in the task row next to the worker id and the
 * attempt the same claim wrote; every end of the attempt (a result, an expiry, a hand-back)
 * clears it, and the next claim writes a new one. So a token is good for one attempt of one
 * task, and whoever reads the database (or a backup of it) learns nothing that would pass.
 *
 * A presented token is checked by comparing its digest with the stored one. The comparison
 * may stop at the first differing byte (Postgres compares `bytea` so); what that could reveal
 * is how much of the presented token's digest matches the stored digest, and a digest says
 * nothing about the token that would make the next guess better. Within a node the lease
 * actor compares digests with `timingSafeEqual`. A worker socket keeps the tokens of the tasks
 * pushed to it with the digests their claim minted; a result on that socket whose token matches
 * the kept one (`timingSafeEqual` again) goes to the store with the minted digest, so the token
 * is hashed once per attempt, not twice.
 */

/** The prefix of the tokens this version issues. `lt1.` tokens (the task's version) are refused. */
const PREFIX = 'lt2.';
const SECRET_BYTES = 16;
const TOKEN_LENGTH = PREFIX.length + SECRET_BYTES * 2;
const TOKEN_SHAPE = /^lt2\.[0-9a-f]{32}$/;

/** Bytes of a token digest (SHA-256). */
export const LEASE_DIGEST_BYTES = 32;

/** A token and what is stored of it. */
export interface MintedLeaseToken {
  /** What the worker receives; never stored, never logged. */
  token: string;
  /** SHA-256 of the token: what the task row keeps. */
  digest: Buffer;
}

/**
 * Random bytes for tokens, filled 1 024 tokens at a time: a claim of 1 000 tasks reads the
 * random source once, not once per task. Bytes handed out are zeroed, so a token's secret
 * stays in memory only in the token string.
 */
const pool = Buffer.alloc(SECRET_BYTES * 1024);
let poolOffset = pool.length;

/** `count` new tokens, each 128 random bits. */
export function mintLeaseTokens(count: number): MintedLeaseToken[] {
  const minted: MintedLeaseToken[] = [];
  while (minted.length < count) {
    if (poolOffset === pool.length) {
      randomFillSync(pool);
      poolOffset = 0;
    }
    const take = Math.min(count - minted.length, (pool.length - poolOffset) / SECRET_BYTES);
    const end = poolOffset + take * SECRET_BYTES;
    // One hex string for the whole run, cut into tokens: one native call instead of `take`.
    const hex = pool.toString('hex', poolOffset, end);
    pool.fill(0, poolOffset, end);
    poolOffset = end;
    for (let i = 0; i < take; i++) {
      const token = PREFIX + hex.slice(i * SECRET_BYTES * 2, (i + 1) * SECRET_BYTES * 2);
      minted.push({ token, digest: hash('sha256', token, 'buffer') });
    }
  }
  return minted;
}

/**
 * The digest a presented token is checked by; null when it cannot be a token this version
 * issued (any other shape or length, the old `lt1.` tokens), which is a lease not held.
 */
export function leaseTokenDigest(token: string): Buffer | null {
  if (token.length !== TOKEN_LENGTH || !TOKEN_SHAPE.test(token)) return null;
  return hash('sha256', token, 'buffer');
}
