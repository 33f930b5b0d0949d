/**
 * A real network for the partition tests (test/e2e/netns-partitions.slow.test.ts): each node
 * process in a network namespace of its own, with its own address on one bridge, and the
 * stores reached through the bridge (Postgres and Redis listen on loopback only, so a small
 * forwarder in the test process relays each: Postgres at `.1`, Redis at `.2`). A cut is real
 * and silent, as a failed switch port or a firewall rule drops packets: the sender's namespace
 * gets a permanent neighbour entry for the other end with an address no interface has, so
 * its frames leave and nobody takes them — no RST, no error, a connect or a write that hangs
 * until its own timeout. A cut is one-way (`from` stops reaching `to`); `cutBoth` is both
 * ways. Needs root (CI runs as root here) and a kernel with network namespaces and veth;
 * `openNetwork` says why not when it cannot.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** What a node may be cut from: another node (by id), or one of the stores (`postgres`, `redis`). */
export type Peer = string;

/** A MAC no interface has: frames sent to it are dropped by every receiver. */
const NOWHERE_MAC = '02:00:5e:00:de:ad';

async function ip(...args: string[]): Promise<void> {
  await run('ip', args);
}

/** A TCP relay from `host:port` (a free port by default) to `target`, and the sockets it holds (destroyed on close). */
async function forward(
  host: string,
  target: { host: string; port: number },
  port = 0,
): Promise<{ server: Server; port: number }> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = createConnection(target);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  server.on('close', () => {
    for (const s of sockets) s.destroy();
  });
  // Destroys the relayed connections too when the server closes.
  const close = server.close.bind(server);
  server.close = (cb) => {
    for (const s of sockets) s.destroy();
    return close(cb);
  };
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the relay has no port');
  return { server, port: address.port };
}

export class TestNetwork {
  private readonly cuts = new Set<string>();

  private constructor(
    private readonly tag: string,
    private readonly subnet: string,
    /** Node id → its namespace's name. */
    private readonly namespaces: Map<string, string>,
    private readonly relays: Server[],
    readonly postgresUrl: string,
    readonly redisUrl: string,
  ) {}

