/**
 * `npm run bench:pg-failover -- [--nodes N] [--default-timeouts]`: a real Postgres failover
 * under a steady stream of work (issue 29, item 1). A pg_auto_failover set on 55432–55434
 * (bench/pg-ha.ts; installed with apt-get when missing), N node processes on it through the
 * multi-host URL and on the local Redis, submits that retry on 429/503 with idempotency keys,
 * one HTTP worker per node; the primary is killed with SIGKILL mid-stream
 * (bench/pg-failover.ts). Prints acknowledged tasks lost, tasks handed out twice and why, the
 * submits' answers, and the times from the kill to a server taking writes and to the first
 * claim on it. Exits 1 on a lost or unfinished acknowledged task, a stray row, or a 5xx other
 * than 503. Run it under `flock /tmp/wh-bench.lock`.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { killAllChildren } from './children.js';
import { startBenchCluster, type BenchCluster } from './cluster-nodes.js';
import { runPgFailover } from './pg-failover.js';
import { PgHa } from './pg-ha.js';

const REDIS_URL = process.env.WHEELHOUSE_BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      nodes: { type: 'string', default: '1' },
      'default-timeouts': { type: 'boolean', default: false },
    },
  });
  const nodes = Number(values.nodes);
  const log = (line: string): void => console.log(`${new Date().toISOString().slice(11, 23)} ${line}`);
  const id = randomBytes(4).toString('hex');
  const names = { schema: `pgfo_${id}`, redisPrefix: `pgfo${id}` };
  let ha: PgHa | undefined;
  let cluster: BenchCluster | undefined;
  try {
    ha = await PgHa.start({ defaultTimeouts: values['default-timeouts'], log });
    log(`pg-failover: set up; monitor settings ${JSON.stringify(ha.monitorSettings)}; ${nodes} node(s) on ${ha.url}`);
    cluster = await startBenchCluster(names, nodes, {
      extraFlags: ['--postgres-url', ha.url, '--retry-base-seconds', '0'],
    });
    const loadBefore = await loadAvg();
    const r = await runPgFailover({
      ha,
      urls: cluster.nodes.map((n) => n.url),
      schema: names.schema,
      beforeKillMs: 5_000,
      afterWritableMs: 10_000,
      submitEveryMs: 20,
      leaseSeconds: 5,
      settleMs: 90_000,
      log,
    });
    const why = r.duplicates.reduce<Record<string, number>>(
      (acc, d) => ({ ...acc, [d.why]: (acc[d.why] ?? 0) + 1 }),
      {},
    );
    console.log(
      [
        `nodes ${nodes}; load before ${loadBefore}, after ${await loadAvg()}`,
        `primary's replication before the kill: synchronous_standby_names '${r.replication.synchronousStandbyNames}', synchronous_commit ${r.replication.synchronousCommit}`,
        `acknowledged ${r.acknowledged}; lost ${r.lost.length}; unfinished ${r.unfinished.length}; stray rows ${r.strays}`,
        `handed out more than once ${r.duplicates.length} ${JSON.stringify(why)}`,
        `submit answers ${JSON.stringify(r.answers)}; 5xx ${JSON.stringify(r.errorCodes)}`,
        `kill -> a server takes writes ${r.writableAfterMs} ms; kill -> first claim on it ${r.firstClaimAfterMs ?? 'none'} ms`,
      ].join('\n'),
    );
    const bad =
      r.lost.length > 0 ||
      r.unfinished.length > 0 ||
      r.strays > 0 ||
      Object.keys(r.errorCodes).some((k) => k !== '503 store_unavailable');
    return bad ? 1 : 0;
  } finally {
    await cluster?.stop().catch(() => undefined);
    await ha?.stop();
    const redis = new Redis(REDIS_URL);
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${names.redisPrefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== '0');
    redis.disconnect();
  }
}

async function loadAvg(): Promise<string> {
  return (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    killAllChildren();
    process.exit(1);
  },
);
