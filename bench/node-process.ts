import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { createServer } from 'node:net';
import { resolve } from 'node:path';
import { request } from 'undici';
import { BENCH_ADMIN_TOKEN } from './auth.js';
import { trackChild, waitForExit } from './children.js';
import { RssSampler, rssKiB } from './rss.js';
import { sleep } from './time.js';

/**
 * One Wheelhouse node on Postgres + Redis in its own process, with a fresh schema and Redis
 * key prefix, so runs never see each other's tasks. `close()` stops it and removes both.
 */
export interface BenchNode {
  readonly url: string;
  readonly pid: number;
  readonly schema: string;
  readonly redisPrefix: string;
  readonly rss: RssSampler;
  /** Last lines the node wrote (warnings, errors), for reports. */
  output(): string;
  /** SIGTERM, then SIGKILL after 15 s. */
  stop(): Promise<void>;
}

// BENCH_CLI: another build's cli.js to run the nodes from (for before/after figures).
const CLI = process.env.BENCH_CLI ? resolve(process.env.BENCH_CLI) : resolve(import.meta.dirname, '../src/cli.js');
const OUTPUT_LINES_KEPT = 40;

/** A fresh schema and key prefix for one node. */
export function runNames(): { schema: string; redisPrefix: string } {
  const id = randomBytes(4).toString('hex');
  return { schema: `bench_${id}`, redisPrefix: `bench${id}` };
}

export async function startBenchNode(
  { schema, redisPrefix }: { schema: string; redisPrefix: string },
  extraFlags: readonly string[] = [],
  /** Run the embedded default (`wheelhouse dev`) on PGlite in this directory instead. */
  embeddedDataDir?: string,
  /** Listen on this port (a node restarted where its workers look for it). @default a free one */
  fixedPort?: number,
): Promise<BenchNode> {
  const port = fixedPort ?? (await freePort());
  const storeFlags =
    embeddedDataDir === undefined
      ? ['node', '--postgres-schema', schema, '--redis-prefix', redisPrefix]
      : ['dev', '--data-dir', embeddedDataDir];
  const child = trackChild(
    spawn(
      process.execPath,
      // BENCH_NODE_ARGS: extra Node.js flags for the node process only, e.g. "--cpu-prof".
      [
        ...(process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? []),
        CLI,
        ...storeFlags,
        '--port',
        String(port),
        '--host',
        '127.0.0.1',
        '--log-level',
        'warn',
        '--builtin-executors',
        'false',
        ...extraFlags,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    ),
  );
  const lines: string[] = [];
  const keep = (chunk: Buffer): void => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (line.trim() === '') continue;
      lines.push(line.length > 500 ? `${line.slice(0, 500)}…` : line);
      if (lines.length > OUTPUT_LINES_KEPT) lines.shift();
    }
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  // BENCH_NODE_LOG_DIR: also write each node's whole output to <dir>/<schema>-<pid>.log.
  const logDir = process.env.BENCH_NODE_LOG_DIR;
  if (logDir) {
    const file = createWriteStream(resolve(logDir, `${schema}-${child.pid}.log`));
    child.stdout?.pipe(file, { end: false });
    child.stderr?.pipe(file, { end: false });
    child.once('exit', () => file.end());
  }
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, child, () => lines.join('\n'));
  if (BENCH_ADMIN_TOKEN !== undefined) {
    // The figure is only worth something if the node really asks for keys.
    const res = await request(`${url}/api/tasks`);
    await res.body.dump();
    if (res.statusCode !== 401)
      throw new Error(`BENCH_ADMIN_TOKEN is set but ${url} answered ${res.statusCode} without a key`);
  }
  const rss = new RssSampler(child.pid as number);
  return {
    url,
    pid: child.pid as number,
    schema,
    redisPrefix,
    rss,
    output: () => lines.join('\n'),
    async stop() {
      rss.stop();
      child.kill('SIGTERM');
      await waitForExit(child, 15_000);
    },
  };
}

async function waitReady(url: string, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`the node exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${output()}`);
    }
    try {
      const res = await request(`${url}/readyz`, { headersTimeout: 2_000, bodyTimeout: 2_000 });
      await res.body.dump();
      if (res.statusCode === 200) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  child.kill('SIGKILL');
  throw new Error(`the node was not ready within 60 s:\n${output()}`);
}

/** A free TCP port on the loopback address. */
export function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

/** Whether the node process is still there (a process that exited has no resident memory). */
export function alive(node: BenchNode): boolean {
  return rssKiB(node.pid) !== null;
}

/** The node's resident memory now, MiB (also fed to its max). */
export function currentMiB(node: BenchNode): number {
  node.rss.sample();
  return (rssKiB(node.pid) ?? Number.NaN) / 1024;
}
