import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TIMED_OUT } from '../../src/domain/attempt-errors.js';
import { partitionOf } from '../../src/lib/ids.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { RawWorker } from '../support/raw-worker.js';
import { eventually, sleep } from '../support/waits.js';

/**
 * `GET /api/tasks/{id}/explain` on each backend: every state of the contract, each with the
 * facts of its owner (the wheel partition and its epoch, the ready queue's place in line, the
 * worker channel's sockets and the last ask, the lease on the row, the backoff, the schedule,
 * the outcome) and a sentence built from them.
 */
interface Explained {
  task_id: string;
  status: string;
  state: string;
  sentence: string;
  checked_at: string;
  due: { due_at: string; due_in_ms: number; partition: number; owner_node: string; epoch: number | null } | null;
  dependencies: { task_id: string; status: string }[] | null;
  queue: {
    task_type: string;
    priority: number;
    ahead: number | null;
    workers: { connected: number; polling: number; last_asked_at: string | null };
  } | null;
  lease: {
    worker_id: string | null;
    since: string | null;
    lease_expires_at: string | null;
    deadline_at: string | null;
    last_heartbeat_at: string | null;
    owner_node: string | null;
  } | null;
  backoff: { until: string; attempt: number; last_error: string | null } | null;
  schedule: { paused: boolean; next_due_time: string | null } | null;
  outcome: { finished_at: string | null; error: string | null; reason: string } | null;
}
interface Polled {
  tasks: { task_id: string; lease_token: string }[];
}

const PARTITIONS = 8;

