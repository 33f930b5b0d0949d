import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { trackChild, waitForExit } from './children.js';
import { freePort } from './node-process.js';
import { sleep } from './time.js';

/**
 * A private `redis-server` for one benchmark: its memory figures are the run's own (the
 * shared server on 6379 holds other runs' keys), and FLUSHALL on it disturbs nothing else.
 * Keeps nothing on disk, like the machine's own. Loopback only.
 */
export interface RedisProcess {
  readonly url: string;
  readonly client: Redis;
  /** `used_memory` of INFO memory, bytes. */
  usedMemory(): Promise<number>;
  stop(): Promise<void>;
}

export async function startRedisProcess(): Promise<RedisProcess> {
  if (spawnSync('redis-server', ['--version']).status !== 0) throw new Error('redis-server is not installed');
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'wheelhouse-bench-redis-'));
  const child: ChildProcess = trackChild(
    spawn(
      'redis-server',
      ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no', '--dir', dir],
      { stdio: 'ignore' },
    ),
  );
  const url = `redis://127.0.0.1:${port}`;
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 2 });
  client.on('error', () => undefined);
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await client.connect();
      await client.ping();
      break;
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`redis-server on ${port} did not start: ${String(error)}`);
      client.disconnect();
      await sleep(100);
    }
  }
  return {
    url,
    client,
    async usedMemory() {
      const info = await client.info('memory');
      const match = /^used_memory:(\d+)/m.exec(info);
      return match ? Number(match[1]) : Number.NaN;
    },
    async stop() {
      client.disconnect();
      child.kill('SIGTERM');
      await waitForExit(child, 10_000);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
