import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WHEEL } from '../../src/actors/wheel-partition.js';
import { CLUSTER_SECRET_HEADER } from '../../src/runtime/cluster-wire.js';
import { partitionOf } from '../../src/lib/ids.js';
import { startNode, type WheelhouseNode } from '../../src/node/start.js';
import { TEST_POSTGRES_URL, TEST_REDIS_URL, api } from '../support/nodes.js';
import { dropTestStores } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * The operator's view across three nodes of one cluster (Postgres + Redis): `explain` asked of
 * one node names the owner and epoch of a partition another node holds and counts the workers
 * connected to, or asking, the other nodes; `/admin/actors` lists the actors of every node,
 * paged, and names a node that does not answer.
 */
const PARTITIONS = 8;

interface Explained {
  state: string;
  sentence: string;
  due: { partition: number; owner_node: string; epoch: number | null } | null;
  queue: { ahead: number | null; workers: { connected: number; polling: number; last_asked_at: string | null } } | null;
}
interface ActorJson {
  kind: string;
  key: string;
  node: string;
  state?: {
    levels?: { level: string; entries: number; occupied_slots: number; slots: { at: string; entries: number }[] }[];
  };
}
interface ActorsPage {
  actors: ActorJson[];
  next_token: string | null;
  nodes: { node_id: string; ok: boolean }[];
}
interface ClusterJson {
  ring: { nodes: string[] };
  partitions: { partition: number; owner: string; held_by: string | null; epoch: number | null }[];
}