describe.each(BACKENDS)('explain on %s', (backend) => {
  let c: TestCluster;
  let nodeId: string;
  beforeAll(async () => {
    // A long backoff, so a failed attempt is still backing off when it is explained.
    c = await startTestNode(backend, {
      partitions: PARTITIONS,
      retryBaseSeconds: 600,
      retryMaxSeconds: 1200,
      logLevel: process.env.TEST_LOG ?? 'silent',
    });
    nodeId = c.node.options.nodeId;
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  const submit = async (body: Record<string, unknown>) =>
    (await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', body)).body.task_id;
  const explain = async (id: string) => {
    const res = await api<Explained>(c.url, 'GET', `/api/tasks/${id}/explain`);
    expect(res.status).toBe(200);
    return res.body;
  };
  const poll = async (taskType: string) => {
    const res = await api<Polled>(c.url, 'POST', '/api/workers/poll', {
      worker_id: 'w-explain',
      task_types: [taskType],
      max_tasks: 1,
      wait_ms: 5000,
    });
    expect(res.body.tasks).toHaveLength(1);
    return res.body.tasks[0]!;
  };
  const complete = (id: string, token: string, body: Record<string, unknown>) =>
    api(c.url, 'POST', `/api/tasks/${id}/complete`, { lease_token: token, ...body });
  const type = (label: string) => `explain.${label}.${backend}`;

  it('scheduled: due in N s on its partition, owned by this node at its epoch', async () => {
    const id = await submit({ task_type: type('scheduled'), schedule: { type: 'delayed', delay_seconds: 3600 } });
    const e = await explain(id);
    expect(e).toMatchObject({ task_id: id, status: 'pending', state: 'scheduled', queue: null, lease: null });
    expect(e.due).toMatchObject({ partition: partitionOf(id, PARTITIONS), owner_node: nodeId });
    expect(e.due!.epoch).toBeGreaterThanOrEqual(1);
    expect(e.due!.due_in_ms).toBeGreaterThan(3_590_000);
    expect(e.sentence).toBe(
      `Due in 60 min (at ${e.due!.due_at}) on partition ${e.due!.partition}, owned by node ${nodeId} (epoch ${e.due!.epoch}).`,
    );
  });

  it('ready: behind the tasks of its type a take hands out first, with the workers of its type', async () => {
    const t = type('ready');
    const first = await submit({ task_type: t, priority: 0 });
    await submit({ task_type: t, priority: 3 });
    const last = await submit({ task_type: t, priority: 9 });
    await submit({ task_type: `${t}.other`, priority: 0 });
    // The wheel hands each to the ready queue as it falls due.
    const before = await eventually(async () => {
      const e = await explain(last);
      return e.queue?.ahead === 2 ? e : undefined;
    });
    expect(before).toMatchObject({ status: 'ready', state: 'ready', due: { owner_node: nodeId } });
    expect(before.queue).toEqual({
      task_type: t,
      priority: 9,
      ahead: 2,
      workers: { connected: 0, polling: 0, last_asked_at: null },
    });
    expect(before.sentence).toMatch(
      new RegExp(
        `^Ready, behind 2 tasks of type ${t.replace(/\./g, '\\.')} .*no worker for .* is connected or polling`,
      ),
    );

    // A poll takes the most urgent one and is remembered; a socket with no credit is counted.
    expect((await poll(t)).task_id).toBe(first);
    const { worker: socket } = await RawWorker.hello(c.url, { worker_id: 'w-socket', task_types: [t], credits: 0 });
    try {
      const after = await explain(last);
      expect(after.queue).toMatchObject({ ahead: 1, workers: { connected: 1, polling: 0 } });
      expect(Date.parse(after.queue!.workers.last_asked_at!)).toBeLessThanOrEqual(Date.parse(after.checked_at));
      expect(after.sentence).toMatch(/behind 1 task of type .*1 worker connected and 0 polling/);
    } finally {
      socket.ws.close();
    }
  });

  it('waiting: on its predecessors, with their statuses', async () => {
    const pred = await submit({ task_type: type('pred'), schedule: { type: 'delayed', delay_seconds: 3600 } });
    const id = await submit({ task_type: type('waiting'), dependencies: [pred] });
    const e = await explain(id);
    expect(e).toMatchObject({
      status: 'blocked',
      state: 'waiting',
      dependencies: [{ task_id: pred, status: 'pending' }],
    });
    expect(e.sentence).toBe(`Waiting on 1 predecessor of 1: ${pred} (pending).`);
  });

  it('running: held by its worker since the claim, deadline, lease and last heartbeat', async () => {
    const id = await submit({ task_type: type('running'), timeout_seconds: 60, max_timeout_seconds: 600 });
    const claimed = await poll(type('running'));
    const fresh = await explain(id);
    expect(fresh.lease).toMatchObject({ worker_id: 'w-explain', last_heartbeat_at: null, owner_node: nodeId });
    expect(fresh.lease!.deadline_at).toBe(fresh.lease!.lease_expires_at);
    expect(fresh.sentence).toMatch(/^Held by worker w-explain since .*, deadline .*, lease until .*, no heartbeat yet/);
    await sleep(5); // the heartbeat must fall on a later millisecond than the claim to be told apart
    // Extended: the lease (60 s from the heartbeat) now ends before the deadline, and dates the heartbeat.
    const beat = await api<{ lease_expires_at: string; deadline_at: string }>(
      c.url,
      'POST',
      `/api/tasks/${id}/heartbeat`,
      { lease_token: claimed.lease_token, extend_seconds: 300 },
    );
    const e = await explain(id);
    expect(e).toMatchObject({ status: 'running', state: 'running', due: null, queue: null });
    expect(e.lease!.deadline_at).toBe(beat.body.deadline_at);
    expect(e.lease!.lease_expires_at).toBe(beat.body.lease_expires_at);
    expect(Date.parse(e.lease!.last_heartbeat_at!)).toBe(Date.parse(beat.body.lease_expires_at) - 60_000);
    expect(Date.parse(e.lease!.since!)).toBeLessThan(Date.parse(e.lease!.last_heartbeat_at!));
  });

  it('backing_off: after a failed attempt, until the backoff ends, with the last error', async () => {
    const id = await submit({ task_type: type('backoff'), max_retries: 3 });
    const claimed = await poll(type('backoff'));
    await complete(id, claimed.lease_token, { status: 'failed', error: 'smtp 421' });
    const e = await explain(id);
    expect(e).toMatchObject({
      status: 'pending',
      state: 'backing_off',
      backoff: { attempt: 1, last_error: 'smtp 421' },
    });
    expect(e.backoff!.until).toBe(e.due!.due_at);
    expect(e.sentence).toMatch(/^Backing off after attempt 1 failed \(smtp 421\): runs again in \d+ (s|min) /);
  });

  it('succeeded, failed and cancelled: how it ended, and why', async () => {
    const ok = await submit({ task_type: type('ok') });
    const okLease = await poll(type('ok'));
    await complete(ok, okLease.lease_token, { status: 'succeeded' });
    expect(await explain(ok)).toMatchObject({
      state: 'succeeded',
      outcome: { error: null, reason: 'attempt 1 succeeded' },
    });

    const bad = await submit({ task_type: type('bad'), max_retries: 0 });
    const dependent = await submit({ task_type: type('dependent'), dependencies: [bad] });
    const badLease = await poll(type('bad'));
    await complete(bad, badLease.lease_token, { status: 'failed', error: 'disk full' });
    const failed = await explain(bad);
    expect(failed).toMatchObject({ state: 'failed', outcome: { error: 'disk full' } });
    expect(failed.outcome!.reason).toMatch(/retries spent/);
    expect(failed.sentence).toMatch(/^Failed at .*: retries spent .*\(disk full\)\.$/);
    const knockOn = await eventually(async () => {
      const e = await explain(dependent);
      return e.state === 'cancelled' ? e : undefined;
    });
    expect(knockOn.outcome!.reason).toBe(`predecessor ${bad} failed`);

    const later = await submit({ task_type: type('cancel'), schedule: { type: 'delayed', delay_seconds: 3600 } });
    await api(c.url, 'DELETE', `/api/tasks/${later}`);
    const cancelled = await explain(later);
    expect(cancelled).toMatchObject({ state: 'cancelled', outcome: { reason: 'cancelled by request' } });
    expect(cancelled.sentence).toMatch(/^Cancelled at .*: cancelled by request\.$/);
  });

  it('failed and cancelled, the other reasons: a deadline, a lease that ran out, an error not retryable, a schedule deleted or out of fire times', async () => {
    const failedOf = (id: string, what: string) =>
      eventually(
        async () => {
          const e = await explain(id);
          return e.state === 'failed' ? e : undefined;
        },
        15_000,
        what,
      );
    // A worker that took the task over HTTP and never reports: its attempt reaches its 1 s
    // deadline, and with max_retries 0 that ends the task.
    const hung = await submit({ task_type: type('hung'), max_retries: 0, timeout_seconds: 1 });
    await poll(type('hung'));
    const timedOut = await failedOf(hung, 'the hung task to fail');
    expect(timedOut.outcome).toMatchObject({
      error: TIMED_OUT,
      reason: 'attempt 1 reached its deadline (timeout_seconds 1) with no retry left',
    });
    expect(timedOut.sentence).toMatch(
      /^Failed at .*: attempt 1 reached its deadline \(timeout_seconds 1\) with no retry left \(timed out: the attempt reached its deadline\)\.$/,
    );

    // A worker that pushed its deadline far away, then went silent: its 1 s lease runs out first.
    const lapsed = await submit({
      task_type: type('lapsed'),
      max_retries: 0,
      timeout_seconds: 1,
      max_timeout_seconds: 60,
    });
    const lapsedLease = await poll(type('lapsed'));
    await api(c.url, 'POST', `/api/tasks/${lapsed}/heartbeat`, {
      lease_token: lapsedLease.lease_token,
      extend_seconds: 60,
    });
    const expired = await failedOf(lapsed, 'the lapsed task to fail');
    expect(expired.outcome).toMatchObject({
      error: 'lease expired',
      reason: 'the lease of attempt 1 ran out with no retry left',
    });
    expect(expired.sentence).toMatch(
      /^Failed at .*: the lease of attempt 1 ran out with no retry left \(lease expired\)\.$/,
    );

    const refused = await submit({ task_type: type('refused'), max_retries: 3 });
    const refusedLease = await poll(type('refused'));
    await complete(refused, refusedLease.lease_token, { status: 'failed', error: 'bad input', retryable: false });
    const notRetryable = await explain(refused);
    expect(notRetryable.outcome).toMatchObject({
      error: 'bad input',
      reason: 'attempt 1 failed and was not retryable',
    });
    expect(notRetryable.sentence).toMatch(/^Failed at .*: attempt 1 failed and was not retryable \(bad input\)\.$/);

    const deleted = await submit({
      task_type: type('cron.deleted'),
      schedule: { type: 'cron', cron_expression: '0 0 1 1 *' },
    });
    await api(c.url, 'DELETE', `/api/tasks/${deleted}`);
    const gone = await explain(deleted);
    expect(gone).toMatchObject({ state: 'cancelled', outcome: { reason: 'the schedule was deleted' } });
    expect(gone.sentence).toMatch(/^Cancelled at .*: the schedule was deleted\.$/);

    // Every second until a second from now: a fire or two, then no fire time is left.
    const ending = await submit({
      task_type: type('cron.ending'),
      schedule: { type: 'cron', cron_expression: '* * * * * *', end_time: new Date(Date.now() + 1_500).toISOString() },
    });
    const ended = await eventually(
      async () => {
        const e = await explain(ending);
        return e.state === 'succeeded' ? e : undefined;
      },
      15_000,
      'the schedule to run out of fire times',
    );
    expect(ended.outcome).toMatchObject({ error: null, reason: 'no fire time left' });
    expect(ended.sentence).toMatch(/^Succeeded at .*: no fire time left\.$/);
  });

  it('active and paused: a cron schedule’s next fire, or its pause', async () => {
    const id = await submit({ task_type: type('cron'), schedule: { type: 'cron', cron_expression: '0 0 1 1 *' } });
    const active = await explain(id);
    expect(active).toMatchObject({ status: 'active', state: 'active', schedule: { paused: false } });
    expect(active.sentence).toBe(`The schedule is active: next fire at ${active.schedule!.next_due_time}.`);
    await api(c.url, 'POST', `/api/tasks/${id}/pause`);
    expect(await explain(id)).toMatchObject({
      status: 'paused',
      state: 'paused',
      schedule: { paused: true, next_due_time: null },
    });
  });

  it('answers 404 for an unknown task and 400 for a malformed id', async () => {
    expect((await api(c.url, 'GET', '/api/tasks/0192f3a4-5b6c-7d8e-9f00-112233445566/explain')).status).toBe(404);
    expect((await api(c.url, 'GET', '/api/tasks/nope/explain')).status).toBe(400);
  });
});
