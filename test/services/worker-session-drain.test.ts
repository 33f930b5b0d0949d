import { describe, expect, it } from 'vitest';
import { WorkerSession, type ChannelSocket } from '../../src/services/worker-session.js';
import type { CompletionRequest } from '../../src/services/types.js';
import { sessionDeps } from '../support/worker-session.js';

/**
 * Found by the nemesis: a worker stopping gracefully (goodbye, then its last results) had its
 * socket closed while those results were being recorded — the lease was released for them, so
 * the session looked drained to the next thing that checked (a heartbeat pass) — and the node
 * stored them without the worker ever hearing so.
 */
describe('a draining worker session', () => {
  it('closes only once the results it is recording are answered', async () => {
    const events: string[] = [];
    const socket: ChannelSocket = {
      open: true,
      backlogged: false,
      send: (frame) => {
        events.push(frame.type);
        return true;
      },
      close: (code) => void events.push(`close ${code}`),
    };
    let answer!: () => void;
    const recorded = new Promise<void>((resolve) => (answer = resolve));
    const deps = sessionDeps(async (requests: readonly CompletionRequest[]) => {
      await recorded;
      return requests.map((r) => ({ taskId: r.taskId, ok: true }));
    });
    const session = new WorkerSession('s-1', 'w-1', null, ['t'], socket, deps);
    session.holdAll([{ id: 'task-1', leaseToken: 'token-1', leaseExpiresMs: 30_000, deadlineMs: 60_000 }]);
    session.goodbye();
    expect(events).toEqual([]); // a lease is held: not drained

    const results = session.results([
      { taskId: 'task-1', leaseToken: 'token-1', outcome: 'succeeded', error: null, retryable: true },
    ]);
    // While the result is being recorded, whatever checks for a drained session (a heartbeat
    // pass, a lease lost, a claim ending) must not close it.
    session.closeIfDrained();
    expect(events).toEqual([]);

    answer();
    await results;
    expect(events).toEqual(['acks', 'close 1000']);
  });
});
