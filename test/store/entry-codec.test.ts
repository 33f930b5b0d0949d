/**
 * The fast index's member formats (`src/store/entry-codec.ts`): an entry without limits must
 * encode exactly as before limits existed, so members already in Redis read back and cost
 * nothing more; an entry with limits carries them as a tail every reader splits off.
 */
import { describe, expect, it } from 'vitest';
import type { DueEntry } from '../../src/domain/model.js';
import {
  assertDueEntry,
  decodeBucketMember,
  decodeInFlightMember,
  encodeBucketMember,
  encodeInFlightMember,
  encodeReadyMember,
} from '../../src/store/entry-codec.js';
import { isWheelhouseError } from '../../src/lib/errors.js';

const ID = '0193a0c4-5b1e-7c2d-8e3f-4a5b6c7d8e9f';
const PLAIN: DueEntry = { taskId: ID, taskType: 'etl:load.v2-x_y', priority: 3, dueMs: 1_764_504_000_123 };
const LIMITED: DueEntry = { ...PLAIN, limits: ['customer:42', 'stripe-api'] };

function expectInternal(run: () => unknown): void {
  let error: unknown = null;
  try {
    run();
  } catch (e) {
    error = e;
  }
  expect(isWheelhouseError(error) && error.code === 'internal').toBe(true);
}

describe('entry codec', () => {
  it('encodes an entry without limits as it always did, and reads such members back without limits', () => {
    expect(encodeBucketMember(PLAIN)).toBe(`${ID}|3|etl:load.v2-x_y`);
    expect(encodeReadyMember(PLAIN)).toBe(ID);
    expect(encodeInFlightMember(PLAIN)).toBe(`3|1764504000123|${ID}|etl:load.v2-x_y`);
    expect(encodeInFlightMember({ ...PLAIN, limits: [] })).toBe(encodeInFlightMember(PLAIN));
    expect(decodeBucketMember(`${ID}|3|etl:load.v2-x_y`, PLAIN.dueMs)).toStrictEqual(PLAIN);
    expect(decodeInFlightMember(`3|1764504000123|${ID}|etl:load.v2-x_y`)).toStrictEqual(PLAIN);
  });

  it('appends the limits to every member and reads them back', () => {
    expect(encodeBucketMember(LIMITED)).toBe(`${ID}|3|etl:load.v2-x_y|customer:42,stripe-api`);
    expect(encodeReadyMember(LIMITED)).toBe(`${ID}|customer:42,stripe-api`);
    expect(encodeInFlightMember(LIMITED)).toBe(`3|1764504000123|${ID}|etl:load.v2-x_y|customer:42,stripe-api`);
    expect(decodeBucketMember(encodeBucketMember(LIMITED), LIMITED.dueMs)).toStrictEqual(LIMITED);
    expect(decodeInFlightMember(encodeInFlightMember(LIMITED))).toStrictEqual(LIMITED);
    const one = { ...PLAIN, limits: ['x'.repeat(200)] };
    expect(decodeInFlightMember(encodeInFlightMember(one))).toStrictEqual(one);
  });

  it('shares one type string and limits array among a run of alike members, and never mixes two tails', () => {
    const a = decodeInFlightMember(encodeInFlightMember(LIMITED));
    const b = decodeInFlightMember(encodeInFlightMember({ ...LIMITED, taskId: ID.replace('0193', '0194') }));
    expect(b.limits).toBe(a.limits);
    expect(b.taskType).toBe(a.taskType);
    // Tails of one length that differ, a tail that is a type alone, then the first again.
    const other = { ...LIMITED, limits: ['customer:43', 'stripe-api'] };
    expect(decodeInFlightMember(encodeInFlightMember(other))).toStrictEqual(other);
    const typeAlone = { ...PLAIN, taskType: 'etl:load.v2-x_y|customer:42,stripe-api'.replace(/[|,]/g, '.') };
    expect(decodeBucketMember(encodeBucketMember(typeAlone), PLAIN.dueMs)).toStrictEqual(typeAlone);
    expect(decodeBucketMember(encodeBucketMember(LIMITED), LIMITED.dueMs)).toStrictEqual(LIMITED);
    expect(decodeInFlightMember(encodeInFlightMember(PLAIN))).toStrictEqual(PLAIN);
  });

  it('carries a sampled trace context in the bucket member only, after the limits, and reads it back', () => {
    const ids = `${'4b'.repeat(16)}${'0c'.repeat(8)}`;
    const traced: DueEntry = { ...LIMITED, traceparent: `00-${'4b'.repeat(16)}-${'0c'.repeat(8)}-01` };
    expect(encodeBucketMember(traced)).toBe(`${ID}|3|etl:load.v2-x_y|customer:42,stripe-api@${ids}`);
    expect(decodeBucketMember(encodeBucketMember(traced), traced.dueMs)).toStrictEqual(traced);
    const plainTraced: DueEntry = { ...PLAIN, traceparent: traced.traceparent! };
    expect(decodeBucketMember(encodeBucketMember(plainTraced), PLAIN.dueMs)).toStrictEqual(plainTraced);
    // Nothing after the fire makes a span from the entry: ready and in-flight members are as they were.
    expect(encodeReadyMember(traced)).toBe(encodeReadyMember(LIMITED));
    expect(encodeInFlightMember(traced)).toBe(encodeInFlightMember(LIMITED));
    // A later version reads back as 00 with the same ids; an unsampled or malformed one is not carried.
    const v1 = `01-${'4b'.repeat(16)}-${'0c'.repeat(8)}-03-extra`;
    expect(decodeBucketMember(encodeBucketMember({ ...PLAIN, traceparent: v1 }), PLAIN.dueMs).traceparent).toBe(
      traced.traceparent,
    );
    for (const traceparent of [
      `00-${'4b'.repeat(16)}-${'0c'.repeat(8)}-00`,
      'garbage',
      `00-${'G'.repeat(32)}-${'0'.repeat(16)}-01`,
    ]) {
      expect(encodeBucketMember({ ...PLAIN, traceparent })).toBe(encodeBucketMember(PLAIN));
    }
  });

  it('refuses limits no member could carry, and tails that are no limits', () => {
    for (const limits of [['b', 'a'], ['a', 'a'], [''], ['a|b'], ['a,b']]) {
      expectInternal(() => assertDueEntry({ ...PLAIN, limits }));
    }
    assertDueEntry(LIMITED);
    expectInternal(() => decodeInFlightMember(`3|1|${ID}|email|a,,b`));
    expectInternal(() => decodeBucketMember(`${ID}|3|email|b,a`, 1));
    expectInternal(() => decodeBucketMember(`${ID}|3|email|a|b`, 1));
  });
});
