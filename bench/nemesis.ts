/**
 * `npm run chaos -- --nemesis [--minutes M]`: half an hour (by default) of everything going
 * wrong at once, then a check of the whole history (issue 29). Three nodes on a Postgres
 * primary + secondary under pg_auto_failover and a Redis Cluster of three primaries with a
 * replica each (bench/nemesis-stores.ts); producers submitting immediate, delayed, limited and
 * DAG tasks and three cron schedules, retrying with their idempotency keys
 * (bench/nemesis-producer.ts); four worker processes, two on the channel and two on the HTTP
 * long-poll, killed or stopped and restarted every 10–30 s; and every 20–60 s a fault from the
 * menu (bench/nemesis-faults.ts): a node killed or paused, the Postgres primary killed, a Redis
 * primary killed, a node's clock stepped 2 s, a worker taking tasks and dropping them. Then
 * every fault is put back, the work drains, and the history checker (bench/nemesis-check.ts)
 * reads the logs and the database: exit 1 on any violation.
 *
 * `--broken lease-recovery` runs the nodes from a copy of this build in which a lease that
 * runs out is never taken back: the checker must report the tasks that stay stranded.
 * Everything a run wrote stays in its directory (printed), for the checker to be run again.
 */
import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { request } from 'undici';
import { killAllChildren } from './children.js';
import { FAULT_KINDS, FaultLog, FaultMenu, NemesisWorkers, type FaultKind } from './nemesis-faults.js';
import { DEFAULT_CLI, NemesisNode } from './nemesis-nodes.js';
import { LIMIT_FAMILY, Producer } from './nemesis-producer.js';
import { NemesisStores } from './nemesis-stores.js';
import { writeStuckReport } from './nemesis-stuck.js';
import { checkRunDir, printReport } from './nemesis-check.js';
import { freePort } from './node-process.js';
import { sleep } from './time.js';
import { TestNetwork } from '../test/support/netns.js';

const USAGE = `npm run chaos -- --nemesis [--minutes M] [--rate N] [--fault-every MIN-MAX] [--broken lease-recovery]
  --minutes M            how long tasks are submitted and faults injected (default 30)
  --rate N               submissions a second, spread over the nodes (default 20)
  --fault-every MIN-MAX  seconds between faults (default 20-60)
  --broken lease-recovery  run a copy of this build with lease expiry switched off (the checker must fail)
  --no-partitions        leave partitions out (they need root: each node runs in a network namespace)`;

/** The limits the limited tasks take: every `nem:<k>` 2 at once, `nem:0` 1 (an exact key over its family). */
const LIMITS: Record<string, { concurrency: number }> = {
  [LIMIT_FAMILY]: { concurrency: 2 },
  'nem:0': { concurrency: 1 },
};
/** After the load: how long the work may take to drain, and how long without progress ends the wait, ms. */
const DRAIN_LIMIT_MS = 300_000;
const DRAIN_STALL_MS = 90_000;

interface Args {
  minutes: number;
  rate: number;
  faultEvery: [number, number];
  broken: boolean;
  partitions: boolean;
}

