/**
 * API keys through real nodes, on both backends: a key made through `/admin/tokens` is kept as a
 * hash in `api_keys`, works after a restart, holds only its scopes, and stops working when
 * revoked; on Postgres, a key made on one node works at once on another, and a key revoked on
 * one is refused by the other within a second (each node re-reads the keys every 500 ms).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { startNode, type WheelhouseNode } from '../../src/node/start.js';
import { BACKENDS, TEST_POSTGRES_URL, TEST_REDIS_URL, api, dropTestStores, startTestNode } from '../support/nodes.js';
import { eventually } from '../support/waits.js';

const ADMIN = 'an-admin-key-for-the-e2e-tests';
const bearer = (secret: string): Record<string, string> => ({ authorization: `Bearer ${secret}` });

describe.each(BACKENDS)('API keys (%s)', (backend) => {
  it('keeps a key as a hash, holds it to its scopes across a restart, and refuses it once revoked', async () => {
    const t = await startTestNode(backend, { adminToken: ADMIN });
    try {
      const made = await api<{ token_id: string; token: string }>(
        t.url,
        'POST',
        '/admin/tokens',
        { name: 'producer', scopes: ['submit', 'read'] },
        bearer(ADMIN),
      );
      expect(made.status).toBe(201);
      const { token, token_id: tokenId } = made.body;
      const rows = await t.sql<{ secret_hash: string; name: string }>('SELECT secret_hash, name FROM api_keys');
      expect(rows).toHaveLength(1);
      expect(rows[0]?.secret_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(JSON.stringify(rows)).not.toContain(token.slice(4));

      await t.restart();
      const submitted = await api<{ task_id: string }>(
        t.url,
        'POST',
        '/api/tasks',
        { task_type: 'k.t' },
        bearer(token),
      );
      expect(submitted.status).toBe(201);
      expect((await api(t.url, 'GET', `/api/tasks/${submitted.body.task_id}`, undefined, bearer(token))).status).toBe(
        200,
      );
      const poll = { worker_id: 'w', task_types: ['k.t'], wait_ms: 0 };
      expect((await api(t.url, 'POST', '/api/workers/poll', poll, bearer(token))).status).toBe(403);
      expect((await api(t.url, 'GET', '/api/tasks')).status).toBe(401);

      expect((await api(t.url, 'DELETE', `/admin/tokens/${tokenId}`, undefined, bearer(ADMIN))).status).toBe(200);
      expect((await api(t.url, 'GET', `/api/tasks/${submitted.body.task_id}`, undefined, bearer(token))).status).toBe(
        401,
      );
    } finally {
      await t.cleanup();
    }
  });
});

describe('API keys across two nodes (postgres)', () => {
  const schema = `keys_${randomBytes(5).toString('hex')}`;
  const nodes: WheelhouseNode[] = [];
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.close()));
    // The schema's name is the nodes' Redis prefix too: both go.
    await dropTestStores(schema, schema);
  });

  it('a key made on one node works on the other at once; revoked, it is refused there within a second', async () => {
    const options = {
      backend: 'postgres' as const,
      port: 0,
      logLevel: 'silent',
      builtinExecutors: false,
      partitions: 4,
      postgresUrl: TEST_POSTGRES_URL,
      postgresSchema: schema,
      redisUrl: TEST_REDIS_URL,
      redisPrefix: schema,
      postgresPoolSize: 3,
      adminToken: ADMIN,
      clusterSecret: randomBytes(24).toString('hex'),
      heartbeatSeconds: 0.5,
      failureTimeoutSeconds: 2,
      safetyNetGraceSeconds: 2,
    };
    nodes.push(await startNode({ ...options, nodeId: 'k1' }));
    nodes.push(await startNode({ ...options, nodeId: 'k2' }));
    const [a, b] = nodes as [WheelhouseNode, WheelhouseNode];
    const made = await api<{ token_id: string; token: string }>(
      a.url,
      'POST',
      '/admin/tokens',
      { name: 'reader', scopes: ['read'] },
      bearer(ADMIN),
    );
    expect(made.status).toBe(201);
    expect((await api(b.url, 'GET', '/api/tasks', undefined, bearer(made.body.token))).status).toBe(200);

    expect((await api(a.url, 'DELETE', `/admin/tokens/${made.body.token_id}`, undefined, bearer(ADMIN))).status).toBe(
      200,
    );
    const revokedMs = Date.now();
    const refusedAfterMs = await eventually(
      async () =>
        (await api(b.url, 'GET', '/api/tasks', undefined, bearer(made.body.token))).status === 401
          ? Date.now() - revokedMs
          : undefined,
      5_000,
      'the other node to refuse the revoked key',
    );
    console.log(`[keys] the other node refused the revoked key ${refusedAfterMs} ms after the revocation`);
    // The re-read runs every 500 ms: a second, with room for a loaded machine.
    expect(refusedAfterMs).toBeLessThan(1_500);
  });
});
