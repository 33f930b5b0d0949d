import { describe, expect, it } from 'vitest';
import { leaseTokenDigest, mintLeaseTokens } from '../../src/domain/lease-token.js';
import { WorkerSession } from '../../src/services/worker-session.js';
import type { CompletionRequest } from '../../src/services/types.js';
import { acceptingSocket, sessionDeps } from '../support/worker-session.js';

/**
 * A result from the socket a task was pushed to reaches the store with the digest the claim
 * minted (the session compared the token with the one it holds), so the node hashes each
 * token once, at the claim (issue 31). A resumed lease has no claim at hand: its token is
 * hashed as before. A token the session does not hold never reaches the store.
 */
describe('a worker session passing on the digests of the tokens it holds', () => {
  it('sends the claim’s digest with a pushed task’s result, none with a resumed one’s, nothing for a wrong token', async () => {
    const [pushed, resumed] = mintLeaseTokens(2);
    const seen: CompletionRequest[] = [];
    const deps = sessionDeps((requests) => {
      seen.push(...requests);
      return Promise.resolve(requests.map((r) => ({ taskId: r.taskId, ok: true })));
    });
    const session = new WorkerSession('s-1', 'w-1', null, ['t'], acceptingSocket, deps);
    session.holdAll([
      {
        id: 'pushed',
        leaseToken: pushed!.token,
        leaseTokenDigest: pushed!.digest,
        leaseExpiresMs: 30_000,
        deadlineMs: 60_000,
      },
    ]);
    session.hold({ id: 'resumed', leaseToken: resumed!.token, leaseExpiresMs: 30_000, deadlineMs: 60_000 });
    const result = (taskId: string, leaseToken: string): CompletionRequest => ({
      taskId,
      leaseToken,
      outcome: 'succeeded',
      error: null,
      retryable: true,
    });

    await session.results([
      result('pushed', pushed!.token),
      result('resumed', resumed!.token),
      result('other', pushed!.token),
    ]);

    expect(seen.map((r) => r.taskId)).toEqual(['pushed', 'resumed']);
    expect(seen[0]!.tokenDigest).toBe(pushed!.digest);
    expect(seen[0]!.tokenDigest).toEqual(leaseTokenDigest(pushed!.token));
    expect(seen[1]!.tokenDigest).toBeUndefined();
  });
});
