import { WheelhouseError } from '../lib/errors.js';

/**
 * A lease token names the task version a claim was granted at; every report made with it is
 * a compare-and-set on that version. It is opaque to workers.
 */
export function encodeLeaseToken(version: number): string {
  return `lt1.${version.toString(36)}`;
}

/** Versions are Postgres integers: a token naming a larger one was not issued here. */
const MAX_VERSION = 2_147_483_647;

/** The version a token was granted at; `lease_not_held` when it is not a token at all. */
export function decodeLeaseToken(token: string): number {
  const match = /^lt1\.([0-9a-z]{1,12})$/.exec(token);
  const version = match ? parseInt(match[1] as string, 36) : NaN;
  if (!Number.isSafeInteger(version) || version > MAX_VERSION) {
    throw new WheelhouseError('lease_not_held', 'the lease token is not one this cluster issued');
  }
  return version;
}
