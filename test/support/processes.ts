/**
 * A node as a process of its own (the built CLI), for tests that kill it with SIGKILL: no
 * shutdown, no final write (test/e2e/crash.test.ts, the DAG crash test).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import pg from 'pg';
import { Redis } from 'ioredis';
import { TEST_POSTGRES_URL, TEST_REDIS_URL, type BackendName } from './nodes.js';
import { deleteKeysWithPrefix } from './redis.js';

export const CLI = resolve(import.meta.dirname, '../../dist/src/cli.js');

export interface NodeProcess {
  child: ChildProcess;
  url: string;
}

/** Starts `node dist/src/cli.js <args>` on a free port; resolves once it listens. */
export function startProcess(args: string[]): Promise<NodeProcess> {
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

/** SIGKILL; resolves once the process is gone. */
export function kill9(proc: NodeProcess): Promise<void> {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return Promise.resolve();
  return new Promise((resolvePromise) => {
    proc.child.once('exit', () => resolvePromise());
    proc.child.kill('SIGKILL');
  });
}

/** CLI arguments for a node on `backend`: its own schema and key prefix, or its own data directory. */
export function nodeArgs(backend: BackendName, schema: string, prefix: string, dataDir: string): string[] {
  return backend === 'postgres'
    ? ['node', '--postgres-url', TEST_POSTGRES_URL, '--postgres-schema', schema, '--redis-url', TEST_REDIS_URL, '--redis-prefix', prefix]
    : ['dev', '--data-dir', dataDir];
}

/** Drops a test's schema and Redis keys (what a node started with `nodeArgs` on Postgres left). */
export async function dropTestStores(schema: string, prefix: string): Promise<void> {
  const pool = new pg.Pool({ connectionString: TEST_POSTGRES_URL, max: 1 });
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await pool.end();
  const redis = new Redis(TEST_REDIS_URL);
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
}
