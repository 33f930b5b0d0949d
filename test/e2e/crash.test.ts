import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { TEST_POSTGRES_URL, TEST_REDIS_URL, api, type BackendName } from '../support/nodes.js';
import { deleteKeysWithPrefix } from '../support/redis.js';

/**
 * A real crash: the node runs as its own process (the built CLI) and is killed with SIGKILL
 * right after it answered the submits — no shutdown, no final snapshot. A new process on the
 * same data must hand out every task exactly once.
 */
const CLI = resolve(import.meta.dirname, '../../dist/src/cli.js');
if (!existsSync(CLI)) throw new Error(`${CLI} is missing: npm test builds it; alone, run npm run build first`);

interface Proc {
  child: ChildProcess;
  url: string;
}

function startProcess(args: string[]): Promise<Proc> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [CLI, ...args, '--port', '0', '--log-level', 'warn', '--builtin-executors', 'false', '--partitions', '8'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const onData = (chunk: Buffer): void => {
      out += chunk.toString('utf8');
      const m = /listening on (http:\/\/[0-9.]+:\d+)/.exec(out);
      if (m) resolvePromise({ child, url: m[1] as string });
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`node exited with ${code} before listening:\n${out}`)));
  });
}

function kill9(proc: Proc): Promise<void> {
  return new Promise((resolvePromise) => {
    proc.child.once('exit', () => resolvePromise());
    proc.child.kill('SIGKILL');
  });
}

describe.each(['postgres', 'embedded'] as BackendName[])('a node killed with SIGKILL, on %s', (backend) => {
  const id = randomBytes(4).toString('hex');
  const schema = `crash_${id}`;
  const prefix = `crash${id}`;
  const dataDir = mkdtempSync(join(tmpdir(), 'wheelhouse-crash-'));
  const args = backend === 'postgres'
    ? ['node', '--postgres-url', TEST_POSTGRES_URL, '--postgres-schema', schema, '--redis-url', TEST_REDIS_URL, '--redis-prefix', prefix]
    : ['dev', '--data-dir', dataDir];
  const running: Proc[] = [];

  afterEach(async () => {
    for (const p of running) if (p.child.exitCode === null && p.child.signalCode === null) await kill9(p);
    running.length = 0;
    if (backend === 'postgres') {
      const pool = new pg.Pool({ connectionString: TEST_POSTGRES_URL, max: 1 });
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await pool.end();
      const redis = new Redis(TEST_REDIS_URL);
      await deleteKeysWithPrefix(redis, prefix);
      redis.disconnect();
    }
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('loses no pending task and hands each out once after a restart', async () => {
    const first = await startProcess(args);
    running.push(first);
    const dueSoon = new Date(Date.now() + 1500).toISOString();
    const batch = {
      tasks: [
        ...Array.from({ length: 10 }, (_, i) => ({ task_type: 'crash.t', payload: { i } })),
        ...Array.from({ length: 10 }, (_, i) => ({ task_type: 'crash.t', payload: { i: 10 + i }, schedule: { type: 'delayed', due_time: dueSoon } })),
      ],
    };
    const submitted = await api<{ tasks: { task_id: string }[] }>(first.url, 'POST', '/api/tasks/batch', batch);
    expect(submitted.status).toBe(201);
    const ids = submitted.body.tasks.map((t) => t.task_id).sort();
    await kill9(first);

    const second = await startProcess(args);
    running.push(second);
    const handedOut: string[] = [];
    const deadline = Date.now() + 30_000;
    while (handedOut.length < ids.length && Date.now() < deadline) {
      const polled = await api<{ tasks: { task_id: string; lease_token: string; attempt: number }[] }>(second.url, 'POST', '/api/workers/poll', {
        worker_id: 'w', task_types: ['crash.t'], max_tasks: 100, wait_ms: 2000,
      });
      for (const t of polled.body.tasks) {
        expect(t.attempt).toBe(1);
        handedOut.push(t.task_id);
      }
    }
    expect(handedOut.sort()).toEqual(ids);
    // Nothing more comes: each was handed out once.
    const extra = await api<{ tasks: unknown[] }>(second.url, 'POST', '/api/workers/poll', { worker_id: 'w', task_types: ['crash.t'], max_tasks: 100, wait_ms: 500 });
    expect(extra.body.tasks).toEqual([]);
  });
});
