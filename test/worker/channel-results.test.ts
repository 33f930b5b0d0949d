import { describe, expect, it } from 'vitest';
import { ChannelResults } from '../../src/worker/channel-results.js';

/** The channel's results on their way: frames bounded in count and bytes, acks, and requeue on a new socket. */
describe('ChannelResults', () => {
  const result = (n: number, size = 0) => ({
    task_id: `t-${n}`,
    lease_token: `tok-${n}`,
    status: 'succeeded' as const,
    ...(size > 0 ? { result: 'x'.repeat(size) } : {}),
  });

  it('splits results into frames of at most maxBatchSize results and 8 MiB', () => {
    const results = new ChannelResults(3);
    for (let n = 0; n < 7; n++) results.add(result(n));
    const frames: string[] = [];
    expect(results.send((f) => frames.push(f))).toBe(3);
    expect(frames.map((f) => (JSON.parse(f) as { results: unknown[] }).results.length)).toEqual([3, 3, 1]);

    const big = new ChannelResults(1000);
    for (let n = 0; n < 5; n++) big.add(result(n, 3 * 1024 * 1024)); // 3 MiB each
    const bigFrames: string[] = [];
    big.send((f) => bigFrames.push(f));
    expect(bigFrames.map((f) => (JSON.parse(f) as { results: unknown[] }).results.length)).toEqual([2, 2, 1]);
    for (const f of bigFrames) expect(Buffer.byteLength(f)).toBeLessThanOrEqual(8 * 1024 * 1024 + 100);
  });

  it('counts acks once, ignores unknown ids, and sends unacknowledged results again after requeue', () => {
    const results = new ChannelResults(10);
    for (let n = 0; n < 3; n++) results.add(result(n));
    const frames: string[] = [];
    results.send((f) => frames.push(f));
    expect(results.size).toBe(3);
    expect(results.waitingCount).toBe(0);
    const told: [string, boolean][] = [];
    const tell = (taskId: string, ok: boolean): void => void told.push([taskId, ok]);
    expect(
      results.ack(
        [
          { task_id: 't-0', ok: true },
          { task_id: 't-0', ok: true },
          { task_id: 'nope', ok: false },
        ],
        tell,
      ),
    ).toEqual({ accepted: 1, refused: 0 });
    results.requeue();
    expect(results.leases()).toEqual([
      { task_id: 't-1', lease_token: 'tok-1' },
      { task_id: 't-2', lease_token: 'tok-2' },
    ]);
    results.send((f) => frames.push(f));
    expect(frames[1]).toBe(`{"type":"results","results":[${JSON.stringify(result(1))},${JSON.stringify(result(2))}]}`);
    expect(results.ack([{ task_id: 't-1', ok: false }], tell)).toEqual({ accepted: 0, refused: 1 });
    // Each known result is told once, with the node's answer; what is left is dropped by id.
    expect(told).toEqual([
      ['t-0', true],
      ['t-1', false],
    ]);
    expect(results.clear()).toEqual({ unsent: [], unacknowledged: ['t-2'] });
  });
});
