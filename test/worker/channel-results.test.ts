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
    ).toEqual({ accepted: 1, refused: 0, again: 0, againCode: null });
    results.requeue();
    expect(results.leases()).toEqual([
      { task_id: 't-1', lease_token: 'tok-1' },
      { task_id: 't-2', lease_token: 'tok-2' },
    ]);
    results.send((f) => frames.push(f));
    expect(frames[1]).toBe(`{"type":"results","results":[${JSON.stringify(result(1))},${JSON.stringify(result(2))}]}`);
    expect(results.ack([{ task_id: 't-1', ok: false }], tell)).toEqual({
      accepted: 0,
      refused: 1,
      again: 0,
      againCode: null,
    });
    // Each known result is told once, with the node's answer; what is left is dropped by id.
    expect(told).toEqual([
      ['t-0', true],
      ['t-1', false],
    ]);
    expect(results.clear()).toEqual({ unsent: [], unacknowledged: ['t-2'] });
  });

  it('keeps a result the node could not record (a store code) to send again, untold; lease_lost and unknown codes are final', () => {
    const results = new ChannelResults(10);
    for (let n = 0; n < 4; n++) results.add(result(n));
    results.send(() => undefined);
    const told: [string, boolean][] = [];
    const outcome = results.ack(
      [
        { task_id: 't-0', ok: false, error: { code: 'store_unavailable', message: 'db out' } },
        { task_id: 't-1', ok: false, error: { code: 'internal', message: 'send them again' } },
        { task_id: 't-2', ok: false, error: { code: 'lease_lost', message: 'gone' } },
        { task_id: 't-3', ok: false, error: { code: 'validation_failed', message: 'no' } },
      ],
      (taskId, ok) => void told.push([taskId, ok]),
    );
    expect(outcome).toEqual({ accepted: 0, refused: 2, again: 2, againCode: 'store_unavailable' });
    expect(told).toEqual([
      ['t-2', false],
      ['t-3', false],
    ]);
    expect(results.waitingCount).toBe(2);
    expect(results.leases().map((l) => l.task_id)).toEqual(['t-0', 't-1']); // a new socket resumes them
    const frames: string[] = [];
    results.send((f) => frames.push(f));
    expect(frames).toEqual([
      `{"type":"results","results":[${JSON.stringify(result(0))},${JSON.stringify(result(1))}]}`,
    ]);
  });
});