  /**
   * The bridge, a namespace per node, and the relays to `postgresUrl` and `redisUrl` (none
   * without `stores`: see `relayPorts`); or a sentence saying why this machine cannot have
   * them (not root, no namespaces).
   */
  static async open(
    nodeIds: string[],
    stores?: { postgresUrl: string; redisUrl: string },
  ): Promise<TestNetwork | string> {
    if (process.platform !== 'linux') return 'network namespaces need Linux';
    if (process.getuid?.() !== 0) return 'network namespaces need root (CI runs as root on this machine)';
    const tag = randomBytes(2).toString('hex');
    // 10.78.x.0/24, x from the tag: two runs at once on one machine would not share a subnet.
    const subnet = `10.78.${parseInt(tag, 16) % 250}`;
    const namespaces = new Map(nodeIds.map((id) => [id, `wh${tag}-${id}`]));
    const bridge = `whb${tag}`;
    try {
      await ip('link', 'add', bridge, 'type', 'bridge');
    } catch (error) {
      return `cannot create a bridge (ip link add … type bridge): ${String(error).split('\n')[0]}`;
    }
    const relays: Server[] = [];
    const network = new TestNetwork(tag, subnet, namespaces, relays, '', '');
    try {
      // .3 first: the test process's own address (the bridge's primary), so that cutting a
      // node from a store (.1, .2) never cuts it from the test that watches it.
      await ip('addr', 'add', `${subnet}.3/24`, 'dev', bridge);
      await ip('addr', 'add', `${subnet}.1/24`, 'dev', bridge);
      await ip('addr', 'add', `${subnet}.2/24`, 'dev', bridge);
      await ip('link', 'set', bridge, 'up');
      let i = 0;
      for (const [id, ns] of namespaces) {
        const veth = `whv${tag}${i}`;
        await ip('netns', 'add', ns);
        await ip('link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns);
        await ip('link', 'set', veth, 'master', bridge, 'up');
        await ip('-n', ns, 'addr', 'add', `${network.addressOf(id, i)}/24`, 'dev', 'eth0');
        await ip('-n', ns, 'link', 'set', 'eth0', 'up');
        await ip('-n', ns, 'link', 'set', 'lo', 'up');
        i++;
      }
      if (stores === undefined) return new TestNetwork(tag, subnet, namespaces, relays, '', '');
      const pg = new URL(stores.postgresUrl);
      const redis = new URL(stores.redisUrl);
      const pgRelay = await forward(`${subnet}.1`, { host: pg.hostname, port: Number(pg.port || 5432) });
      const redisRelay = await forward(`${subnet}.2`, { host: redis.hostname, port: Number(redis.port || 6379) });
      relays.push(pgRelay.server, redisRelay.server);
      pg.hostname = `${subnet}.1`;
      pg.port = String(pgRelay.port);
      redis.hostname = `${subnet}.2`;
      redis.port = String(redisRelay.port);
      return new TestNetwork(tag, subnet, namespaces, relays, pg.toString(), redis.toString());
    } catch (error) {
      await network.close();
      return `cannot build the test network: ${String(error).split('\n')[0]}`;
    }
  }

  private addressOf(id: string, index = [...this.namespaces.keys()].indexOf(id)): string {
    if (index < 0) throw new Error(`no node ${id} on this network`);
    return `${this.subnet}.${10 + index}`;
  }

  /** The node's address: its `--host`, and where its peers and the test reach it. */
  host(id: string): string {
    return this.addressOf(id);
  }

  /** The command that runs a program in the node's namespace (a prefix for spawn). */
  launcher(id: string): string[] {
    const ns = this.namespaces.get(id);
    if (ns === undefined) throw new Error(`no node ${id} on this network`);
    return ['ip', 'netns', 'exec', ns];
  }

  /** Where the nodes reach a store: `.1` Postgres, `.2` Redis. */
  storeAddress(store: 'postgres' | 'redis'): string {
    return this.target(store);
  }

  private target(to: Peer): string {
    if (to === 'postgres') return `${this.subnet}.1`;
    if (to === 'redis') return `${this.subnet}.2`;
    return this.addressOf(to);
  }

  /**
   * Relays each of `ports` on loopback from the store's address (`.1` Postgres, `.2` Redis) —
   * for stores of several servers: an HA Postgres, a Redis Cluster and its bus ports. On the
   * same port number with `samePort` (a Redis Cluster's servers announce the store's address
   * with their own ports), else on free ones (a server that listens on every address already
   * holds its port there). Answers each loopback port's relay port.
   */
  async relayPorts(
    store: 'postgres' | 'redis',
    ports: readonly number[],
    samePort: boolean,
  ): Promise<Map<number, number>> {
    const relayed = new Map<number, number>();
    for (const port of ports) {
      const relay = await forward(this.target(store), { host: '127.0.0.1', port }, samePort ? port : 0);
      this.relays.push(relay.server);
      relayed.set(port, relay.port);
    }
    return relayed;
  }

  /** From now on nothing `from` sends to `to` arrives (what `to` sends still does). */
  async cut(from: string, to: Peer): Promise<void> {
    const ns = this.namespaces.get(from)!;
    await ip('-n', ns, 'neigh', 'replace', this.target(to), 'lladdr', NOWHERE_MAC, 'dev', 'eth0', 'nud', 'permanent');
    this.cuts.add(`${from}\n${to}`);
  }

  /** Cuts `a` and `b` apart both ways (two nodes). */
  async cutBoth(a: string, b: string): Promise<void> {
    await this.cut(a, b);
    await this.cut(b, a);
  }

  /** Undoes every cut. */
  async heal(): Promise<void> {
    for (const cut of [...this.cuts]) {
      const [from, to] = cut.split('\n') as [string, Peer];
      await ip('-n', this.namespaces.get(from)!, 'neigh', 'del', this.target(to), 'dev', 'eth0').catch(() => undefined);
      this.cuts.delete(cut);
    }
  }

  /** Removes the namespaces, the bridge and the relays (what a test started in them must be gone first). */
  async close(): Promise<void> {
    for (const relay of this.relays) await new Promise<void>((resolve) => relay.close(() => resolve()));
    for (const ns of this.namespaces.values()) await ip('netns', 'del', ns).catch(() => undefined);
    await ip('link', 'del', `whb${this.tag}`).catch(() => undefined);
  }
}
