/**
 * API keys through real nodes, on both backends: a key made through `/admin/tokens` is kept as a
 * hash in `api_keys`, works after a restart, holds only its scopes, and stops working when
 * revoked; on Postgres, a key made on one node works at once on another, and a key revoked on
 * one is refused by the other within a second (each node re-reads the keys every 500 ms).
 */
import { randomBytes } from 'node:crypto';
import type { DestinationStream } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { startNode, type WheelhouseNode } from '../../src/node/start.js';
import { BACKENDS, TEST_POSTGRES_URL, TEST_REDIS_URL, api, dropTestStores, startTestNode } from '../support/nodes.js';
import { eventually } from '../support/waits.js';

const ADMIN = 'an-admin-key-for-the-e2e-tests';
const bearer = (secret: string): Record<string, string> => ({ authorization: `Bearer ${secret}` });

/** A pino destination that keeps the lines, parsed. */
function capture(): { destination: DestinationStream; lines: { level: number; msg: string; url?: string }[] } {
  const lines: { level: number; msg: string; url?: string }[] = [];
  return { destination: { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[0]) }, lines };
}
const WARN = 40;

describe('a node that asks for no key', () => {
  it('says so as it starts, naming its address; with an admin key it does not', async () => {
    const open = capture();
    const t = await startTestNode(
      'embedded',
      { logLevel: 'warn', logFormat: 'json' },
      { logDestination: open.destination },
    );
    try {
      const warning = open.lines.find((l) => l.level === WARN && l.msg.startsWith('no API key is required'));
      expect(warning?.msg).toContain(`any process on this machine can use every route of ${t.url}`);
      expect(warning?.url).toBe(t.url);
    } finally {
      await t.cleanup();
    }
    const keyed = capture();
    const k = await startTestNode(
      'embedded',
      { logLevel: 'warn', logFormat: 'json', adminToken: ADMIN },
      { logDestination: keyed.destination },
    );
    await k.cleanup();
    expect(keyed.lines.filter((l) => l.msg.startsWith('no API key is required'))).toEqual([]);
  });
});

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

describe.each(BACKENDS)('a node without an admin key (%s)', (backend) => {
  it('asks for keys once one was made, and goes on asking after the last is revoked, across a restart', async () => {
    const t = await startTestNode(backend);
    try {
      expect((await api(t.url, 'GET', '/api/tasks')).status).toBe(200);
      const made = await api<{ token_id: string; token: string }>(t.url, 'POST', '/admin/tokens', {
        name: 'the only key',
        scopes: ['admin', 'read'],
      });
      expect(made.status).toBe(201);
      expect((await api(t.url, 'GET', '/api/tasks')).status).toBe(401);
      const revoked = await api(
        t.url,
        'DELETE',
        `/admin/tokens/${made.body.token_id}`,
        undefined,
        bearer(made.body.token),
      );
      expect(revoked.status).toBe(200);
      // Revoking every key must not mean "open to everyone".
      expect((await api(t.url, 'GET', '/api/tasks')).status).toBe(401);
      expect((await api(t.url, 'POST', '/admin/tokens', { name: 'again', scopes: ['admin'] })).status).toBe(401);
      await t.restart();
      expect((await api(t.url, 'GET', '/api/tasks')).status).toBe(401);
    } finally {
      await t.cleanup();
    }
  });
});

