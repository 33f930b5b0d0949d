import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WORKER } from '../../src/actors/worker.js';
import { WHEEL } from '../../src/actors/wheel-partition.js';
import { partitionOf } from '../../src/lib/ids.js';
import { startNode, type WheelhouseNode } from '../../src/node/start.js';
import { TEST_POSTGRES_URL, TEST_REDIS_URL, api } from '../support/nodes.js';
import { dropTestStores } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * The worker as a remote actor, on three nodes of one cluster (Postgres + Redis): a worker
 * whose socket is on n1 receives tasks whose partitions n2 and n3 own, and a cancel asked of
 * n2 reaches it through its actor `("worker", id)`, which the ring places on n3.
 */
const PARTITIONS = 8;

describe('the worker channel across a cluster', () => {
  const id = randomBytes(5).toString('hex');
  const schema = `e2e_${id}`;
  const prefix = `t${id}`;
  const nodes: WheelhouseNode[] = [];
  const workers: RawWorker[] = [];
  beforeAll(async () => {
    const secret = randomBytes(32).toString('hex');
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
          workerHeartbeatSeconds: 0.5,
        }),
      );
    }
    await eventually(async () => {
      for (const node of nodes) {
        const res = await api<{ ring: { nodes: string[] } }>(node.url, 'GET', '/admin/cluster');
        if (res.body.ring.nodes.length !== 3) return undefined;
      }
      return true;
    }, 20_000);
  }, 60_000);
  afterAll(async () => {
    for (const w of workers) w.terminate();
    for (const node of nodes.reverse()) await node.close();
    await dropTestStores(schema, prefix);
  });

  it("reaches the worker's socket on n1 from n2, through its actor on n3, and hands it tasks of every node's partitions", async () => {
    const [a, b] = nodes as [WheelhouseNode, WheelhouseNode, WheelhouseNode];
    // A worker id whose actor the ring puts on n3: neither the socket's node nor the caller's.
    let workerId = '';
    do workerId = `w-${randomUUID()}`;
    while (a.system.ownerOf(WORKER, workerId) !== 'n3');

    const type = uniqueType('cluster');
    const submitted = await api<{ tasks: { task_id: string }[] }>(b.url, 'POST', '/api/tasks/batch', {
      tasks: Array.from({ length: 24 }, () => ({ task_type: type })),
    });
    expect(submitted.status).toBe(201);
    const ids = submitted.body.tasks.map((t) => t.task_id);
    const owners = new Set(ids.map((t) => a.system.ownerOf(WHEEL, String(partitionOf(t, PARTITIONS)))));
    expect(owners.has('n2') || owners.has('n3')).toBe(true);

    const { worker, welcome } = await RawWorker.hello(a.url, { worker_id: workerId, task_types: [type], credits: 24 });
    workers.push(worker);
    expect(welcome.node_id).toBe('n1');
    const got = await worker.received(24, 20_000);
    expect(got.map((t) => t.task_id).sort()).toEqual([...ids].sort());

    // The actor knows where the socket is, asked from n2.
    await eventually(async () =>
      (await b.system.ref(WORKER, workerId).ask({ type: 'where' })) === 'n1' ? true : undefined,
    );
    const target = got[0]!.task_id;
    const cancelled = await api(b.url, 'DELETE', `/api/tasks/${target}`);
    expect(cancelled.status).toBe(200);
    // The tasks' 60 s leases would not be heartbeaten for 20 s: this is the push.
    expect(await worker.next('cancel', 5_000)).toEqual({ type: 'cancel', task_ids: [target] });
  });
});
