/**
 * A high-availability Postgres on local ports, the way operators run one: pg_auto_failover
 * (Debian's `postgresql-15-auto-failover`, `pg_autoctl`) with a monitor, a primary and a
 * secondary, each a `pg_autoctl run` in a temporary directory of its own. For the failover
 * test (test/e2e/pg-failover.slow.test.ts) and the failover bench (`npm run chaos --
 * --pg-failover`): kill -9 the primary (its keeper and its Postgres, so that nothing restarts
 * it), or ask the monitor for a failover, and see which server is primary.
 *
 * `pg_autoctl` is installed with apt-get when it is missing (the way the CI script installs
 * chromium), so a fresh machine needs nothing done by hand; where it cannot be installed or
 * started, {@link PgHaUnavailable} says why. Postgres refuses to run as root: as root the
 * servers run as the `postgres` OS user (`runuser`). Nothing outlives the process that
 * started it: every `pg_autoctl run` has a process group of its own, killed on `stop()` and on
 * exit, and the directory is deleted.
 *
 * The monitor's health checks are tightened (1 s checks, a node unhealthy after 4 s, a 5 s
 * demote timeout instead of 5 s / 20 s / 30 s), so that a failover takes seconds rather than a
 * minute: `monitorSettings` says what was set, and `defaultTimeouts: true` keeps the defaults.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { sleep } from './time.js';

const run = promisify(execFile);

const PG_BIN = '/usr/lib/postgresql/15/bin';
const PACKAGE = 'postgresql-15-auto-failover';
const HOST = '127.0.0.1';

/** pg_auto_failover cannot be installed or started here; the message says why. */
export class PgHaUnavailable extends Error {}

/** The monitor's settings that decide how fast a dead primary is replaced (pgautofailover.*). */
const FAST_FAILOVER: Record<string, string> = {
  health_check_period: '1000',
  health_check_timeout: '2000',
  health_check_max_retries: '1',
  health_check_retry_delay: '500',
  node_considered_unhealthy_timeout: '4000',
  primary_demote_timeout: '5000',
};

export interface PgHaOptions {
  /** The monitor's port; the two servers take the next two. @default 55432 */
  basePort?: number;
  /** The database the servers are created with. @default 'wh' */
  database?: string;
  /** Keep pg_auto_failover's own health-check timeouts (a failover takes about a minute). @default false */
  defaultTimeouts?: boolean;
  log?: (line: string) => void;
}

/** One Postgres server of the set, as the monitor reports it. */
export interface PgHaNode {
  name: string;
  port: number;
  reportedState: string;
  goalState: string;
}

/** What the package puts in place: the command, and the monitor's extension for Postgres 15. */
const AUTOCTL = '/usr/bin/pg_autoctl';
const EXTENSION = '/usr/share/postgresql/15/extension/pgautofailover.control';

