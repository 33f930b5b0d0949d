/**
 * Disturbing the machine's own Postgres and Redis for `npm run chaos -- --faults`, and putting
 * them back: a Postgres restart, its connections of one node terminated, that node's Redis
 * connections killed, Redis paused, Redis restarted empty. Loopback only, root only (as CI
 * runs). `ensureServices` starts whatever is down, the way .ci/run does, and the harness calls
 * it whatever happens.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import type pg from 'pg';
import type { Redis } from 'ioredis';
import { sleep } from './time.js';

/** The Postgres cluster version (`pg_lsclusters`, first row), e.g. `15`. */
export function postgresVersion(): string {
  const out = execFileSync('pg_lsclusters', ['--no-header'], { encoding: 'utf8' });
  const version = out.trim().split(/\s+/)[0];
  if (!version) throw new Error('pg_lsclusters found no cluster');
  return version;
}

function postgresReady(): boolean {
  return spawnSync('pg_isready', ['-h', '127.0.0.1', '-p', '5432', '-q']).status === 0;
}

async function waitFor(check: () => boolean | Promise<boolean>, limitMs: number, what: string): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} within ${limitMs} ms`);
    await sleep(50);
  }
}

/** `pg_ctlcluster … restart -m fast`; resolves once Postgres accepts connections again. Answers how long it was down, ms. */
export async function restartPostgres(): Promise<number> {
  const started = Date.now();
  execFileSync('pg_ctlcluster', ['--skip-systemctl-redirect', postgresVersion(), 'main', 'restart', '-m', 'fast'], {
    stdio: 'ignore',
  });
  await waitFor(postgresReady, 60_000, 'Postgres was not back');
  return Date.now() - started;
}

/** Terminates every backend of one node (its `application_name`); answers how many. */
export async function terminatePostgresConnections(pool: pg.Pool, applicationName: string): Promise<number> {
  const { rows } = await pool.query<{ ok: boolean }>(
    'SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()',
    [applicationName],
  );
  return rows.filter((r) => r.ok).length;
}

/** CLIENT KILL of every connection named `name` (`CLIENT SETNAME`); answers how many. */
export async function killRedisClients(redis: Redis, name: string): Promise<number> {
  const list = String(await redis.call('CLIENT', 'LIST'));
  let killed = 0;
  for (const line of list.split('\n')) {
    const id = /(?:^|\s)id=(\d+)/.exec(line)?.[1];
    const clientName = /(?:^|\s)name=(\S*)/.exec(line)?.[1];
    if (id === undefined || clientName !== name) continue;
    killed += Number(await redis.call('CLIENT', 'KILL', 'ID', id));
  }
  return killed;
}

/** CLIENT PAUSE for `ms` (every command of every client waits). */
export async function pauseRedis(redis: Redis, ms: number): Promise<void> {
  await redis.call('CLIENT', 'PAUSE', String(ms), 'ALL');
}

/** How the machine's Redis runs, read from it, to start it again the same way. */
export interface RedisLaunch {
  args: string[];
}

/** Reads the settings a restart must keep (bind, port, dir, logfile, persistence). */
export async function redisLaunch(redis: Redis): Promise<RedisLaunch> {
  const get = async (key: string): Promise<string> =>
    String(((await redis.call('CONFIG', 'GET', key)) as string[])[1] ?? '');
  const [bind, port, dir, logfile, save, appendonly] = await Promise.all(
    ['bind', 'port', 'dir', 'logfile', 'save', 'appendonly'].map(get),
  );
  const args = [
    '--daemonize',
    'yes',
    '--bind',
    ...bind!.split(/\s+/).filter(Boolean),
    '--port',
    port!,
    '--save',
    save!,
    '--appendonly',
    appendonly!,
    '--dir',
    dir!,
  ];
  if (logfile) args.push('--logfile', logfile);
  return { args };
}

function redisUp(port: string): boolean {
  return (
    spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', port, 'ping'], { encoding: 'utf8' }).stdout?.trim() === 'PONG'
  );
}

/**
 * SHUTDOWN NOSAVE, then the same redis-server command again: Redis comes back empty. Resolves
 * once it answers; answers how long it was down, ms.
 */
export async function restartRedisEmpty(redis: Redis, launch: RedisLaunch): Promise<number> {
  const port = launch.args[launch.args.indexOf('--port') + 1] ?? '6379';
  const started = Date.now();
  spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', port, 'shutdown', 'nosave']);
  await waitFor(() => !redisUp(port), 10_000, 'Redis did not stop');
  startRedis(launch);
  await waitFor(() => redisUp(port), 10_000, 'Redis did not start again');
  void redis; // the harness's client reconnects by itself
  return Date.now() - started;
}

function startRedis(launch: RedisLaunch): void {
  const run = spawnSync('redis-server', launch.args, { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`redis-server ${launch.args.join(' ')} failed: ${run.stderr || run.stdout}`);
}

/** Starts Postgres and Redis if they are down and lifts a Redis pause: the services as found. */
export async function ensureServices(launch: RedisLaunch | null): Promise<string[]> {
  const done: string[] = [];
  if (!postgresReady()) {
    spawnSync('pg_ctlcluster', ['--skip-systemctl-redirect', postgresVersion(), 'main', 'start'], { stdio: 'ignore' });
    await waitFor(postgresReady, 60_000, 'Postgres did not start');
    done.push('started Postgres');
  }
  const args = launch?.args ?? [
    '--daemonize',
    'yes',
    '--bind',
    '127.0.0.1',
    '--port',
    '6379',
    '--save',
    '',
    '--appendonly',
    'no',
  ];
  const port = args[args.indexOf('--port') + 1] ?? '6379';
  if (!redisUp(port)) {
    startRedis({ args });
    await waitFor(() => redisUp(port), 10_000, 'Redis did not start');
    done.push('started Redis');
  }
  spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', port, 'client', 'unpause']);
  return done;
}
