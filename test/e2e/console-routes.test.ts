import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, type Worker } from '../../src/worker/index.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * The routes of the dashboard's operations console, on both backends: `/admin/failures` groups
 * the failed tasks by type and error with the right counts, newest failure and a sample of the
 * group, and its group's text as `error_equals` retries that group and no other (not a group
 * of the same type whose longer error contains that text);
 * `/admin/workers` lists a channel socket and a waiting long-poll with their node, task types,
 * credits and leases; `/admin/whoami` answers the key's scopes (all of them while the node
 * asks for none); `/admin/dags` lists the newest graphs by their ids, paged.
 */

interface Group {
  task_type: string;
  error: string;
  count: number;
  newest_failure: string;
  sample_task_id: string;
}
interface Failures {
  groups: Group[];
  group_count: number;
  scanned: number;
  scan_limit: number;
}
interface Roster {
  workers: {
    worker_id: string;
    node_id: string;
    transport: string;
    task_types: string[];
    credits: number | null;
    leases: number | null;
    connected_since: string;
  }[];
  more: number;
  unanswered: string[];
}

describe.each(BACKENDS)('the console routes, %s', (backend) => {
  let c: TestCluster;
  const workers: Worker[] = [];
  const A = uniqueType('console.a');
  const B = uniqueType('console.b');

  beforeAll(async () => {
    c = await startTestNode(backend);
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop({ timeoutMs: 0 })));
    await c?.cleanup();
  });

  const ok = async <T>(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<T> => {
    const r = await api<T>(c.url, method, path, body, headers);
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  };
  const submit = async (type: string, errors: string[]): Promise<string[]> => {
    const r = await ok<{ tasks: { task_id: string }[] }>('POST', '/api/tasks/batch', {
      tasks: errors.map((err) => ({ task_type: type, payload: { err }, max_retries: 0 })),
    });
    return r.tasks.map((t) => t.task_id);
  };
  const statusOf = async (id: string): Promise<string> =>
    (await ok<{ status: string }>('GET', `/api/tasks/${id}`)).status;

  it('groups the failed tasks by type and error, and a group retried is that group alone', async () => {
    const failing = createWorker({
      url: c.url,
      taskTypes: [A, B],
      onError: () => undefined,
      handler: async (task) => {
        throw new Error((task.payload as { err: string }).err);
      },
    });
    workers.push(failing);
    failing.start();
    const disk = await submit(A, ['disk full', 'disk full', 'disk full']);
    const dns = await submit(A, ['dns lookup failed', 'dns lookup failed']);
    const other = await submit(B, ['disk full']);
    // Its own group, whose error contains the disk group's: `error_contains` would retry it too.
    const longer = await submit(A, ['disk full on /var']);
    const all = [...disk, ...dns, ...other, ...longer];
    await eventually(
      async () => ((await Promise.all(all.map(statusOf))).every((s) => s === 'failed') ? true : undefined),
      15_000,
      'every task failed',
    );
    await failing.stop({ timeoutMs: 5_000 });

    const found = await ok<Failures>('GET', '/admin/failures');
    expect(found.scanned).toBe(7);
    expect(found.group_count).toBe(4);
    const mine = found.groups.map((g) => ({ task_type: g.task_type, error: g.error, count: g.count }));
    expect(mine.slice(0, 2)).toEqual([
      { task_type: A, error: 'disk full', count: 3 },
      { task_type: A, error: 'dns lookup failed', count: 2 },
    ]);
    // The groups of one task each are in the order they failed.
    expect(mine.slice(2)).toEqual(
      expect.arrayContaining([
        { task_type: B, error: 'disk full', count: 1 },
        { task_type: A, error: 'disk full on /var', count: 1 },
      ]),
    );
    const diskGroup = found.groups[0] as Group;
    expect(disk).toContain(diskGroup.sample_task_id);
    const completed = async (ids: string[]): Promise<number[]> =>
      Promise.all(
        ids.map(async (id) => Date.parse((await ok<{ completed_at: string }>('GET', `/api/tasks/${id}`)).completed_at)),
      );
    expect(Date.parse(diskGroup.newest_failure)).toBe(Math.max(...(await completed(disk))));

    // Failures since a time after all of them: none; since the last one: its group. A time that is not one: 400.
    const last = Math.max(...(await completed(all)));
    const since = async (ms: number) =>
      (await ok<Failures>('GET', `/admin/failures?since=${encodeURIComponent(new Date(ms).toISOString())}`)).groups;
    expect(await since(last + 1)).toEqual([]);
    const atLast = await since(last);
    expect(atLast.length).toBeGreaterThan(0);
    for (const g of atLast) expect(Date.parse(g.newest_failure)).toBe(last);
    expect((await api(c.url, 'GET', '/admin/failures?since=yesterday')).status).toBe(400);
    expect((await ok<Failures>('GET', '/admin/failures?limit=1')).groups).toHaveLength(1);

    // The group's retry, as the failed view starts it.
    const op = await ok<{ operation_id: string }>('POST', '/api/operations', {
      action: 'retry',
      filter: { status: 'failed', task_type: diskGroup.task_type, error_equals: diskGroup.error },
    });
    const ended = await eventually(
      async () => {
        const o = await ok<{ state: string; matched: number; done: number }>(
          'GET',
          `/api/operations/${op.operation_id}`,
        );
        return o.state === 'running' ? undefined : o;
      },
      15_000,
      'the retry to end',
    );
    expect(ended).toMatchObject({ state: 'done', matched: 3, done: 3 });
    for (const id of disk) expect(await statusOf(id)).not.toBe('failed');
    for (const id of [...dns, ...other, ...longer]) expect(await statusOf(id)).toBe('failed');
    const after = await ok<Failures>('GET', '/admin/failures');
    const left = after.groups.map((g) => [g.task_type, g.error, g.count]);
    expect(left).toHaveLength(3);
    expect(left[0]).toEqual([A, 'dns lookup failed', 2]);
    expect(left).toEqual(
      expect.arrayContaining([
        [B, 'disk full', 1],
        [A, 'disk full on /var', 1],
      ]),
    );
  });

  it('lists the connected workers: a channel socket and a waiting long-poll, with their node', async () => {
    const C = uniqueType('console.c');
    const D = uniqueType('console.d');
    const idle = () => new Promise<never>(() => undefined);
    const channel = createWorker({
      url: c.url,
      workerId: 'console-chan',
      taskTypes: [D, C],
      concurrency: 4,
      handler: idle,
      onError: () => undefined,
    });
    const polling = createWorker({
      url: c.url,
      transport: 'http',
      workerId: 'console-poll',
      taskTypes: [C],
      handler: idle,
      pollWaitMs: 20_000,
      onError: () => undefined,
    });
    workers.push(channel, polling);
    channel.start();
    polling.start();
    // One task for the channel worker to hold: its lease shows.
    await ok('POST', '/api/tasks', { task_type: D });
    const roster = await eventually(
      async () => {
        const r = await ok<Roster>('GET', '/admin/workers');
        const chan = r.workers.find((w) => w.worker_id === 'console-chan');
        const poll = r.workers.find((w) => w.worker_id === 'console-poll');
        return chan?.leases === 1 && poll !== undefined ? r : undefined;
      },
      15_000,
      'both workers listed, the socket holding its task',
    );
    const nodeId = c.node.options.nodeId;
    expect(roster.unanswered).toEqual([]);
    expect(roster.workers.find((w) => w.worker_id === 'console-chan')).toMatchObject({
      node_id: nodeId,
      transport: 'channel',
      task_types: [C, D].sort(),
      leases: 1,
    });
    expect(typeof roster.workers.find((w) => w.worker_id === 'console-chan')?.credits).toBe('number');
    expect(roster.workers.find((w) => w.worker_id === 'console-poll')).toMatchObject({
      node_id: nodeId,
      transport: 'http',
      task_types: [C],
      credits: null,
      leases: null,
    });
    await channel.stop({ timeoutMs: 0 });
    await eventually(
      async () =>
        (await ok<Roster>('GET', '/admin/workers')).workers.some((w) => w.worker_id === 'console-chan')
          ? undefined
          : true,
      10_000,
      'the closed socket to leave the list',
    );
  });

  it('lists the newest graphs from their ids, however many tasks came after them', async () => {
    const E = uniqueType('console.e');
    const graph = async (): Promise<string> =>
      (
        await ok<{ dag_id: string }>('POST', '/api/dags', {
          tasks: [
            { ref: 'a', task_type: E, schedule: { type: 'delayed', delay_seconds: 3600 } },
            { ref: 'b', task_type: E, depends_on: ['a'] },
          ],
        })
      ).dag_id;
    const first = await graph();
    const second = await graph();
    // More tasks than the old list looked at (the newest 200) come after them.
    await ok('POST', '/api/tasks/batch', {
      tasks: Array.from({ length: 250 }, () => ({ task_type: E, schedule: { type: 'delayed', delay_seconds: 3600 } })),
    });
    const page = await ok<{ dags: { dag_id: string; created_at: string }[]; next_before: string | null }>(
      'GET',
      '/admin/dags?limit=1',
    );
    expect(page.dags.map((d) => d.dag_id)).toEqual([second]);
    expect(page.next_before).toBe(second);
    const rest = await ok<{ dags: { dag_id: string }[]; next_before: string | null }>(
      'GET',
      `/admin/dags?limit=10&before=${second}`,
    );
    expect(rest.dags.map((d) => d.dag_id)).toEqual([first]);
    expect(rest.next_before).toBeNull();
    expect(Math.abs(Date.parse(page.dags[0]?.created_at ?? '') - Date.now())).toBeLessThan(60_000);
  });

  it("answers the key's scopes: every one while the node asks for no key, the key's own after", async () => {
    expect(await ok('GET', '/admin/whoami')).toEqual({
      keys_enabled: false,
      name: null,
      scopes: ['submit', 'read', 'work', 'metrics', 'ops', 'admin'],
    });
    const made = await ok<{ token: string }>('POST', '/admin/tokens', { name: 'viewer', scopes: ['read', 'ops'] });
    const auth = { authorization: `Bearer ${made.token}` };
    await eventually(
      async () => ((await api(c.url, 'GET', '/admin/whoami')).status === 401 ? true : undefined),
      5_000,
      'keys to be asked for',
    );
    expect(await ok('GET', '/admin/whoami', undefined, auth)).toEqual({
      keys_enabled: true,
      name: 'viewer',
      scopes: ['read', 'ops'],
    });
  });
});
