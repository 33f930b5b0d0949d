import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * `GET /api/tasks/{id}/explain` of a due task that flow control holds, on each backend: a key
 * at its concurrency (one task claimed by a raw HTTP poll and never completed holds its only
 * slot), a paused task type, and a key whose rate allows the next start in an hour. Each is
 * named in the sentence and listed in `limits` with its actor's live figures.
 */
interface LimitFact {
  name: string;
  declared_as: string | null;
  concurrency: number | null;
  running: number | null;
  waiting: number | null;
  throttled_until: string | null;
  holds: string;
}
interface Explained {
  state: string;
  sentence: string;
  limits: LimitFact[] | null;
}

describe.each(BACKENDS)('explain of a task held by its limits on %s', (backend) => {
  let c: TestCluster;
  beforeAll(async () => {
    c = await startTestNode(backend, { logLevel: process.env.TEST_LOG ?? 'silent' });
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  const declare = async (name: string, body: Record<string, unknown>) =>
    expect((await api(c.url, 'PUT', `/api/limits/${name}`, body)).status).toBe(200);
  const submit = async (body: Record<string, unknown>) => {
    const res = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', body);
    expect(res.status).toBe(201);
    return res.body.task_id;
  };
  const explain = async (id: string) => {
    const res = await api<Explained>(c.url, 'GET', `/api/tasks/${id}/explain`);
    expect(res.status).toBe(200);
    return res.body;
  };
  /** Claims one task of `type` over HTTP and never completes it: it holds its permits. */
  const claimAndHold = async (type: string, id: string) => {
    const res = await api<{ tasks: { task_id: string }[] }>(c.url, 'POST', '/api/workers/poll', {
      worker_id: 'w-holder',
      task_types: [type],
      max_tasks: 1,
      wait_ms: 5000,
    });
    expect(res.body.tasks.map((t) => t.task_id)).toEqual([id]);
  };
  /** Explains `id` until a key holds it by `holds`. */
  const heldBy = (id: string, holds: string) =>
    eventually(
      async () => {
        const e = await explain(id);
        return e.limits?.some((l) => l.holds === holds) ? e : undefined;
      },
      10_000,
      `a limit to hold ${id} (${holds})`,
    );

  it('names the key whose slots are all taken, with how many run', async () => {
    const type = uniqueType('xl.full');
    const key = `${type}-key`;
    await declare(key, { concurrency: 1 });
    const first = await submit({ task_type: type, limits: [key] });
    await claimAndHold(type, first);
    const second = await submit({ task_type: type, limits: [key] });
    const e = await heldBy(second, 'full');
    expect(e.state).toBe('ready');
    expect(e.limits).toEqual([
      {
        name: key,
        declared_as: key,
        concurrency: 1,
        running: 1,
        waiting: 1,
        throttled_until: null,
        holds: 'full',
      },
    ]);
    expect(e.sentence).toMatch(
      new RegExp(`^Waiting for a slot of \`${key.replace(/\./g, '\\.')}\` \\(1 of 1 running\\); `),
    );
    // The one that holds it is running, with no limit facts.
    expect((await explain(first)).limits).toBeNull();
  });

  it('names a paused task type', async () => {
    const type = uniqueType('xl.paused');
    expect((await api(c.url, 'POST', `/api/task-types/${type}/pause`)).status).toBe(200);
    const id = await submit({ task_type: type });
    const e = await heldBy(id, 'paused');
    expect(e.limits).toEqual([expect.objectContaining({ name: `type:${type}`, concurrency: 0, holds: 'paused' })]);
    expect(e.sentence).toMatch(new RegExp(`^Paused: \`type:${type.replace(/\./g, '\\.')}\` has concurrency 0; `));
  });

  it('names the key whose rate holds it back, and until when', async () => {
    const type = uniqueType('xl.rate');
    const key = `${type}-api`;
    // One start an hour: the first task takes it, the second waits for the next.
    await declare(key, { rate: { limit: 1, period_seconds: 3600 } });
    const first = await submit({ task_type: type, limits: [key] });
    await claimAndHold(type, first);
    const second = await submit({ task_type: type, limits: [key] });
    const e = await heldBy(second, 'throttled');
    const fact = e.limits![0]!;
    expect(fact).toMatchObject({ name: key, concurrency: null, running: 1, waiting: 1, holds: 'throttled' });
    const until = Date.parse(fact.throttled_until!);
    expect(until).toBeGreaterThan(Date.now() + 3_500_000);
    expect(e.sentence).toMatch(
      new RegExp(
        `^Throttled by \`${key.replace(/\./g, '\\.')}\` until ${fact.throttled_until!.replace(/\./g, '\\.')}; `,
      ),
    );
  });

  it('leaves limits null for a due task none of whose keys is gated', async () => {
    const type = uniqueType('xl.free');
    const id = await submit({ task_type: type });
    const e = await eventually(async () => {
      const x = await explain(id);
      return x.state === 'ready' ? x : undefined;
    });
    expect(e.limits).toBeNull();
    expect(e.sentence).toMatch(/^(Ready|Due)/);
  });
});