describe('the read-only scopes (embedded)', () => {
  it('a ["read", "ops"] key opens every GET the dashboard pages make, and no write nor key management', async () => {
    const t = await startTestNode('embedded', { adminToken: ADMIN });
    try {
      const asAdmin = bearer(ADMIN);
      const made = await api<{ token: string }>(
        t.url,
        'POST',
        '/admin/tokens',
        { name: 'dash', scopes: ['read', 'ops'] },
        asAdmin,
      );
      expect(made.status).toBe(201);
      const dash = bearer(made.body.token);
      const task = (await api<{ task_id: string }>(t.url, 'POST', '/api/tasks', { task_type: 'dash.t' }, asAdmin)).body;
      const cron = await api<{ task_id: string }>(
        t.url,
        'POST',
        '/api/tasks',
        { task_type: 'dash.c', schedule: { type: 'cron', cron_expression: '0 * * * *' } },
        asAdmin,
      );
      const dag = await api<{ dag_id: string }>(
        t.url,
        'POST',
        '/api/dags',
        { tasks: [{ ref: 'a', task_type: 'dash.d' }] },
        asAdmin,
      );
      const actors = await api<{ actors: { kind: string; key: string }[] }>(
        t.url,
        'GET',
        '/admin/actors?limit=1',
        undefined,
        dash,
      );
      const actor = actors.body.actors[0]!;
      // Every call of src/dashboard/pages-*.ts and app.ts that reads.
      const reads = [
        '/admin/cluster', // app.ts (sign-in), pages-cluster.ts
        '/admin/queues', // pages-queues.ts
        '/admin/actors?limit=100', // pages-actors.ts
        `/admin/actors/${encodeURIComponent(actor.kind)}/${encodeURIComponent(actor.key)}`,
        '/api/tasks?limit=50', // pages-tasks.ts
        '/api/tasks?limit=200', // pages-dags.ts
        `/api/dags/${dag.body.dag_id}`,
        '/api/tasks?status=active&limit=100', // pages-schedules.ts
        '/api/tasks?status=paused&limit=100',
        `/api/tasks/${task.task_id}`, // pages-task.ts
        `/api/tasks/${task.task_id}/history?limit=20`,
        `/api/tasks/${task.task_id}/explain`,
      ];
      for (const path of reads) expect((await api(t.url, 'GET', path, undefined, dash)).status, path).toBe(200);

      // The buttons need submit; the keys need admin; a scrape needs nothing more than metrics.
      const writes: [string, string, unknown?][] = [
        ['POST', '/api/tasks', { task_type: 'dash.t' }],
        ['DELETE', `/api/tasks/${task.task_id}`],
        ['POST', `/api/tasks/${task.task_id}/retry`],
        ['POST', `/api/tasks/${cron.body.task_id}/pause`],
        ['POST', `/api/tasks/${cron.body.task_id}/resume`],
        ['GET', '/admin/tokens'],
        ['POST', '/admin/tokens', { name: 'more', scopes: ['admin'] }],
        ['DELETE', '/admin/tokens/0192f3a4-5b6c-7d8e-9f00-112233445566'],
      ];
      for (const [method, path, body] of writes) {
        expect((await api(t.url, method, path, body, dash)).status, `${method} ${path}`).toBe(403);
      }
      expect((await api(t.url, 'GET', '/metrics', undefined, dash)).status).toBe(200);
    } finally {
      await t.cleanup();
    }
  });

  it('a metrics key reads /metrics and nothing else', async () => {
    const t = await startTestNode('embedded', { adminToken: ADMIN });
    try {
      const made = await api<{ token: string }>(
        t.url,
        'POST',
        '/admin/tokens',
        { name: 'prometheus', scopes: ['metrics'] },
        bearer(ADMIN),
      );
      const scrape = bearer(made.body.token);
      const metrics = await api<string>(t.url, 'GET', '/metrics', undefined, scrape);
      expect(metrics.status).toBe(200);
      expect(metrics.body).toContain('# TYPE');
      for (const path of ['/admin/cluster', '/admin/queues', '/api/tasks', '/admin/tokens']) {
        expect((await api(t.url, 'GET', path, undefined, scrape)).status, path).toBe(403);
      }
      // The admin key keeps what it had.
      for (const path of ['/metrics', '/admin/cluster', '/admin/tokens']) {
        expect((await api(t.url, 'GET', path, undefined, bearer(ADMIN))).status, path).toBe(200);
      }
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