/** Makes sure `pg_autoctl` and its extension are installed, with apt-get when they are missing. */
export async function ensurePgAutoctl(log: (line: string) => void = () => undefined): Promise<void> {
  const installed = (): boolean => existsSync(AUTOCTL) && existsSync(EXTENSION) && existsSync(join(PG_BIN, 'postgres'));
  if (installed()) return;
  const bin = AUTOCTL;
  if (process.getuid?.() !== 0) throw new PgHaUnavailable(`${bin} is missing and only root can install ${PACKAGE}`);
  log(`pg-ha: installing ${PACKAGE}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  try {
    await run('apt-get', ['install', '-y', PACKAGE], { env });
  } catch {
    try {
      await run('apt-get', ['update'], { env });
      await run('apt-get', ['install', '-y', PACKAGE], { env });
    } catch (error) {
      throw new PgHaUnavailable(`apt-get install -y ${PACKAGE} failed: ${String(error)}`);
    }
  }
  if (!installed()) throw new PgHaUnavailable(`${PACKAGE} is installed but ${bin} or ${EXTENSION} is not there`);
}

async function portFree(port: number): Promise<boolean> {
  const server = net.createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, HOST, () => server.close(() => resolve(true)));
  });
}

/** A monitor, a primary and a secondary under pg_auto_failover, on `basePort`…`basePort + 2`. */
export class PgHa {
  readonly dir: string;
  readonly monitorPort: number;
  /** The two Postgres servers' ports, node1 (the first primary) first. */
  readonly ports: readonly [number, number];
  readonly database: string;
  /** What the monitor's settings were set to (empty with `defaultTimeouts`). */
  readonly monitorSettings: Readonly<Record<string, string>>;
  private readonly log: (line: string) => void;
  private readonly asRoot = process.getuid?.() === 0;
  private readonly services = new Map<string, ChildProcess>();
  private readonly onExit = (): void => this.killAll();

  private constructor(options: PgHaOptions) {
    const base = options.basePort ?? 55432;
    this.monitorPort = base;
    this.ports = [base + 1, base + 2];
    this.database = options.database ?? 'wh';
    this.monitorSettings = options.defaultTimeouts ? {} : FAST_FAILOVER;
    this.log = options.log ?? (() => undefined);
    this.dir = mkdtempSync(join(tmpdir(), 'wh-pgha-'));
    if (this.asRoot) chownSync(this.dir, ...postgresIds());
    process.once('exit', this.onExit);
  }

  /** Installs pg_auto_failover if need be, creates the set and waits for a primary with its secondary. */
  static async start(options: PgHaOptions = {}): Promise<PgHa> {
    await ensurePgAutoctl(options.log);
    const base = options.basePort ?? 55432;
    for (const port of [base, base + 1, base + 2]) {
      if (!(await portFree(port))) throw new PgHaUnavailable(`port ${port} is taken`);
    }
    const ha = new PgHa(options);
    try {
      await ha.create();
      return ha;
    } catch (error) {
      await ha.stop();
      throw error instanceof PgHaUnavailable ? error : new PgHaUnavailable(String(error), { cause: error });
    }
  }

  /** The monitor's connection string (as the superuser). */
  get monitorUrl(): string {
    return `postgres://postgres@${HOST}:${this.monitorPort}/pg_auto_failover`;
  }

  /** What Wheelhouse is given: both servers, read-write wanted. */
  get url(): string {
    const hosts = this.ports.map((port) => `${HOST}:${port}`).join(',');
    return `postgres://postgres@${hosts}/${this.database}?target_session_attrs=read-write`;
  }

  /** One server's own connection string. */
  serverUrl(port: number): string {
    return `postgres://postgres@${HOST}:${port}/${this.database}`;
  }

  /** The servers as the monitor sees them. */
  async nodes(): Promise<PgHaNode[]> {
    const rows = await this.sql<{ nodename: string; nodeport: number; reportedstate: string; goalstate: string }>(
      this.monitorUrl,
      'SELECT nodename, nodeport, reportedstate::text, goalstate::text FROM pgautofailover.node ORDER BY nodeid',
    );
    return rows.map((r) => ({
      name: r.nodename,
      port: r.nodeport,
      reportedState: r.reportedstate,
      goalState: r.goalstate,
    }));
  }

  /** The server the monitor has as primary (reported and assigned), if one is. */
  async primary(): Promise<PgHaNode | undefined> {
    return (await this.nodes()).find(
      (n) => ['primary', 'wait_primary'].includes(n.reportedState) && n.reportedState === n.goalState,
    );
  }

  /** Waits until a server takes writes (`transaction_read_only` off); resolves with its port. */
  async waitForWritable(timeoutMs = 120_000, except?: number): Promise<number> {
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      for (const port of this.ports) {
        if (port === except) continue;
        const rows = await this.sql<{ ro: string }>(
          this.serverUrl(port),
          "SELECT current_setting('transaction_read_only') AS ro",
        ).catch(() => []);
        if (rows[0]?.ro === 'off') return port;
      }
      await sleep(200);
    }
    throw new Error(`no server took writes within ${timeoutMs} ms: ${JSON.stringify(await this.nodes())}`);
  }

  /** `synchronous_standby_names` and `synchronous_commit` on the server at `port`. */
  async replicationSettings(port: number): Promise<{ synchronousStandbyNames: string; synchronousCommit: string }> {
    const rows = await this.sql<{ names: string; commit: string }>(
      this.serverUrl(port),
      "SELECT current_setting('synchronous_standby_names') AS names, current_setting('synchronous_commit') AS commit",
    );
    return { synchronousStandbyNames: rows[0]?.names ?? '', synchronousCommit: rows[0]?.commit ?? '' };
  }

  /**
   * kill -9 of the primary's `pg_autoctl run`, its Postgres and every backend (their process
   * group): the monitor sees it die and promotes the secondary. Answers which one was killed.
   */
  async killPrimary(): Promise<PgHaNode> {
    const primary = await this.primary();
    if (primary === undefined) throw new Error(`no primary to kill: ${JSON.stringify(await this.nodes())}`);
    this.kill(primary.name);
    this.log(`pg-ha: killed ${primary.name} (port ${primary.port}) with SIGKILL`);
    return primary;
  }

  /** Starts a killed server's `pg_autoctl run` again: it rejoins as a secondary. */
  restart(name: string): void {
    this.runService(name);
  }

  /** `pg_autoctl perform failover`: the monitor demotes the primary and promotes the secondary; resolves when done. */
  async performFailover(): Promise<void> {
    await this.autoctl(['perform', 'failover', '--pgdata', join(this.dir, 'monitor'), '--wait', '120']);
  }

  /** Kills every service and deletes the directory. Safe to call twice. */
  async stop(): Promise<void> {
    this.killAll();
    for (
      let i = 0;
      i < 50 && [...this.services.values()].some((c) => c.exitCode === null && c.signalCode === null);
      i++
    ) {
      await sleep(100);
    }
    this.services.clear();
    process.off('exit', this.onExit);
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async create(): Promise<void> {
    const monitorData = join(this.dir, 'monitor');
    this.log(`pg-ha: monitor on ${this.monitorPort} in ${this.dir}`);
    await this.autoctl([
      'create',
      'monitor',
      '--pgdata',
      monitorData,
      '--pgport',
      String(this.monitorPort),
      '--hostname',
      HOST,
      '--auth',
      'trust',
      '--no-ssl',
    ]);
    this.runService('monitor');
    await this.until(async () => (await this.sql(this.monitorUrl, 'SELECT 1').catch(() => [])).length === 1, 30_000);
    for (const [name, value] of Object.entries(this.monitorSettings)) {
      await this.sql(this.monitorUrl, `ALTER SYSTEM SET pgautofailover.${name} = '${value}'`);
    }
    await this.sql(this.monitorUrl, 'SELECT pg_reload_conf()');
    const monitor = `postgres://autoctl_node@${HOST}:${this.monitorPort}/pg_auto_failover?sslmode=disable`;
    for (const [i, port] of this.ports.entries()) {
      const name = `node${i + 1}`;
      this.log(`pg-ha: ${name} on ${port}`);
      await this.autoctl([
        'create',
        'postgres',
        '--pgdata',
        join(this.dir, name),
        '--pgport',
        String(port),
        '--hostname',
        HOST,
        '--name',
        name,
        '--dbname',
        this.database,
        '--auth',
        'trust',
        '--no-ssl',
        '--monitor',
        monitor,
      ]);
      this.runService(name);
      const wanted = i === 0 ? ['single'] : ['secondary'];
      await this.until(async () => {
        const node = (await this.nodes().catch(() => [])).find((n) => n.name === name);
        return node !== undefined && wanted.includes(node.reportedState) && node.reportedState === node.goalState;
      }, 120_000);
    }
    await this.until(async () => (await this.primary())?.reportedState === 'primary', 60_000);
  }

  private env(): NodeJS.ProcessEnv {
    return {
      PATH: `${PG_BIN}:${process.env.PATH ?? '/usr/bin:/bin'}`,
      XDG_CONFIG_HOME: join(this.dir, 'config'),
      XDG_DATA_HOME: join(this.dir, 'share'),
      XDG_RUNTIME_DIR: join(this.dir, 'run'),
      PG_AUTOCTL_DEBUG: '0',
    };
  }

  /** The command line of `pg_autoctl args`, as the postgres OS user when this process is root. */
  private command(args: string[]): [string, string[]] {
    const env = Object.entries(this.env()).map(([k, v]) => `${k}=${v}`);
    const inner = ['env', ...env, 'pg_autoctl', ...args];
    return this.asRoot ? ['runuser', ['-u', 'postgres', '--', ...inner]] : [inner[0]!, inner.slice(1)];
  }

  private async autoctl(args: string[]): Promise<void> {
    const [file, argv] = this.command(args);
    try {
      await run(file, argv, { cwd: this.dir, maxBuffer: 16 * 1024 * 1024 });
    } catch (error) {
      const stderr = (error as { stderr?: string }).stderr ?? '';
      throw new Error(`pg_autoctl ${args.slice(0, 2).join(' ')} failed: ${stderr.split('\n').slice(-8).join('\n')}`, {
        cause: error,
      });
    }
  }

  /** `pg_autoctl run` for one service, in a process group of its own, its output to `<name>.log`. */
  private runService(name: string): void {
    const [file, argv] = this.command(['run', '--pgdata', join(this.dir, name)]);
    const out = openSync(join(this.dir, `${name}.log`), 'a');
    const child = spawn(file, argv, { cwd: this.dir, detached: true, stdio: ['ignore', out, out] });
    closeSync(out);
    child.unref();
    this.services.set(name, child);
  }

  /** The last lines of a service's log, for a failure message. */
  logTail(name: string, lines = 20): string {
    const path = join(this.dir, `${name}.log`);
    return existsSync(path) ? readFileSync(path, 'utf8').split('\n').slice(-lines).join('\n') : '';
  }

  private kill(name: string): void {
    const child = this.services.get(name);
    if (child?.pid === undefined) return;
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // the group is gone already
    }
  }

  private killAll(): void {
    for (const name of this.services.keys()) this.kill(name);
  }

  private async until(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > until) {
        throw new Error(
          `pg-ha: not ready within ${timeoutMs} ms; monitor log:\n${this.logTail('monitor')}\nnode logs:\n${this.logTail('node1')}\n${this.logTail('node2')}`,
        );
      }
      await sleep(250);
    }
  }

  private async sql<R extends Record<string, unknown>>(url: string, text: string): Promise<R[]> {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      return (await client.query<R>(text)).rows;
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}

/** The uid and gid of the `postgres` OS user. */
function postgresIds(): [number, number] {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  const [, , uid, gid] = line?.split(':') ?? [];
  if (uid === undefined || gid === undefined)
    throw new PgHaUnavailable('there is no postgres OS user to run Postgres as');
  return [Number(uid), Number(gid)];
}
