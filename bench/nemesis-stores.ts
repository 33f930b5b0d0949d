/**
 * The stores of the nemesis (bench/nemesis.ts), run the way production runs them: a Postgres
 * primary and secondary under pg_auto_failover (bench/pg-ha.ts) and a Redis Cluster of three
 * primaries with a replica each (test/support/redis-cluster.ts), all on local ports. What the
 * fault menu does to them — a primary killed and its standby promoted — and what puts each
 * back afterwards: the killed server restarted, where it rejoins as the standby of the one
 * that replaced it, so that the next fault of its kind has a standby to promote.
 */
import { PgHa } from './pg-ha.js';
import { sleep } from './time.js';
import { clusterNodes, clusterOk, startRedisCluster, type RedisCluster } from '../test/support/redis-cluster.js';
import type { RedisServer } from '../test/support/redis-server.js';
import type { TestNetwork } from '../test/support/netns.js';

/** How long a Redis node may go unheard before its replica is promoted, ms (Redis' default: 15 000). */
const REDIS_NODE_TIMEOUT_MS = 1_500;

export class NemesisStores {
  /** Why the last look found no standby ('' when it found one). */
  private noStandbyWhy = '';

  private constructor(
    readonly postgres: PgHa,
    readonly redis: RedisCluster,
    /** Where the nodes reach the stores: loopback, or the network's store addresses and relays. */
    private readonly hosts: { postgres: string; redis: string; postgresPorts: Map<number, number> },
    private readonly log: (line: string) => void,
  ) {}

  /**
   * Starts both sets. With `network` (nodes in namespaces of their own) each server's port is
   * relayed on the network's store address, and the Redis servers announce that address, so
   * that what the cluster tells a node (`MOVED`, `CLUSTER SLOTS`) is reachable from it and a
   * cut of the node from Redis cuts it from every Redis server.
   */
  static async start(log: (line: string) => void, network?: TestNetwork): Promise<NemesisStores> {
    const postgres = await PgHa.start({ log });
    try {
      const hosts = {
        postgres: network?.storeAddress('postgres') ?? '127.0.0.1',
        redis: network?.storeAddress('redis') ?? '127.0.0.1',
        postgresPorts: network
          ? await network.relayPorts('postgres', postgres.ports, false)
          : new Map(postgres.ports.map((p) => [p, p])),
      };
      const announce = network ? ['--cluster-announce-ip', hosts.redis] : [];
      const redis = await startRedisCluster(['--cluster-node-timeout', String(REDIS_NODE_TIMEOUT_MS), ...announce], {
        replicas: 1,
        // The cluster bus is the port + 10 000.
        beforeCreate: async (servers) => {
          if (network)
            await network.relayPorts(
              'redis',
              servers.flatMap((s) => [s.port, s.port + 10_000]),
              true,
            );
        },
      });
      const stores = new NemesisStores(postgres, redis, hosts, log);
      log(`stores: Postgres ${stores.nodePostgresUrl}; Redis Cluster ${stores.nodeRedisSeeds}`);
      return stores;
    } catch (error) {
      await postgres.stop();
      throw error;
    }
  }

  /** The multi-host URL the harness uses (loopback). */
  get postgresUrl(): string {
    return this.postgres.url;
  }

  /** The multi-host URL the nodes are given. */
  get nodePostgresUrl(): string {
    const hosts = this.postgres.ports
      .map((port) => `${this.hosts.postgres}:${this.hosts.postgresPorts.get(port) ?? port}`)
      .join(',');
    return `postgres://postgres@${hosts}/${this.postgres.database}?target_session_attrs=read-write`;
  }

  /** The seed list the nodes are given. */
  get nodeRedisSeeds(): string {
    return this.redis.servers.map((s) => `redis://${this.hosts.redis}:${s.port}`).join(',');
  }

  /** Whether a Postgres failover now would have a standby to promote. */
  async postgresHasStandby(): Promise<boolean> {
    let why = '';
    const nodes = await this.postgres.nodes().catch((error: unknown) => {
      why = `its state could not be read: ${(error as Error).message}`;
      return [];
    });
    const standby = nodes.some((n) => n.reportedState === 'secondary' && n.goalState === 'secondary');
    if (!standby && why === '') why = nodes.map((n) => `${n.name} ${n.reportedState}/${n.goalState}`).join(', ');
    // Said once per change: a run in which Postgres failovers never happen must show why.
    if (why !== this.noStandbyWhy && why !== '') this.log(`stores: no Postgres standby to fail over to (${why})`);
    this.noStandbyWhy = why;
    return standby;
  }

