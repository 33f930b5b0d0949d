import { afterEach, describe, expect, it, vi } from 'vitest';
import { TIMED_OUT } from '../../src/domain/attempt-errors.js';
import { LEASE } from '../../src/actors/worker-lease.js';
import { FakeClock } from '../../src/runtime/clock.js';
import { SafetyNet, type SafetyNetPass } from '../../src/services/safety-net.js';
import { dagClient } from '../support/dags.js';
import { pollOnFakeTime } from '../support/faulty-node.js';
import { BACKENDS, startTestNode, type BackendName, type TestCluster } from '../support/nodes.js';
import { eventually } from '../support/waits.js';
import { uniqueType } from '../support/tasks.js';

/**
 * The safety nets catch what a broken mechanism leaves behind, and say so: with a lease's
 * actor gone (nothing will expire it) or a task's ready entry gone (nothing will fire it),
 * the net hands the task on once it is a grace past its lease or due time — not before —
 * and counts it by kind. On a FakeClock, on both backends.
 */
const START = Date.UTC(2026, 10, 30, 14, 0, 0);
const GRACE_MS = 10_000;
const OPTIONS = { safetyNetSeconds: 1, safetyNetGraceSeconds: GRACE_MS / 1000, retryBaseSeconds: 0.1 };

describe.each(BACKENDS)('the safety nets on %s', (backend: BackendName) => {
  let c: TestCluster | undefined;
  afterEach(async () => {
    vi.restoreAllMocks();
    await c?.cleanup();
    c = undefined;
  });

  const recovered = (node: TestCluster, kind: string): Promise<number> =>
    node.node.metrics.value('wheelhouse_safety_net_recovered_total', { kind });

  it('expires a lease that nothing else will, a grace after it ran out, and counts it', async () => {
    const clock = new FakeClock(START);
    c = await startTestNode(backend, { ...OPTIONS, logLevel: process.env.TEST_LOG ?? 'silent' }, { clock });
    const node = c;
    const w = dagClient(() => node.url);
    const type = uniqueType('net-lease');
    const id = (await w.submitTask({ task_type: type, timeout_seconds: 5 })).body.task_id;
    const first = await pollOnFakeTime(() => node.url, clock, type, START + 5_000);
    expect(first?.tasks.map((t) => t.attempt)).toEqual([1]);
    const expiresMs = first!.atMs + 5_000;
    // The mechanism breaks: the lease's actor leaves memory with its timer, and no message
    // will bring it back.
    await node.node.system.passivate(LEASE, id);
    expect(node.node.system.holds(LEASE, id)).toBe(false);

    const early = await pollOnFakeTime(() => node.url, clock, type, expiresMs + GRACE_MS - 100, 250);
    expect(early).toBeNull();
    expect(await recovered(node, 'lease')).toBe(0);
    const second = await pollOnFakeTime(() => node.url, clock, type, expiresMs + GRACE_MS + 3_000, 250);
    expect(second?.tasks).toEqual([expect.objectContaining({ task_id: id, attempt: 2 })]);
    expect(await recovered(node, 'lease')).toBe(1);
    expect((await w.task(id)).last_error).toBe(TIMED_OUT);
  });

  it('fires a pending task that nothing holds, a grace after it fell due, and counts it', async () => {
    const clock = new FakeClock(START);
    c = await startTestNode(backend, { ...OPTIONS, logLevel: process.env.TEST_LOG ?? 'silent' }, { clock });
    const node = c;
    const w = dagClient(() => node.url);
    const type = uniqueType('net-pending');
    const id = (await w.submitTask({ task_type: type })).body.task_id;
    const { ready } = node.node.backend;
    // The wheel fires it; then its ready entry vanishes behind the node's back (taken and
    // dropped, as a claim that refused and dropped the only entry would).
    const taken = await eventually(
      async () => {
        await clock.advance(0);
        const got = await ready.take([type], 10, clock.now());
        return got.length > 0 ? got : undefined;
      },
      10_000,
      'the task in its ready queue',
    );
    await ready.ack(taken);

    const early = await pollOnFakeTime(() => node.url, clock, type, START + GRACE_MS - 100, 250);
    expect(early).toBeNull();
    expect(await recovered(node, 'pending')).toBe(0);
    const handed = await pollOnFakeTime(() => node.url, clock, type, START + GRACE_MS + 3_000, 250);
    expect(handed?.tasks).toEqual([expect.objectContaining({ task_id: id, attempt: 1 })]);
    expect(await recovered(node, 'pending')).toBe(1);
    expect(await recovered(node, 'lease')).toBe(0);
  });

  it('finds nothing while the mechanisms work', async () => {
    const clock = new FakeClock(START);
    c = await startTestNode(backend, { ...OPTIONS, logLevel: process.env.TEST_LOG ?? 'silent' }, { clock });
    const node = c;
    const w = dagClient(() => node.url);
    const type = uniqueType('net-idle');
    await w.submitTask({ task_type: type, timeout_seconds: 2 });
    await w.submitTask({ task_type: type, schedule: { type: 'delayed', delay_seconds: 5 } });
    // One is claimed and left to expire (the lease's own timer hands it on), one waits its
    // turn: all of it through the mechanisms, well past the grace.
    const first = await pollOnFakeTime(() => node.url, clock, type, START + 5_000);
    expect(first?.tasks).toHaveLength(1);
    const rest = await pollOnFakeTime(() => node.url, clock, type, START + 10_000);
    await w.complete(rest!.tasks);
    const again = await pollOnFakeTime(() => node.url, clock, type, START + 10_000);
    await w.complete(again?.tasks ?? []);
    // Every pass the node's net completes, with the fake time it started at. A pass runs on
    // real database round trips while the fake clock moves on, and the next is armed only
    // when it ends: what counts is a pass that started after everything was past its grace
    // and has ended, not the counter read right after the clock moved.
    const passes: { startedAtMs: number; pass: SafetyNetPass }[] = [];
    const sweep = SafetyNet.prototype.sweep;
    vi.spyOn(SafetyNet.prototype, 'sweep').mockImplementation(async function (this: SafetyNet) {
      const startedAtMs = clock.now();
      const pass = await sweep.call(this);
      passes.push({ startedAtMs, pass });
      return pass;
    });
    await clock.advance(GRACE_MS * 2);
    const settledMs = clock.now();
    const after = await eventually(
      async () => {
        const done = passes.find((p) => p.startedAtMs >= settledMs);
        if (done === undefined) await clock.advance(OPTIONS.safetyNetSeconds * 1000);
        return done;
      },
      10_000,
      'a safety-net pass that started after the grace and ended',
    );
    expect(after.pass).toEqual({ leases: 0, pending: 0, schedules: 0 });
    for (const kind of ['lease', 'pending']) expect(await recovered(node, kind), kind).toBe(0);
  });
});
