import { rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { Redis } from 'ioredis';
import type { WheelhouseOptions } from '../../src/lib/config.js';
import { startNode, type NodeOverrides, type WheelhouseNode } from '../../src/node/start.js';
import { freshPgliteDir } from './pglite-dirs.js';
import { TEST_POSTGRES_URL } from './postgres.js';
import { TEST_REDIS_URL, deleteKeysWithPrefix } from './redis.js';

/**
 * Nodes for end-to-end tests, on either backend, each isolated: a fresh Postgres schema and
 * Redis key prefix, or a fresh PGlite directory. `restart()` stops the node and starts a new
 * process-equivalent on the same data, as a crash-and-restart would.
 */
export type BackendName = 'postgres' | 'embedded';
export const BACKENDS: BackendName[] = ['postgres', 'embedded'];

export { TEST_POSTGRES_URL, TEST_REDIS_URL };

export interface TestCluster {
  node: WheelhouseNode;
  /** Base URL of the node's API. */
  url: string;
  /** Stops the node (like a crash when `graceful` is false: no final snapshots) and starts it again on the same data. */
  restart(overrides?: NodeOverrides): Promise<WheelhouseNode>;
  /** Deletes every Redis key of this test (no-op on the embedded backend). */
  flushRedis(): Promise<void>;
  /** Runs SQL against this test's schema. */
  sql<R extends Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
  cleanup(): Promise<void>;
}

export async function startTestNode(
  backend: BackendName,
  options: WheelhouseOptions = {},
  overrides: NodeOverrides = {},
): Promise<TestCluster> {
  const id = randomBytes(5).toString('hex');
  const schema = `e2e_${id}`;
  const prefix = `t${id}`;
  const dataDir = backend === 'embedded' ? await freshPgliteDir() : undefined;
  const base: WheelhouseOptions = {
    backend,
    port: 0,
    logLevel: 'silent',
    builtinExecutors: false,
    partitions: 8,
    ...(backend === 'postgres'
      ? {
          postgresUrl: TEST_POSTGRES_URL,
          postgresSchema: schema,
          redisUrl: TEST_REDIS_URL,
          redisPrefix: prefix,
          postgresPoolSize: 4,
        }
      : { dataDir }),
    ...options,
  };
  let node: WheelhouseNode;
  try {
    node = await startNode(base, overrides);
  } catch (error) {
    // A node that fails at start (a test of a refused start) has already made and migrated its
    // schema, and may have written its fences: nothing of it is left behind either.
    if (backend === 'postgres') await dropTestStores(schema, prefix);
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
  const redis = backend === 'postgres' ? new Redis(TEST_REDIS_URL, { lazyConnect: true }) : null;
  const pool = backend === 'postgres' ? new pg.Pool({ connectionString: TEST_POSTGRES_URL, max: 2 }) : null;

  const cluster: TestCluster = {
    node,
    url: node.url,
    async restart(next = overrides) {
      await node.close();
      node = await startNode({ ...base, port: 0 }, next);
      cluster.node = node;
      cluster.url = node.url;
      return node;
    },
    async flushRedis() {
      if (redis) await deleteKeysWithPrefix(redis, prefix);
    },
    async sql<R extends Record<string, unknown>>(text: string, params: unknown[] = []) {
      if (pool) {
        const client = await pool.connect();
        try {
          await client.query(`SET search_path TO ${schema}`);
          return (await client.query(text, params)).rows as R[];
        } finally {
          client.release();
        }
      }
      return (await node.backend.db.query<R>(text, params)).rows;
    },
    async cleanup() {
      await node.close();
      if (redis) {
        await cluster.flushRedis();
        redis.disconnect();
      }
      if (pool) {
        await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await pool.end();
      }
      if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return cluster;
}

/** Drops a test's schema and Redis keys (what a node on Postgres with that schema and prefix left). */
export async function dropTestStores(schema: string, prefix: string): Promise<void> {
  const pool = new pg.Pool({ connectionString: TEST_POSTGRES_URL, max: 1 });
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await pool.end();
  const redis = new Redis(TEST_REDIS_URL);
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
}

/** Calls the node's HTTP API with JSON. */
export async function api<T = unknown>(
  url: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: T; headers: Headers }> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text.length > 0 ? JSON.parse(text) : null;
  } catch {
    // not JSON: leave the text
  }
  return { status: res.status, body: parsed as T, headers: res.headers };
}
