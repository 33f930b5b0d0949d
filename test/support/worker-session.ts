import { FakeClock } from '../../src/runtime/clock.js';
import type { ChannelSocket, SessionDeps } from '../../src/services/worker-session.js';
import type { CompletionRequest } from '../../src/services/types.js';

/**
 * What a `WorkerSession` needs, for tests of the session alone: results go to `complete`,
 * heartbeats and progress are refused (a test that needs them brings its own), the clock is a
 * `FakeClock` at 0, and any error the session reports fails the test.
 */
export function sessionDeps(
  complete: (requests: readonly CompletionRequest[]) => Promise<{ taskId: string; ok: boolean }[]>,
): SessionDeps {
  return {
    workers: {
      complete,
      heartbeat: () => Promise.reject(new Error('not in this test')),
      progress: () => Promise.reject(new Error('not in this test')),
    },
    clock: new FakeClock(0),
    onError: (error) => {
      throw error;
    },
  };
}

/** A socket that takes every frame, recording nothing. */
export const acceptingSocket: ChannelSocket = {
  open: true,
  backlogged: false,
  send: () => true,
  close: () => undefined,
};
