/**
 * A node on Postgres + Redis whose connections to both run through fault proxies
 * (test/support/fault-proxy.ts), so a test can restart, cut off or pause either store for
 * this node alone while other test files share the real servers. The test's own reads
 * (`sql`, `flushRedis`) go straight to the servers.
 */
import type { WheelhouseOptions } from '../../src/lib/config.js';
import type { FakeClock } from '../../src/runtime/clock.js';
import type { NodeOverrides } from '../../src/node/start.js';
import type { Polled } from './dags.js';
import { startFaultProxy, type FaultProxy } from './fault-proxy.js';
import { TEST_POSTGRES_URL, TEST_REDIS_URL, api, startTestNode, type TestCluster } from './nodes.js';

export interface FaultyNode extends TestCluster {
  /** Between the node and Postgres. */
  pg: FaultProxy;
  /** Between the node and Redis. */
  redis: FaultProxy;
}

/**
 * Starts a `postgres` test node behind two proxies. `redisUrl` names another Redis (a private
 * `redis-server`) to put behind the proxy instead of the shared one.
 */
export async function startFaultyNode(
  options: WheelhouseOptions = {},
  overrides: NodeOverrides = {},
  redisUrl = TEST_REDIS_URL,
): Promise<FaultyNode> {
  const target = (url: string) => {
    const u = new URL(url);
    return { host: u.hostname, port: Number(u.port) };
  };
  const pg = await startFaultProxy({ target: target(TEST_POSTGRES_URL) });
  const redis = await startFaultProxy({ target: target(redisUrl) });
  let node: TestCluster;
  try {
    node = await startTestNode(
      'postgres',
      {
        logLevel: process.env.TEST_LOG ?? 'silent',
        ...options,
        postgresUrl: pg.url(TEST_POSTGRES_URL),
        redisUrl: redis.url(redisUrl),
      },
      overrides,
    );
  } catch (error) {
    await Promise.all([pg.close(), redis.close()]);
    throw error;
  }
  const cleanup = node.cleanup;
  return Object.assign(node, {
    pg,
    redis,
    async cleanup() {
      pg.restore();
      redis.restore();
      await cleanup();
      await Promise.all([pg.close(), redis.close()]);
    },
  });
}

/**
 * Polls for tasks of `type` on a FakeClock node, moving time on by `stepMs` between polls,
 * until one comes or `untilMs` (fake time) passes; answers what came and the fake time it
 * came at, or null. Work a timer starts goes on after `advance` returns (it awaits the
 * stores), so each step also waits for a poll's real round trip.
 */
export async function pollOnFakeTime(
  url: () => string,
  clock: FakeClock,
  type: string,
  untilMs: number,
  stepMs = 100,
): Promise<{ tasks: Polled[]; atMs: number } | null> {
  for (;;) {
    const r = await api<{ tasks: Polled[] }>(url(), 'POST', '/api/workers/poll', {
      worker_id: 'w-fault',
      task_types: [type],
      max_tasks: 100,
      wait_ms: 0,
    });
    if (r.status === 200 && r.body.tasks.length > 0) return { tasks: r.body.tasks, atMs: clock.now() };
    if (clock.now() >= untilMs) return null;
    await clock.advance(Math.min(stepMs, untilMs - clock.now()));
  }
}

/** A metric of the node's own registry (0 when it has no such series yet). */
export function metric(node: TestCluster, name: string, labels?: Record<string, string>): Promise<number> {
  return node.node.metrics.value(name, labels);
}
