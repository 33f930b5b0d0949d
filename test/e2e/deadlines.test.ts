import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LEASE_EXPIRED, NOT_STARTED, TIMED_OUT } from '../../src/domain/attempt-errors.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { RawWorker } from '../support/raw-worker.js';
import { uniqueType } from '../support/tasks.js';
import { eventually, sleep } from '../support/waits.js';

/**
 * Deadlines (API.md, "Deadlines"), on both backends and both worker paths, through raw
 * clients so the node is held to the contract: an attempt ends at its execution deadline
 * however alive its worker is (HTTP heartbeats, an open socket), an explicit extension moves
 * the deadline up to `max_timeout_seconds` and no further, and a task that cannot start within
 * its start deadline ends `expired`, its dependents cancelled.
 *
 * The safety net waits a minute here: every end below is the mechanism's, not the net's.
 */

interface Polled {
  task_id: string;
  attempt: number;
  lease_token: string;
  lease_expires_at: string;
  deadline_at: string;
}

interface TaskBody {
  status: string;
  attempts: number;
  last_error: string | null;
  started_at: string | null;
  deadline_at: string | null;
}

describe.each(BACKENDS)('deadlines on %s', (backend) => {
  let c: TestCluster;
  const sockets: RawWorker[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, {
      retryBaseSeconds: 0.05,
      retryMaxSeconds: 0.05,
      safetyNetGraceSeconds: 60,
      workerHeartbeatSeconds: 0.5,
    });
  });
  afterAll(async () => {
    for (const w of sockets) w.terminate();
    await c?.cleanup();
  });

  const submit = async (body: Record<string, unknown>): Promise<string> => {
    const res = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', body);
    expect(res.status).toBe(201);
    return res.body.task_id;
  };
  const task = async (id: string) => (await api<TaskBody>(c.url, 'GET', `/api/tasks/${id}`)).body;
  const poll = async (type: string, waitMs = 5000): Promise<Polled[]> => {
    const res = await api<{ tasks: Polled[] }>(c.url, 'POST', '/api/workers/poll', {
      worker_id: 'w-http',
      task_types: [type],
      max_tasks: 1,
      wait_ms: waitMs,
    });
    expect(res.status).toBe(200);
    return res.body.tasks;
  };
  const heartbeat = (t: Polled, extra: Record<string, unknown> = {}) =>
    api<{ lease_expires_at: string; deadline_at: string; error?: { code: string } }>(
      c.url,
      'POST',
      `/api/tasks/${t.task_id}/heartbeat`,
      { lease_token: t.lease_token, ...extra },
    );
  /** Heartbeats every 100 ms until one is refused; answers when (Unix ms) and every deadline seen. */
  const heartbeatUntilRefused = async (t: Polled): Promise<{ refusedMs: number; deadlines: Set<string> }> => {
    const deadlines = new Set<string>();
    for (;;) {
      const res = await heartbeat(t);
      if (res.status === 409) return { refusedMs: Date.now(), deadlines };
      expect(res.status).toBe(200);
      expect(Date.parse(res.body.lease_expires_at)).toBeLessThanOrEqual(Date.parse(res.body.deadline_at));
      deadlines.add(res.body.deadline_at);
      // Real time is the subject: a worker that keeps heartbeating a hung attempt.
      await sleep(100);
    }
  };
  const hello = async (type: string, credits: number) => {
    const made = await RawWorker.hello(c.url, { worker_id: `w-${randomUUID()}`, task_types: [type], credits });
    sockets.push(made.worker);
    return made.worker;
  };

  it('HTTP: a hung attempt that keeps heartbeating ends at timeout_seconds, is retried, then fails as a timeout', async () => {
    const type = uniqueType('dl.http');
    const id = await submit({ task_type: type, timeout_seconds: 1, max_retries: 1 });
    const [first] = await poll(type);
    expect(first).toMatchObject({ task_id: id, attempt: 1 });
    const deadline = Date.parse(first!.deadline_at);
    const started = Date.parse((await task(id)).started_at!);
    expect(deadline - started).toBe(1000);

    // Heartbeats never move the deadline: the first refusal comes at it, not a lease later.
    const { refusedMs, deadlines } = await heartbeatUntilRefused(first!);
    expect([...deadlines]).toEqual([first!.deadline_at]);
    expect(refusedMs).toBeGreaterThanOrEqual(deadline - 50);
    const late = await api(c.url, 'POST', `/api/tasks/${id}/complete`, {
      lease_token: first!.lease_token,
      status: 'succeeded',
    });
    expect(late.status).toBe(409);

    // Retried with backoff: attempt 2, which is left to hang without a heartbeat.
    const [second] = await poll(type);
    expect(second).toMatchObject({ task_id: id, attempt: 2 });
    const ended = await eventually(async () => {
      const t = await task(id);
      return t.status === 'failed' ? t : undefined;
    }, 5000);
    expect(ended).toMatchObject({ attempts: 2, last_error: TIMED_OUT });
    const history = await api<{ executions: { attempt: number; status: string; error: string | null }[] }>(
      c.url,
      'GET',
      `/api/tasks/${id}/history`,
    );
    expect(history.body.executions).toMatchObject([
      { attempt: 2, status: 'timed_out', error: TIMED_OUT },
      { attempt: 1, status: 'timed_out', error: TIMED_OUT },
    ]);
  });

  it('HTTP: extend_seconds moves the deadline, never past max_timeout_seconds from the start', async () => {
    const type = uniqueType('dl.http.ext');
    const id = await submit({ task_type: type, timeout_seconds: 1, max_timeout_seconds: 3, max_retries: 0 });
    const [t] = await poll(type);
    const started = Date.parse((await task(id)).started_at!);
    const extended = await heartbeat(t!, { extend_seconds: 60 });
    expect(extended.status).toBe(200);
    expect(Date.parse(extended.body.deadline_at) - started).toBe(3000);
    expect((await task(id)).deadline_at).toBe(extended.body.deadline_at);
    const { refusedMs } = await heartbeatUntilRefused(t!);
    expect(refusedMs).toBeGreaterThanOrEqual(started + 3000 - 50);
    const ended = await eventually(async () => {
      const body = await task(id);
      return body.status === 'failed' ? body : undefined;
    }, 5000);
    expect(ended.last_error).toBe(TIMED_OUT);
  });

  it('HTTP: without max_timeout_seconds an extension changes nothing', async () => {
    const type = uniqueType('dl.http.noext');
    await submit({ task_type: type, timeout_seconds: 2 });
    const [t] = await poll(type);
    const res = await heartbeat(t!, { extend_seconds: 60 });
    expect(res.body.deadline_at).toBe(t!.deadline_at);
  });

  it('HTTP: a worker that goes silent before the deadline loses its lease ("lease expired")', async () => {
    const type = uniqueType('dl.http.silent');
    const id = await submit({ task_type: type, timeout_seconds: 1, max_timeout_seconds: 30, max_retries: 0 });
    const [t] = await poll(type);
    // Extended far, then silent: the lease (1 s from the last heartbeat) runs out long before it.
    expect((await heartbeat(t!, { extend_seconds: 30 })).status).toBe(200);
    const ended = await eventually(async () => {
      const body = await task(id);
      return body.status === 'failed' ? body : undefined;
    }, 5000);
    expect(ended.last_error).toBe(LEASE_EXPIRED);
  });

  it('channel: an open socket keeps no attempt past its deadline; the worker is told lease_lost and the task runs again', async () => {
    const type = uniqueType('dl.chan');
    const worker = await hello(type, 1);
    const id = await submit({ task_type: type, timeout_seconds: 1, max_retries: 2 });
    const [pushed] = await worker.received(1);
    expect(pushed).toMatchObject({ task_id: id, attempt: 1 });
    const deadline = Date.parse((pushed as unknown as Polled).deadline_at);

    // The socket stays open and answers pings; the handler "hangs": nothing is sent.
    const lost = await worker.next('lease_lost', 5000);
    expect(lost.task_ids).toEqual([id]);
    expect(Date.now()).toBeGreaterThanOrEqual(deadline - 60);
    const after = await eventually(async () => {
      const body = await task(id);
      return body.attempts === 1 && body.status !== 'running' ? body : undefined;
    }, 5000);
    expect(after.last_error).toBe(TIMED_OUT);
    const [ack] = await worker.results([{ task_id: id, lease_token: pushed!.lease_token }]);
    expect(ack).toMatchObject({ task_id: id, ok: false, error: { code: 'lease_lost' } });

    worker.send({ type: 'credit', n: 1 });
    const [, again] = await worker.received(2);
    expect(again).toMatchObject({ task_id: id, attempt: 2 });
  });

  it('channel: extend_seconds in a progress frame is answered with the deadline granted, capped at max_timeout_seconds', async () => {
    const type = uniqueType('dl.chan.ext');
    const worker = await hello(type, 1);
    const id = await submit({ task_type: type, timeout_seconds: 1, max_timeout_seconds: 3, max_retries: 0 });
    const [pushed] = await worker.received(1);
    const started = Date.parse((await task(id)).started_at!);
    worker.send({
      type: 'progress',
      updates: [{ task_id: id, lease_token: pushed!.lease_token, extend_seconds: 60, progress: { step: 1 } }],
    });
    const extended = (await worker.next('extended' as never, 5000)) as unknown as {
      tasks: { task_id: string; deadline_at: string }[];
    };
    expect(extended.tasks).toEqual([{ task_id: id, deadline_at: new Date(started + 3000).toISOString() }]);
    const lost = await worker.next('lease_lost', 6000);
    expect(lost.task_ids).toEqual([id]);
    expect(Date.now()).toBeGreaterThanOrEqual(started + 3000 - 60);
    const ended = await eventually(async () => {
      const body = await task(id);
      return body.status === 'failed' ? body : undefined;
    }, 5000);
    expect(ended.last_error).toBe(TIMED_OUT);
  });

  it('a task that cannot start within start_deadline_seconds ends expired; its dependents are cancelled', async () => {
    const type = uniqueType('dl.start');
    const id = await submit({ task_type: type, start_deadline_seconds: 1 });
    const dependent = await submit({ task_type: uniqueType('dl.dep'), dependencies: [id] });
    const explained = await api<{ sentence: string; start_by: string | null }>(
      c.url,
      'GET',
      `/api/tasks/${id}/explain`,
    );
    expect(explained.body.start_by).not.toBeNull();
    expect(explained.body.sentence).toContain('It expires unless it starts by');

    const expired = await eventually(async () => {
      const body = await task(id);
      return body.status === 'expired' ? body : undefined;
    }, 5000);
    expect(expired.last_error).toContain(NOT_STARTED);
    expect(await eventually(async () => ((await task(dependent)).status === 'cancelled' ? true : undefined))).toBe(
      true,
    );
    expect((await task(dependent)).last_error).toBe(`predecessor ${id} expired`);
    // Nothing is handed out for it any more.
    expect(await poll(type, 0)).toEqual([]);

    const explain = await api<{ state: string; sentence: string }>(c.url, 'GET', `/api/tasks/${id}/explain`);
    expect(explain.body.state).toBe('expired');
    expect(explain.body.sentence).toContain('start_deadline_seconds');
    const history = await api<{ executions: { attempt: number; status: string }[] }>(
      c.url,
      'GET',
      `/api/tasks/${id}/history`,
    );
    expect(history.body.executions).toMatchObject([{ attempt: 1, status: 'expired' }]);
    const listed = await api<{ tasks: { task_id: string }[] }>(
      c.url,
      'GET',
      `/api/tasks?status=expired&task_type=${type}`,
    );
    expect(listed.body.tasks.map((t) => t.task_id)).toEqual([id]);
    const metrics = await api<string>(c.url, 'GET', '/metrics');
    expect(metrics.body).toContain(`wheelhouse_tasks_expired_total{task_type="${type}"} 1`);
    expect((await api(c.url, 'DELETE', `/api/tasks/${id}`)).status).toBe(409);

    // A retry runs it again, with a new start deadline from now.
    expect((await api(c.url, 'POST', `/api/tasks/${id}/retry`)).status).toBe(200);
    const [claimed] = await poll(type);
    expect(claimed).toMatchObject({ task_id: id, attempt: 1 });
  });

  it('a task a worker starts in time does not expire', async () => {
    const type = uniqueType('dl.start.ok');
    const id = await submit({ task_type: type, start_deadline_seconds: 2 });
    const [t] = await poll(type);
    expect(t!.task_id).toBe(id);
    await api(c.url, 'POST', `/api/tasks/${id}/complete`, { lease_token: t!.lease_token, status: 'succeeded' });
    expect((await task(id)).status).toBe('succeeded');
  });
});

describe.each(BACKENDS)("a node's default start deadline on %s", (backend) => {
  let c: TestCluster;
  beforeAll(async () => {
    c = await startTestNode(backend, { startDeadlineSeconds: 1 });
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  it('expires a task that names none, and leaves one that names its own longer deadline', async () => {
    const type = uniqueType('dl.default');
    const short = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', { task_type: type });
    const long = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', {
      task_type: type,
      start_deadline_seconds: 3600,
    });
    await eventually(async () => {
      const body = (await api<{ status: string }>(c.url, 'GET', `/api/tasks/${short.body.task_id}`)).body;
      return body.status === 'expired' ? true : undefined;
    }, 5000);
    const other = await api<{ status: string; start_deadline_seconds: number }>(
      c.url,
      'GET',
      `/api/tasks/${long.body.task_id}`,
    );
    expect(other.body).toMatchObject({ status: 'ready', start_deadline_seconds: 3600 });
  });
});