describe('inspecting a cluster of three', () => {
  const id = randomBytes(5).toString('hex');
  const schema = `e2e_${id}`;
  const prefix = `t${id}`;
  const secret = randomBytes(32).toString('hex');
  const nodes: WheelhouseNode[] = [];
  const workers: RawWorker[] = [];
  beforeAll(async () => {
    for (const nodeId of ['n1', 'n2', 'n3']) {
      nodes.push(
        await startNode({
          backend: 'postgres',
          postgresUrl: TEST_POSTGRES_URL,
          postgresSchema: schema,
          redisUrl: TEST_REDIS_URL,
          redisPrefix: prefix,
          postgresPoolSize: 3,
          nodeId,
          port: 0,
          partitions: PARTITIONS,
          clusterSecret: secret,
          heartbeatSeconds: 0.2,
          failureTimeoutSeconds: 1,
          builtinExecutors: false,
          logLevel: process.env.TEST_LOG ?? 'silent',
        }),
      );
    }
    // Every node routes by the ring of three, and every partition is held by its owner.
    await eventually(async () => {
      for (const node of nodes) {
        const res = await api<ClusterJson>(node.url, 'GET', '/admin/cluster');
        if (res.body.ring.nodes.length !== 3) return undefined;
        if (res.body.partitions.some((p) => p.held_by !== p.owner)) return undefined;
      }
      return true;
    }, 20_000);
  }, 60_000);
  afterAll(async () => {
    for (const w of workers) w.terminate();
    for (const node of nodes.reverse()) await node.close();
    await dropTestStores(schema, prefix);
  });

  it("explains, on n1, a task whose partition n2 or n3 owns, with that partition's epoch", async () => {
    const [n1] = nodes as [WheelhouseNode];
    const submitted = await api<{ tasks: { task_id: string }[] }>(n1.url, 'POST', '/api/tasks/batch', {
      tasks: Array.from({ length: 8 }, () => ({
        task_type: uniqueType('far'),
        schedule: { type: 'delayed', delay_seconds: 3600 },
      })),
    });
    const far = submitted.body.tasks
      .map((t) => t.task_id)
      .find((t) => n1.system.ownerOf(WHEEL, String(partitionOf(t, PARTITIONS))) !== 'n1');
    expect(far).toBeDefined();
    const partition = partitionOf(far!, PARTITIONS);
    const owner = n1.system.ownerOf(WHEEL, String(partition));
    const status = await api<ClusterJson>(n1.url, 'GET', '/admin/cluster');
    const row = status.body.partitions.find((p) => p.partition === partition)!;

    const e = await api<Explained>(n1.url, 'GET', `/api/tasks/${far}/explain`);
    expect(e.status).toBe(200);
    expect(e.body).toMatchObject({ state: 'scheduled', due: { partition, owner_node: owner, epoch: row.epoch } });
    expect(e.body.sentence).toContain(`on partition ${partition}, owned by node ${owner} (epoch ${row.epoch})`);
  });

  it('counts the workers of a type on every node: a socket on n3, the last ask on n2', async () => {
    const [n1, n2, n3] = nodes as [WheelhouseNode, WheelhouseNode, WheelhouseNode];
    const type = uniqueType('presence');
    const urgent = await api<{ task_id: string }>(n1.url, 'POST', '/api/tasks', { task_type: type, priority: 0 });
    const later = await api<{ task_id: string }>(n1.url, 'POST', '/api/tasks', { task_type: type, priority: 9 });
    await eventually(async () => {
      const e = await api<Explained>(n1.url, 'GET', `/api/tasks/${later.body.task_id}/explain`);
      return e.body.queue?.ahead === 1 ? true : undefined;
    });

    // n2 is asked for the type and hands out the urgent task; n3 holds a socket with no credit.
    const polled = await api<{ tasks: { task_id: string }[] }>(n2.url, 'POST', '/api/workers/poll', {
      worker_id: 'w-n2',
      task_types: [type],
      max_tasks: 1,
      wait_ms: 5000,
    });
    expect(polled.body.tasks.map((t) => t.task_id)).toEqual([urgent.body.task_id]);
    const { worker } = await RawWorker.hello(n3.url, { worker_id: 'w-n3', task_types: [type], credits: 0 });
    workers.push(worker);

    const e = await api<Explained>(n1.url, 'GET', `/api/tasks/${later.body.task_id}/explain`);
    expect(e.body.queue).toMatchObject({ ahead: 0, workers: { connected: 1, polling: 0 } });
    expect(e.body.queue!.workers.last_asked_at).not.toBeNull();
    expect(e.body.sentence).toMatch(/first in line .*; 1 worker connected and 0 polling/);
  });

  it('answers each node’s own waiting polls on the presence route, to peers with the secret only', async () => {
    const [, n2] = nodes as [WheelhouseNode, WheelhouseNode];
    const type = uniqueType('idle');
    const waiting = api(n2.url, 'POST', '/api/workers/poll', {
      worker_id: 'w-idle',
      task_types: [type],
      max_tasks: 1,
      wait_ms: 1500,
    });
    const path = `/internal/workers/presence?task_type=${type}`;
    const seen = await eventually(async () => {
      const res = await api<{ polling: number; connected: number }>(n2.url, 'GET', path, undefined, {
        [CLUSTER_SECRET_HEADER]: secret,
      });
      return res.body.polling === 1 ? res.body : undefined;
    });
    expect(seen).toMatchObject({ polling: 1, connected: 0 });
    expect((await api(n2.url, 'GET', path)).status).toBe(401);
    await waiting;
  });

  it('lists the wheel partitions of all three nodes from one, in (node, kind, key) order, page by page', async () => {
    const [n1] = nodes as [WheelhouseNode];
    const all = await api<ActorsPage>(n1.url, 'GET', '/admin/actors?kind=wheel&limit=100');
    expect(all.status).toBe(200);
    expect(all.body.nodes).toEqual([
      { node_id: 'n1', ok: true },
      { node_id: 'n2', ok: true },
      { node_id: 'n3', ok: true },
    ]);
    expect(all.body.next_token).toBeNull();
    const keys = all.body.actors.map((a) => a.key);
    expect([...keys].sort()).toEqual(Array.from({ length: PARTITIONS }, (_, p) => String(p)).sort());
    for (const actor of all.body.actors) expect(actor.node).toBe(n1.system.ownerOf(WHEEL, actor.key));
    expect(new Set(all.body.actors.map((a) => a.node)).size).toBeGreaterThan(1);
    const order = all.body.actors.map((a) => `${a.node}/${a.key}`);
    expect(order).toEqual([...order].sort());

    const paged: string[] = [];
    let token: string | null = null;
    do {
      const query: string = token === null ? '' : `&next_token=${token}`;
      const page = await api<ActorsPage>(n1.url, 'GET', `/admin/actors?kind=wheel&limit=3${query}`);
      expect(page.body.actors.length).toBeLessThanOrEqual(3);
      paged.push(...page.body.actors.map((a) => `${a.node}/${a.key}`));
      token = page.body.next_token;
    } while (token !== null);
    expect(paged).toEqual(order);

    const onN2 = await api<ActorsPage>(n1.url, 'GET', '/admin/actors?kind=wheel&node=n2');
    expect(onN2.body.nodes).toEqual([{ node_id: 'n2', ok: true }]);
    expect(onN2.body.actors.map((a) => a.key)).toEqual(
      all.body.actors.filter((a) => a.node === 'n2').map((a) => a.key),
    );
    expect((await api(n1.url, 'GET', '/admin/actors?next_token=bm90LWEtdG9rZW4')).status).toBe(400);
  });

  it("shows a far node's wheel partition with its slots' occupancy, counts only", async () => {
    const [n1] = nodes as [WheelhouseNode];
    const type = uniqueType('occupancy');
    // Due in 30 s: on the near wheel of their partitions, not yet fired.
    const submitted = await api<{ tasks: { task_id: string }[] }>(n1.url, 'POST', '/api/tasks/batch', {
      tasks: Array.from({ length: 16 }, () => ({ task_type: type, schedule: { type: 'delayed', delay_seconds: 30 } })),
    });
    const id = submitted.body.tasks
      .map((t) => t.task_id)
      .find((t) => n1.system.ownerOf(WHEEL, String(partitionOf(t, PARTITIONS))) !== 'n1')!;
    const partition = String(partitionOf(id, PARTITIONS));
    const sameSlot = submitted.body.tasks.filter(
      (t) => String(partitionOf(t.task_id, PARTITIONS)) === partition,
    ).length;
    const wheel = await eventually(async () => {
      const res = await api<ActorJson>(n1.url, 'GET', `/admin/actors/wheel/${partition}`);
      const near = res.body.state?.levels?.[0];
      return near !== undefined && near.entries >= sameSlot ? res.body : undefined;
    });
    expect(wheel.node).toBe(n1.system.ownerOf(WHEEL, partition));
    const near = wheel.state!.levels![0]!;
    expect(near.level).toBe('near');
    expect(near.slots.reduce((sum, slot) => sum + slot.entries, 0)).toBe(near.entries);
    expect(near.occupied_slots).toBeGreaterThanOrEqual(1);
    expect(JSON.stringify(wheel.state)).not.toContain(id);
    // No node holds it: every live node is asked, and the answer is a 404, not a 5xx.
    expect((await api(n1.url, 'GET', '/admin/actors/wheel/999')).status).toBe(404);
  });

  it('lists a node that does not answer with ok: false, its actors missing', async () => {
    const n4 = await startNode({
      backend: 'postgres',
      postgresUrl: TEST_POSTGRES_URL,
      postgresSchema: schema,
      redisUrl: TEST_REDIS_URL,
      redisPrefix: prefix,
      postgresPoolSize: 2,
      nodeId: 'n4',
      port: 0,
      partitions: PARTITIONS,
      // Another secret: n4 is in the membership table, but refuses the others' node-to-node requests.
      clusterSecret: randomBytes(32).toString('hex'),
      heartbeatSeconds: 0.2,
      failureTimeoutSeconds: 1,
      builtinExecutors: false,
      logLevel: 'silent',
    });
    try {
      const [n1] = nodes as [WheelhouseNode];
      const page = await eventually(async () => {
        const res = await api<ActorsPage>(n1.url, 'GET', '/admin/actors?limit=1000');
        return res.body.nodes.some((n) => n.node_id === 'n4') ? res.body : undefined;
      }, 15_000);
      expect(page.nodes).toContainEqual({ node_id: 'n4', ok: false });
      expect(page.nodes.filter((n) => n.node_id !== 'n4').every((n) => n.ok)).toBe(true);
      expect(page.actors.some((a) => a.node === 'n4')).toBe(false);
      expect(page.actors.some((a) => a.node === 'n1')).toBe(true);
    } finally {
      await n4.close();
    }
  }, 30_000);
});
