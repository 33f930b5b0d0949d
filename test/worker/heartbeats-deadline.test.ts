import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LeaseLostError } from '../../src/worker/errors.js';
import { keepLeaseAlive, type HeartbeatDeps, type TrackedLease } from '../../src/worker/heartbeats.js';
import type { NodeAnswer, NodeClient } from '../../src/worker/http.js';

/**
 * The HTTP heartbeat loop against the attempt's deadline, on a fake clock with a stub client
 * (no sockets, so fake timers fight nothing): no heartbeat is scheduled past the deadline (nor
 * just before it), a lease that already runs to the deadline does not make the heartbeats
 * crowd towards it, and an extension goes out in a heartbeat at once and settles with the
 * answer's deadline — or with LeaseLostError on a 409.
 */

interface Sent {
  atMs: number;
  body: Record<string, unknown>;
}

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});

afterEach(() => {
  vi.useRealTimers();
});

/**
 * A node whose heartbeat answers hold the lease `leaseMs` more, capped at the deadline as the
 * contract says; `deadlineMs: null` is a node older than deadlines.
 */
function stubNode(state: { deadlineMs: number | null; leaseMs: number; status?: number }) {
  const sent: Sent[] = [];
  const client = {
    post: (_path: string, body: Record<string, unknown>): Promise<NodeAnswer> => {
      const now = Date.now();
      sent.push({ atMs: now, body });
      if (state.status !== undefined && state.status !== 200)
        return Promise.resolve({ status: state.status, body: null, retryAfterMs: null });
      const extend = body.extend_seconds;
      if (typeof extend === 'number' && state.deadlineMs !== null)
        state.deadlineMs = Math.max(state.deadlineMs, now + extend * 1000);
      const leaseExpires = Math.min(now + state.leaseMs, state.deadlineMs ?? Infinity);
      return Promise.resolve({
        status: 200,
        body: {
          ok: true,
          lease_expires_at: new Date(leaseExpires).toISOString(),
          ...(state.deadlineMs === null ? {} : { deadline_at: new Date(state.deadlineMs).toISOString() }),
          cancel_requested: false,
        },
        retryAfterMs: null,
      });
    },
  } as unknown as NodeClient;
  return { sent, client };
}

function lease(leaseExpiresMs: number, deadlineMs: number | null): TrackedLease {
  return { taskId: 't-1', leaseToken: 'tok-1', leaseExpiresMs, deadlineMs, lost: false };
}

function deps(client: NodeClient, everyMs: number | null): HeartbeatDeps {
  return {
    client,
    everyMs,
    onLost: () => undefined,
    onCancelRequested: () => undefined,
    onDeadline: () => undefined,
    onError: () => undefined,
  };
}

describe('heartbeats against the deadline', () => {
  it('schedules no heartbeat past the deadline, nor within 250 ms of it', async () => {
    const node = stubNode({ deadlineMs: 3_000, leaseMs: 1_000 });
    const keeper = keepLeaseAlive(lease(1_000, 3_000), deps(node.client, 400));
    await vi.advanceTimersByTimeAsync(10_000);
    expect(node.sent.map((s) => s.atMs)).toEqual([400, 800, 1_200, 1_600, 2_000, 2_400]);
    keeper.stop();
  });

  it('keeps its pace once the lease runs to the deadline, rather than a third of a shrinking remainder', async () => {
    // A 3 s lease and a 3 s deadline: every answer's lease ends at the deadline.
    const node = stubNode({ deadlineMs: 3_000, leaseMs: 3_000 });
    const keeper = keepLeaseAlive(lease(3_000, 3_000), deps(node.client, null));
    await vi.advanceTimersByTimeAsync(10_000);
    expect(node.sent.map((s) => s.atMs)).toEqual([1_000, 2_000]);
    keeper.stop();
  });

  it('without a deadline (an older node) heartbeats go on as before', async () => {
    const node = stubNode({ deadlineMs: null, leaseMs: 1_200 });
    const keeper = keepLeaseAlive(lease(1_200, null), deps(node.client, null));
    await vi.advanceTimersByTimeAsync(2_000);
    expect(node.sent.map((s) => s.atMs)).toEqual([400, 800, 1_200, 1_600, 2_000]);
    keeper.stop();
  });

  it('sends an extension in a heartbeat at once, and resolves with the deadline the node answers', async () => {
    const node = stubNode({ deadlineMs: 3_000, leaseMs: 3_000 });
    const keeper = keepLeaseAlive(lease(3_000, 3_000), deps(node.client, 60_000));
    await vi.advanceTimersByTimeAsync(500);
    expect(node.sent).toEqual([]);
    const granted = keeper.extend(10);
    expect(node.sent).toEqual([{ atMs: 500, body: { lease_token: 'tok-1', extend_seconds: 10 } }]);
    expect(await granted).toBe(10_500);
    keeper.stop();
  });

  it('an extension asked while a heartbeat is in flight goes out as soon as it is answered', async () => {
    let answer!: () => void;
    const node = stubNode({ deadlineMs: 3_000, leaseMs: 3_000 });
    const post = node.client.post.bind(node.client);
    const slow = {
      post: (path: string, body: Record<string, unknown>) =>
        body.extend_seconds === undefined
          ? new Promise<NodeAnswer>((resolve) => (answer = () => void post(path, body).then(resolve)))
          : post(path, body),
    } as unknown as NodeClient;
    const keeper = keepLeaseAlive(lease(3_000, 3_000), deps(slow, 300));
    await vi.advanceTimersByTimeAsync(300); // the first heartbeat leaves and waits for its answer
    const granted = keeper.extend(5);
    expect(node.sent).toEqual([]);
    await vi.advanceTimersByTimeAsync(100);
    answer();
    await vi.advanceTimersByTimeAsync(0); // the answer, then the extension's heartbeat at once
    expect(await granted).toBe(5_400);
    expect(node.sent.map((s) => s.body)).toEqual([
      { lease_token: 'tok-1' },
      { lease_token: 'tok-1', extend_seconds: 5 },
    ]);
    keeper.stop();
  });

  it('an extension answered 409 rejects with LeaseLostError, and the heartbeats stop', async () => {
    const node = stubNode({ deadlineMs: 3_000, leaseMs: 3_000, status: 409 });
    const lost: string[] = [];
    const keeper = keepLeaseAlive(lease(3_000, 3_000), {
      ...deps(node.client, 200),
      onLost: (l) => void lost.push(l.taskId),
    });
    await expect(keeper.extend(5)).rejects.toBeInstanceOf(LeaseLostError);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(node.sent).toHaveLength(1);
    expect(lost).toEqual(['t-1']);
    await expect(keeper.extend(5)).rejects.toBeInstanceOf(LeaseLostError);
  });
});
