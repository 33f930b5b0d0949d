/**
 * `npm run bench:ready-layouts -- [--entries N] [--take M] [--rounds R] [--cluster redis://h:p,…]`:
 * what the two ready-queue layouts cost, alone, without a node (docs/decisions/0017): the
 * single-server layout (`RedisReadyQueue`, every queue under `{rq}`) and the partitioned one
 * (`PartitionedReadyQueue`, queues per wheel partition found through per-type registries) on
 * the Redis server of the other benchmarks, and with `--cluster` the partitioned one on that
 * Redis Cluster. Each round pushes N entries of one task type as 64 wheel partitions fire them
 * (fenced pushes of each partition's share, a turn's pushes merged), then takes M at a time
 * (and acknowledges them) until none is left. Prints, per layout, the medians of the push and
 * take phases (wall ms), Redis's CPU for them (µs per entry, from INFO commandstats, summed
 * over the cluster's primaries) and what a take sends: its calls (scripts and registry
 * reads, the registry prunes it leaves behind included), their keys, and the distinct slots
 * of those keys.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { Redis } from 'ioredis';
import { partitionOf } from '../src/lib/ids.js';
import type { DueEntry } from '../src/domain/model.js';
import { CoalescingReadyQueue, type GroupingReadyQueue } from '../src/store/coalescing-ready-queue.js';
import { PartitionedReadyQueue } from '../src/store/redis-partitioned-ready-queue.js';
import { RedisReadyQueue } from '../src/store/redis-ready-queue.js';
import { isCluster, openRedis, openRedisCluster, type RedisClient } from '../src/store/redis.js';
import { REDIS_URL } from './stores.js';

const { values } = parseArgs({
  options: {
    entries: { type: 'string', default: '50000' },
    take: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '5' },
    partitions: { type: 'string', default: '64' },
    cluster: { type: 'string' },
  },
});
const ENTRIES = Number(values.entries);
const TAKE = Number(values.take);
const ROUNDS = Number(values.rounds);
const PARTITIONS = Number(values.partitions);
/** Entries per turn of the wheels: what 64 partitions fire together in W1. */
const TURN = 1_000;
const TASK_TYPE = 'bench.layout';

interface Layout {
  name: string;
  client: RedisClient;
  open(prefix: string): GroupingReadyQueue;
}

interface Figures {
  pushMs: number;
  takeMs: number;
  pushUsPerEntry: number;
  takeUsPerEntry: number;
  takes: number;
  /** Script calls and registry reads (ZRANGE) a take sends, prunes of the registry included. */
  callsPerTake: number;
  keysPerTake: number;
  slotsPerTake: number;
}

/** The primaries of a client: itself, or a cluster's masters. */
function servers(client: RedisClient): Redis[] {
  return isCluster(client) ? client.nodes('master') : [client];
}

/** Redis's CPU spent on commands so far, µs, summed over the servers (INFO commandstats). */
async function commandUs(client: RedisClient): Promise<number> {
  let total = 0;
  for (const server of servers(client)) {
    const info = await server.info('commandstats');
    for (const m of info.matchAll(/usec=(\d+)/g)) total += Number(m[1]);
  }
  return total;
}

async function deleteKeys(client: RedisClient, prefix: string): Promise<void> {
  for (const server of servers(client)) {
    let cursor = '0';
    do {
      const [next, keys] = await server.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      await Promise.all(keys.map((key) => server.unlink(key)));
      cursor = next;
    } while (cursor !== '0');
  }
}

/** The slot of a key (CRC16/XMODEM of its hash tag, mod 16384), as Redis Cluster computes it. */
function slotOf(key: string): number {
  const open = key.indexOf('{');
  const close = open < 0 ? -1 : key.indexOf('}', open + 1);
  const tag = close > open + 1 ? key.slice(open + 1, close) : key;
  let crc = 0;
  for (const byte of Buffer.from(tag)) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}