  /**
   * kill -9 of the Postgres primary (its keeper and server; `killed` is told the instant it is
   * dead); resolves once the secondary takes writes, with a description. The killed server is
   * started again in the background and rejoins as the new secondary.
   */
  async failOverPostgres(killed: () => void): Promise<string> {
    const primary = await this.postgres.killPrimary();
    const killedAt = Date.now();
    killed();
    const port = await this.postgres.waitForWritable(120_000, primary.port);
    const writableMs = Date.now() - killedAt;
    void this.rejoinPostgres(primary.name);
    return `killed ${primary.name} (:${primary.port}); :${port} took writes after ${writableMs} ms`;
  }

  private async rejoinPostgres(name: string): Promise<void> {
    // pg_autoctl rewinds the old primary and makes it follow the new one.
    this.postgres.restart(name);
    for (let i = 0; i < 240 && !(await this.postgresHasStandby()); i++) await sleep(500);
    this.log(
      `stores: ${name} ${(await this.postgresHasStandby()) ? 'is the secondary again' : 'did not rejoin in 120 s'}`,
    );
  }

  /** Whether every Redis primary has a live replica (so a killed one is replaced). */
  async redisHasReplicas(): Promise<boolean> {
    const servers = this.redis.servers.filter((s) => s.running());
    if (servers.length < this.redis.servers.length) return false;
    const lines = await clusterNodes(servers[0]!.port).catch(() => []);
    const primaries = lines.filter((l) => l.role === 'master' && !l.failed);
    return (
      primaries.length === 3 &&
      primaries.every((p) => lines.some((l) => l.role === 'slave' && !l.failed && l.masterId === p.id))
    );
  }

  /**
   * kill -9 of one Redis primary, chosen at random; resolves once its replica is promoted and
   * the cluster is whole (`cluster_state:ok`), with a description. The killed server is started
   * again afterwards and rejoins as a replica.
   */
  async killRedisPrimary(): Promise<string> {
    const running = this.redis.servers.filter((s) => s.running());
    const lines = await clusterNodes(running[0]!.port);
    const primaries = lines.filter((l) => l.role === 'master' && !l.failed);
    const target = primaries[Math.floor(Math.random() * primaries.length)]!;
    const server = this.redis.servers.find((s) => s.port === target.port) as RedisServer;
    const replica = lines.find((l) => l.role === 'slave' && l.masterId === target.id);
    const killedAt = Date.now();
    await server.kill();
    let promotedMs = Number.NaN;
    for (let i = 0; i < 600; i++) {
      const now = await clusterNodes(replica?.port ?? running.find((s) => s !== server)!.port).catch(() => []);
      if (now.some((l) => l.port === replica?.port && l.role === 'master')) {
        promotedMs = Date.now() - killedAt;
        break;
      }
      await sleep(50);
    }
    await clusterOk(
      this.redis.servers.filter((s) => s.running()),
      60_000,
    );
    void this.rejoinRedis(server);
    return `killed primary :${target.port}; replica :${replica?.port ?? '?'} promoted after ${promotedMs} ms`;
  }

  private async rejoinRedis(server: RedisServer): Promise<void> {
    await sleep(2_000);
    try {
      // Its nodes.conf is in its directory: it comes back knowing the cluster, finds its slots
      // taken over and follows the new primary.
      await server.start();
      await clusterOk(this.redis.servers, 60_000);
      this.log(`stores: redis :${server.port} rejoined as a replica`);
    } catch (error) {
      this.log(`stores: redis :${server.port} did not rejoin: ${String(error)}`);
    }
  }

  /** Every store process running and whole again (for the end of the run). */
  async healed(timeoutMs = 120_000): Promise<boolean> {
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      if ((await this.postgresHasStandby()) && (await this.redisHasReplicas())) return true;
      await sleep(1_000);
    }
    return false;
  }

  async stop(): Promise<void> {
    await this.redis.stop().catch(() => undefined);
    await this.postgres.stop();
  }
}