function parse(argv: string[]): Args {
  const { values } = parseArgs({
    args: argv,
    options: {
      nemesis: { type: 'boolean' },
      minutes: { type: 'string', default: '30' },
      rate: { type: 'string', default: '20' },
      'fault-every': { type: 'string', default: '20-60' },
      broken: { type: 'string' },
      'no-partitions': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const [min, max] = (values['fault-every'] ?? '').split('-').map(Number);
  const args = {
    minutes: Number(values.minutes),
    rate: Number(values.rate),
    faultEvery: [min ?? Number.NaN, max ?? Number.NaN] as [number, number],
    broken: values.broken === 'lease-recovery',
    partitions: !values['no-partitions'],
  };
  if (values.broken !== undefined && !args.broken) throw new Error(`--broken knows only lease-recovery: ${USAGE}`);
  if (
    !(args.minutes > 0) ||
    !(args.rate > 0) ||
    !(args.faultEvery[0] > 0) ||
    !(args.faultEvery[1] >= args.faultEvery[0])
  )
    throw new Error(`bad arguments:\n${USAGE}`);
  return args;
}

/** A copy of this build whose task store never expires a lease (for the checker's own test). */
function brokenCli(id: string): { cli: string; remove: () => void } {
  const root = resolve(import.meta.dirname, '..');
  const copy = join(root, `nemesis-broken-${id}`);
  cpSync(join(root, 'src'), join(copy, 'src'), { recursive: true });
  const file = join(copy, 'src/store/task-store.js');
  const text = readFileSync(file, 'utf8');
  const patched = text.replace(
    /expireLease\(taskId, version, nowMs, backoff\) \{/,
    '$& return Promise.resolve(null); // nemesis --broken lease-recovery',
  );
  if (patched === text) throw new Error(`--broken: found no expireLease to switch off in ${file}`);
  writeFileSync(file, patched);
  return { cli: join(copy, 'src/cli.js'), remove: () => rmSync(copy, { recursive: true, force: true }) };
}

async function declareLimits(url: string): Promise<void> {
  for (const [name, body] of Object.entries(LIMITS)) {
    const res = await request(`${url}/api/limits/${encodeURIComponent(name)}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    await res.body.dump();
    if (res.statusCode >= 300) throw new Error(`PUT /api/limits/${name} answered ${res.statusCode}`);
  }
}

/** Tasks of the run not yet in a final state (cron schedules themselves aside), at most 200. */
async function unfinished(stores: NemesisStores, schema: string): Promise<Record<string, unknown>[]> {
  const port = await stores.postgres.waitForWritable(60_000);
  const client = new pg.Client({ connectionString: stores.postgres.serverUrl(port) });
  await client.connect();
  try {
    const { rows } = await client.query<Record<string, unknown>>(
      `SELECT id, task_type, status, attempts, partition, due_time, lease_expires_at, worker_id, limits,
              deps_total, deps_satisfied, last_error
       FROM ${schema}.tasks
       WHERE schedule_type <> 'cron' AND status NOT IN ('succeeded', 'failed', 'cancelled') LIMIT 200`,
    );
    return rows;
  } finally {
    await client.end();
  }
}

async function everyWhile(until: () => boolean, gapMs: () => number, step: () => Promise<void>): Promise<void> {
  for (;;) {
    await sleep(gapMs());
    if (!until()) return;
    await step();
  }
}

export async function runNemesis(argv: string[]): Promise<number> {
  const args = parse(argv);
  const log = (line: string): void => console.log(`${new Date().toISOString().slice(11, 23)} ${line}`);
  const id = randomBytes(4).toString('hex');
  const dir = `/tmp/nemesis-${id}`;
  mkdirSync(dir, { recursive: true });
  const schema = `nem_${id}`;
  const broken = args.broken ? brokenCli(id) : undefined;
  log(
    `nemesis ${id}: ${args.minutes} min, ${args.rate}/s, a fault every ${args.faultEvery.join('–')} s${broken ? ', BROKEN build (lease recovery off)' : ''}; logs in ${dir}`,
  );
  const ids = ['n1', 'n2', 'n3'];
  const opened = args.partitions ? await TestNetwork.open(ids) : 'switched off (--no-partitions)';
  const network = typeof opened === 'string' ? undefined : opened;
  if (network === undefined) log(`partitions are not in the menu: ${opened as string}`);
  const stores = await NemesisStores.start(log, network).catch(async (error: unknown) => {
    await network?.close();
    throw error;
  });
  const nodes: NemesisNode[] = [];
  let fleet: NemesisWorkers | undefined;
  try {
    const flags = [
      ...['--postgres-url', stores.nodePostgresUrl, '--postgres-schema', schema],
      ...['--redis-url', stores.nodeRedisSeeds, '--redis-cluster', '--redis-prefix', `nem${id}`],
      // Off loopback (each node its own address on the nemesis's network) without API keys.
      ...(network ? ['--insecure'] : []),
      ...[
        '--cluster-secret',
        randomBytes(24).toString('hex'),
        '--heartbeat-seconds',
        '1',
        '--failure-timeout-seconds',
        '5',
      ],
      ...['--log-level', 'warn', '--builtin-executors', 'false', '--retry-base-seconds', '0.2'],
    ];
    for (const nodeId of ids) {
      nodes.push(
        new NemesisNode({
          nodeId,
          host: network?.host(nodeId) ?? '127.0.0.1',
          port: await freePort(),
          launcher: network?.launcher(nodeId) ?? [],
          flags,
          dir,
          cli: broken?.cli ?? DEFAULT_CLI,
        }),
      );
    }
    // One first, so that the schema is migrated once; then the others.
    await nodes[0]!.start();
    await Promise.all(nodes.slice(1).map((n) => n.start()));
    const urls = nodes.map((n) => n.url);
    await declareLimits(urls[0]!);
    const workers = new NemesisWorkers(dir, urls);
    fleet = workers;
    await workers.startAll();

    const startedMs = Date.now();
    const loadEndMs = startedMs + args.minutes * 60_000;
    const producer = new Producer(urls, join(dir, 'producer-1.jsonl'), id);
    await producer.schedules([1, 2, 5], loadEndMs);
    producer.start(args.rate);
    const faults = new FaultLog(join(dir, 'faults.jsonl'));
    const menu = new FaultMenu(nodes, stores, faults, dir, log, network);
    const during = (): boolean => Date.now() < loadEndMs;
    const [lo, hi] = args.faultEvery;
    await Promise.all([
      everyWhile(
        during,
        () => (lo + Math.random() * (hi - lo)) * 1000,
        async () => {
          const possible: FaultKind[] = [];
          for (const kind of FAULT_KINDS) if (await menu.possible(kind)) possible.push(kind);
          const kind = possible[Math.floor(Math.random() * possible.length)];
          if (kind === undefined) return;
          const at = ((Date.now() - startedMs) / 1000).toFixed(0);
          try {
            log(`+${at} s ${kind}: ${await menu.inject(kind)}`);
          } catch (error) {
            log(`+${at} s ${kind} FAILED to inject or put back: ${(error as Error).message}`);
          }
        },
      ),
      everyWhile(
        during,
        () => 10_000 + Math.random() * 20_000,
        () => workers.churn(faults),
      ),
    ]);
    log(`load over; submits answered ${JSON.stringify(producer.answers)}; draining`);
    await producer.stop();
    for (const node of nodes) if (!node.running()) await node.start();
    log(`stores whole again: ${await stores.healed()}`);
    let left = await unfinished(stores, schema);
    let progressAt = Date.now();
    for (const drainEnd = Date.now() + DRAIN_LIMIT_MS; left.length > 0 && Date.now() < drainEnd;) {
      await sleep(2_000);
      const now = await unfinished(stores, schema).catch(() => left);
      if (now.length < left.length) progressAt = Date.now();
      left = now;
      if (Date.now() - progressAt > DRAIN_STALL_MS) break;
    }
    log(`drained: ${left.length} task(s) not final${left.length > 0 ? ' (unfinished.json)' : ''}`);
    writeFileSync(join(dir, 'unfinished.json'), JSON.stringify(left, null, 1));
    if (left.length > 0) {
      await writeStuckReport(
        dir,
        nodes.filter((n) => n.running()).map((n) => n.url),
        left,
      ).catch((error: unknown) => log(`stuck.json could not be written: ${String(error)}`));
      log('what the nodes say of the unfinished tasks: stuck.json');
    }
    menu.close();
    faults.close();
    await workers.stopAll();
    writeFileSync(
      join(dir, 'run.json'),
      JSON.stringify({
        schema,
        postgres_url: stores.postgres.serverUrl(await stores.postgres.waitForWritable(60_000)),
        started_ms: startedMs,
        ended_ms: Date.now(),
        limits: LIMITS,
        broken: args.broken ? 'lease-recovery' : null,
      }),
    );
    const report = await checkRunDir(dir, { postgresUrl: stores.postgresUrl, schema });
    printReport(report, log);
    log(`run directory: ${dir}`);
    return report.violations.length > 0 ? 1 : 0;
  } finally {
    await fleet?.stopAll().catch(() => undefined);
    await Promise.all(nodes.map((n) => n.stop().catch(() => undefined)));
    await stores.stop();
    await network?.close();
    broken?.remove();
  }
}

export function nemesisMain(argv: string[]): void {
  // Bounded whatever happens: the load, the drain and the check, with room for the store set-up.
  const args = parse(argv);
  const hardMs = (args.minutes + 20) * 60_000;
  const timer = setTimeout(() => {
    console.error(`nemesis: hard limit of ${hardMs / 60_000} min reached; killing everything`);
    killAllChildren();
    process.exit(1);
  }, hardMs);
  timer.unref();
  runNemesis(argv).then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error);
      killAllChildren();
      process.exit(1);
    },
  );
}
