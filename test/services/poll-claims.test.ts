import { describe, expect, it } from 'vitest';
import { MAX_CLAIM_ROWS, PollClaims, type ClaimShare } from '../../src/services/poll-claims.js';
import type { Assignment } from '../../src/services/types.js';

/**
 * Long-polls of the same task types that look in one event-loop turn share one claim (one
 * take, one statement) instead of a claim each (issue 31, the HTTP worker path).
 */
interface Call {
  taskTypes: string[];
  shares: ClaimShare[];
  signal: AbortSignal | undefined;
}

/** A claim that deals `n` made-up tasks to each share, up to its `maxTasks`, and records the call. */
function recordingClaims(perShare = 2): { calls: Call[]; claims: PollClaims } {
  const calls: Call[] = [];
  const claims = new PollClaims((taskTypes, shares, signal) => {
    calls.push({ taskTypes, shares: [...shares], signal });
    return Promise.resolve(
      shares.map((share) =>
        Array.from(
          { length: Math.min(perShare, share.maxTasks) },
          (_, i) => ({ id: `${share.workerId}-${i}` }) as unknown as Assignment,
        ),
      ),
    );
  });
  return { calls, claims };
}

const ids = (tasks: Assignment[]): string[] => tasks.map((t) => t.id);

describe('the long-polls’ shared claims', () => {
  it('claims once for the polls of one turn with the same task types, each poll getting its own share', async () => {
    const { calls, claims } = recordingClaims();
    const [a, b, c] = await Promise.all([
      claims.claim({ workerId: 'w1', taskTypes: ['email'], maxTasks: 5 }),
      claims.claim({ workerId: 'w2', taskTypes: ['email'], maxTasks: 1 }),
      claims.claim({ workerId: 'w3', taskTypes: ['email'], maxTasks: 3 }),
    ]);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.taskTypes).toEqual(['email']);
    expect(calls[0]!.shares).toEqual([
      { workerId: 'w1', taskTypes: ['email'], maxTasks: 5 },
      { workerId: 'w2', taskTypes: ['email'], maxTasks: 1 },
      { workerId: 'w3', taskTypes: ['email'], maxTasks: 3 },
    ]);
    expect(ids(a)).toEqual(['w1-0', 'w1-1']);
    expect(ids(b)).toEqual(['w2-0']);
    expect(ids(c)).toEqual(['w3-0', 'w3-1']);
  });

  it('groups by the set of task types (order and repeats aside), and claims apart for other types', async () => {
    const { calls, claims } = recordingClaims();
    await Promise.all([
      claims.claim({ workerId: 'w1', taskTypes: ['a', 'b'], maxTasks: 1 }),
      claims.claim({ workerId: 'w2', taskTypes: ['b', 'a', 'b'], maxTasks: 1 }),
      claims.claim({ workerId: 'w3', taskTypes: ['a'], maxTasks: 1 }),
    ]);
    expect(calls.map((c) => c.shares.map((s) => s.workerId))).toEqual([['w1', 'w2'], ['w3']]);
  });

  it('claims again in a later turn, and a poll alone keeps its abort signal; a group claims with none', async () => {
    const { calls, claims } = recordingClaims();
    const controller = new AbortController();
    await claims.claim({ workerId: 'w1', taskTypes: ['t'], maxTasks: 1 }, controller.signal);
    await Promise.all([
      claims.claim({ workerId: 'w1', taskTypes: ['t'], maxTasks: 1 }, controller.signal),
      claims.claim({ workerId: 'w2', taskTypes: ['t'], maxTasks: 1 }, new AbortController().signal),
    ]);
    expect(calls).toHaveLength(2);
    expect(calls[0]!.signal).toBe(controller.signal);
    expect(calls[1]!.signal).toBeUndefined();
  });

  it('leaves out a poll whose worker went away before the claim, and asks nothing for a poll that wants nothing', async () => {
    const { calls, claims } = recordingClaims();
    const gone = new AbortController();
    const goneLater = new AbortController();
    const results = Promise.all([
      claims.claim({ workerId: 'w1', taskTypes: ['t'], maxTasks: 1 }, gone.signal),
      claims.claim({ workerId: 'w2', taskTypes: ['t'], maxTasks: 1 }, goneLater.signal),
      claims.claim({ workerId: 'w3', taskTypes: ['t'], maxTasks: 1 }),
      claims.claim({ workerId: 'w4', taskTypes: ['t'], maxTasks: 0 }),
    ]);
    gone.abort();
    goneLater.abort();
    const [a, b, c, d] = await results;
    expect(calls).toHaveLength(1);
    expect(calls[0]!.shares.map((s) => s.workerId)).toEqual(['w3']);
    expect(calls[0]!.signal).toBeUndefined();
    expect([a, b, d]).toEqual([[], [], []]);
    expect(ids(c)).toEqual(['w3-0']);
  });

  it('fails every poll of a group whose claim failed, and no other', async () => {
    const claims = new PollClaims((taskTypes) =>
      taskTypes[0] === 'bad' ? Promise.reject(new Error('store down')) : Promise.resolve([[]]),
    );
    const results = await Promise.allSettled([
      claims.claim({ workerId: 'w1', taskTypes: ['bad'], maxTasks: 1 }),
      claims.claim({ workerId: 'w2', taskTypes: ['bad'], maxTasks: 1 }),
      claims.claim({ workerId: 'w3', taskTypes: ['good'], maxTasks: 1 }),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'fulfilled']);
  });

  it('cuts a group that wants more rows than one claim takes into several claims', async () => {
    const { calls, claims } = recordingClaims();
    const each = Math.floor(MAX_CLAIM_ROWS / 2);
    await Promise.all(
      ['w1', 'w2', 'w3'].map((workerId) => claims.claim({ workerId, taskTypes: ['t'], maxTasks: each })),
    );
    expect(calls.map((c) => c.shares.map((s) => s.workerId))).toEqual([['w1', 'w2'], ['w3']]);
  });
});