async function round(layout: Layout): Promise<Figures> {
  const prefix = `bench-layout-${randomBytes(4).toString('hex')}`;
  const inner = layout.open(prefix);
  const ready = new CoalescingReadyQueue(inner);
  const now = Date.now();
  try {
    // The entries, each in its wheel partition, due in order.
    const byPartition = new Map<number, DueEntry[]>();
    const entries: DueEntry[] = Array.from({ length: ENTRIES }, (_, i) => ({
      taskId: `t${i}-${prefix}`,
      taskType: TASK_TYPE,
      priority: 5,
      dueMs: now - ENTRIES + i,
    }));
    const cpu0 = await commandUs(layout.client);
    const push0 = performance.now();
    for (let from = 0; from < ENTRIES; from += TURN) {
      byPartition.clear();
      for (const entry of entries.slice(from, from + TURN)) {
        const partition = partitionOf(entry.taskId, PARTITIONS);
        let list = byPartition.get(partition);
        if (list === undefined) byPartition.set(partition, (list = []));
        list.push(entry);
      }
      await Promise.all([...byPartition].map(([partition, list]) => ready.push(list, { partition, epoch: 1 })));
    }
    const pushMs = performance.now() - push0;
    const cpu1 = await commandUs(layout.client);
    // What the takes send: per take, the keys of each script call and registry read.
    const perTake: string[][][] = [];
    let current: string[][] = [];
    const client = layout.client as unknown as Record<'evalsha' | 'zrange', (...args: unknown[]) => Promise<unknown>>;
    const evalsha = client.evalsha.bind(client);
    const zrange = client.zrange.bind(client);
    client.evalsha = (...args: unknown[]) => {
      current.push(args.slice(2, 2 + Number(args[1])).map(String));
      return evalsha(...args);
    };
    client.zrange = (...args: unknown[]) => {
      current.push([String(args[0])]);
      return zrange(...args);
    };
    let taken = 0;
    const take0 = performance.now();
    try {
      for (;;) {
        current = [];
        const got = await ready.take([TASK_TYPE], TAKE, now);
        perTake.push(current);
        if (got.length === 0) break;
        taken += got.length;
        await ready.ack(got);
      }
    } finally {
      client.evalsha = evalsha;
      client.zrange = zrange;
    }
    const takeMs = performance.now() - take0;
    const cpu2 = await commandUs(layout.client);
    if (taken !== ENTRIES) throw new Error(`${layout.name}: took ${taken} of ${ENTRIES}`);
    // The last take found nothing left: the figures are those of the takes that took.
    const takes = perTake.slice(0, -1);
    const sum = (f: (calls: string[][]) => number): number => takes.reduce((total, calls) => total + f(calls), 0);
    return {
      pushMs,
      takeMs,
      pushUsPerEntry: (cpu1 - cpu0) / ENTRIES,
      takeUsPerEntry: (cpu2 - cpu1) / ENTRIES,
      takes: takes.length,
      callsPerTake: sum((calls) => calls.length) / takes.length,
      keysPerTake: sum((calls) => calls.flat().length) / takes.length,
      slotsPerTake: sum((calls) => new Set(calls.flat().map(slotOf)).size) / takes.length,
    };
  } finally {
    await ready.close();
    await deleteKeys(layout.client, prefix);
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

const single = openRedis({ url: REDIS_URL, prefix: 'bench-layout' });
const cluster = values.cluster === undefined ? null : openRedisCluster({ url: values.cluster, prefix: 'bench-layout' });
const layouts: Layout[] = [
  { name: 'single server, {rq}', client: single, open: (prefix) => new RedisReadyQueue(single, prefix) },
  {
    name: 'single server, per partition',
    client: single,
    open: (prefix) => new PartitionedReadyQueue(single, prefix, { partitions: PARTITIONS }),
  },
];
if (cluster !== null) {
  await cluster.ping();
  layouts.push({
    name: 'Redis Cluster, per partition',
    client: cluster,
    open: (prefix) => new PartitionedReadyQueue(cluster, prefix, { partitions: PARTITIONS }),
  });
}
try {
  const results = new Map<string, Figures[]>(layouts.map((l) => [l.name, []]));
  // Rounds alternate the layouts, so a busy spell of the machine touches each.
  for (let r = 0; r < ROUNDS; r++) {
    for (const layout of layouts) results.get(layout.name)?.push(await round(layout));
  }
  process.stdout.write(
    `${ENTRIES} entries of one type over ${PARTITIONS} partitions, pushed ${TURN} a turn, taken ${TAKE} at a time; medians of ${ROUNDS} rounds\n`,
  );
  for (const [name, runs] of results) {
    const m = (key: keyof Figures): number => median(runs.map((run) => run[key]));
    process.stdout.write(
      `${name.padEnd(30)} push ${m('pushMs').toFixed(0)} ms (Redis ${m('pushUsPerEntry').toFixed(2)} µs/entry)` +
        `  take ${m('takeMs').toFixed(0)} ms (Redis ${m('takeUsPerEntry').toFixed(2)} µs/entry)` +
        `  per take: ${m('callsPerTake').toFixed(1)} calls, ${m('keysPerTake').toFixed(1)} keys, ${m('slotsPerTake').toFixed(1)} slots (${m('takes').toFixed(0)} takes)\n`,
    );
  }
} finally {
  single.disconnect();
  cluster?.disconnect();
}
