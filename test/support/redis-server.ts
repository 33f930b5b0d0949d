/**
 * A private `redis-server` process, for tests that must stop, kill or restart Redis for real
 * (a restart from an older snapshot, an eviction policy) without touching the shared server on
 * 6379. It has its own port and its own temporary `--dir`, so a start after a stop or a kill
 * loads whatever `dump.rdb` the last SAVE left there, as a restarted production Redis would.
 *
 * No process outlives the test run: each is SIGKILLed when the test process exits or gets
 * SIGTERM/SIGINT (test/support/children.ts), and, where `setpriv` exists, the kernel
 * SIGKILLs it too if the test process dies without running any handler (`--pdeathsig`).
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis, ReplyError } from 'ioredis';
import { killGroup, spawnChild } from './children.js';

export interface RedisServerOptions {
  /** Keep Redis's default save points instead of `--save ""` (no automatic snapshot). @default false */
  save?: boolean;
  /** `--maxmemory`, e.g. `'2mb'`. @default no limit */
  maxmemory?: string;
  /** `--maxmemory-policy`, e.g. `'allkeys-lru'`. @default 'noeviction' (Redis's own) */
  maxmemoryPolicy?: string;
  /** More `redis-server` arguments, appended as given, e.g. `['--hz', '50']`. */
  args?: string[];
  /** How long a start waits for "Ready to accept connections", in ms. @default 10_000 */
  startTimeoutMs?: number;
}

export interface RedisServer {
  /** 127.0.0.1 port, the same across restarts. */
  readonly port: number;
  /** `redis://127.0.0.1:<port>`. */
  readonly url: string;
  /** The data directory (`dump.rdb` lives here), the same across restarts. */
  readonly dir: string;
  /** Whether the process is running. */
  running(): boolean;
  /** Starts it again on the same port and dir (loading `dump.rdb` if there is one); resolves once it accepts connections. */
  start(): Promise<void>;
  /** SHUTDOWN (SAVE or NOSAVE when `save` is given; otherwise as the save points say); resolves once it has exited. */
  stop(options?: { save?: boolean }): Promise<void>;
  /** SAVE: writes an RDB snapshot to `dir/dump.rdb` and resolves when it is on disk. */
  save(): Promise<void>;
  /** SIGKILL: no snapshot, no goodbye; resolves once the process is gone. */
  kill(): Promise<void>;
  /** Kills the process if it runs and deletes the directory. */
  cleanup(): Promise<void>;
  /** The last 64 KiB the process wrote (its log), for failure messages. */
  output(): string;
}

const HOST = '127.0.0.1';
const OUTPUT_TAIL_CHARS = 64 * 1024;
const SETPRIV = '/usr/bin/setpriv';

/** A port that was free a moment ago (the OS picks it; a start that finds it taken retries with another). */
async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', reject);
    probe.listen(0, HOST, resolve);
  });
  const { port } = probe.address() as net.AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/** Runs one command on a connection of its own, which gives up at the first close instead of reconnecting. */
async function command(port: number, name: string, ...args: string[]): Promise<unknown> {
  const client = new Redis({
    host: HOST,
    port,
    lazyConnect: true,
    retryStrategy: () => null,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await client.call(name, ...args);
  } finally {
    client.disconnect();
  }
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

class RedisServerProcess implements RedisServer {
  readonly dir = mkdtempSync(join(tmpdir(), 'wheelhouse-redis-'));
  private child: ChildProcess | undefined;
  private log = '';

  constructor(
    readonly port: number,
    private readonly options: RedisServerOptions,
  ) {}

  get url(): string {
    return `redis://${HOST}:${this.port}`;
  }

  running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  output(): string {
    return this.log;
  }

  async start(): Promise<void> {
    if (this.running()) throw new Error(`redis-server on port ${this.port} is already running`);
    const args = [
      ...['--port', String(this.port), '--bind', HOST, '--dir', this.dir, '--dbfilename', 'dump.rdb'],
      ...['--appendonly', 'no', '--daemonize', 'no', '--logfile', ''],
      ...(this.options.save === true ? [] : ['--save', '']),
      ...(this.options.maxmemory === undefined ? [] : ['--maxmemory', this.options.maxmemory]),
      ...(this.options.maxmemoryPolicy === undefined ? [] : ['--maxmemory-policy', this.options.maxmemoryPolicy]),
      ...(this.options.args ?? []),
    ];
    const child = existsSync(SETPRIV)
      ? spawnChild(SETPRIV, ['--pdeathsig', 'KILL', '--', 'redis-server', ...args], {
          stdio: ['ignore', 'pipe', 'pipe'],
        })
      : spawnChild('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    const startTimeoutMs = this.options.startTimeoutMs ?? 10_000;
    await new Promise<void>((resolve, reject) => {
      let ready = false;
      // not a wait: the bound on how long a redis-server may take to start
      const timer = setTimeout(() => {
        killGroup(child, 'SIGKILL');
        reject(new Error(`redis-server on port ${this.port} was not ready within ${startTimeoutMs} ms:\n${this.log}`));
      }, startTimeoutMs);
      const onData = (chunk: Buffer): void => {
        this.log = (this.log + chunk.toString('utf8')).slice(-OUTPUT_TAIL_CHARS);
        if (ready || !this.log.includes('Ready to accept connections')) return;
        ready = true;
        clearTimeout(timer);
        resolve();
      };
      child.stdout?.on('data', onData);
      child.stderr?.on('data', onData);
      child.once('error', reject);
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        if (!ready)
          reject(
            new Error(
              `redis-server on port ${this.port} exited with ${code ?? signal} before it was ready:\n${this.log}`,
            ),
          );
      });
    });
  }

  async stop(options: { save?: boolean } = {}): Promise<void> {
    const child = this.child;
    if (child === undefined || !this.running()) return;
    const mode = options.save === undefined ? [] : [options.save ? 'SAVE' : 'NOSAVE'];
    try {
      await command(this.port, 'SHUTDOWN', ...mode);
    } catch (error) {
      // The server closes the connection instead of replying; only a reply is a failure.
      if (error instanceof ReplyError)
        throw new Error(`redis-server on port ${this.port} refused to shut down`, { cause: error });
    }
    await exited(child);
  }

  async save(): Promise<void> {
    await command(this.port, 'SAVE');
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (child === undefined || !this.running()) return;
    killGroup(child, 'SIGKILL');
    await exited(child);
  }

  async cleanup(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Starts a private `redis-server` on a free 127.0.0.1 port with a fresh temporary `--dir`. */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  for (let attempt = 1; ; attempt += 1) {
    const server = new RedisServerProcess(await freePort(), options);
    try {
      await server.start();
      return server;
    } catch (error) {
      await server.cleanup();
      // Someone took the port between the probe and the start: try another, a few times.
      if (attempt >= 3 || !server.output().includes('Address already in use')) throw error;
    }
  }
}
