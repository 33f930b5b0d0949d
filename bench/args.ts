import { parseArgs } from 'node:util';

/** `npm run bench -- [flags]`. */
export interface BenchArgs {
  runs: number;
  only: string[] | null;
  quick: boolean;
  workers: number;
  pollers: number;
  timeoutMinutes: number;
  /** Write docs/benchmarks.md (default: yes for full runs, no for --quick). */
  write: boolean;
  /** Extra flags passed to `wheelhouse node`, split on spaces. */
  nodeFlags: string[];
  /** W4's firing window, seconds; null: the workload's default (120, --quick: 20). */
  cronWindowSeconds: number | null;
  /** Run W1, W2 and W3 on Wheelhouse and on BullMQ, interleaved, instead of the workloads. */
  peers: boolean;
  /** Interleaved rounds of `--peers` (default 3, --quick: 1). */
  rounds: number;
  /** Redis database index BullMQ runs on under `--peers`; emptied before and after each run, never 0. */
  peersRedisDb: number;
  /** Instead of the workloads: the scale parts (pending tasks, cron schedules) on one node. */
  scale: boolean;
  /** `--scale` parts to run (default both). */
  scaleParts: ('pending' | 'cron')[];
  /** Pending delayed tasks of `--scale` (default 10 000 000, --quick: 200 000). */
  scaleTasks: number;
  /** Cron schedules of `--scale` (default 1 000 000, --quick: 50 000). */
  scaleSchedules: number;
}

export const USAGE = `npm run bench -- [--runs N] [--only W1,W2,W3,W4,W5,W1L,W6] [--quick] [--workers N] [--pollers N]
                       [--timeout-minutes M] [--write | --no-write] ["--node-flags=--partitions 64 ..."]
                       [--cron-window-seconds S] [--peers [--rounds N] [--peers-redis-db N]]
                       [--scale [--scale-parts pending,cron] [--scale-tasks N] [--scale-schedules N]]
  --runs N            runs of each workload; the table shows the median and each run (default 3, --quick: 1)
  --only LIST         workloads to run (default W1,W2,W3,W4,W5; flow control: W1L a non-binding limit's cost,
                      W6 noisy neighbour — only when named)
  --quick             small counts, for a smoke test (W1 5 000, W2 20 000, W3 200 over 5 s,
                      W4 1 000 per-second schedules for 20 s and 10 000 per-minute ones,
                      W5 100 diamonds, a 1 000-task chain of fans and 10 000 blocked tasks)
  --workers N         worker processes per workload (default 1)
  --pollers N         concurrent long-polls per worker process (default 1)
  --timeout-minutes M hard limit: kill everything and exit 1 (default 45, --scale: 90)
  --cron-window-seconds S  how long W4's per-second schedules fire (default 120, --quick: 20)
  --write/--no-write  write docs/benchmarks.md (default: write unless --quick)
  --node-flags=STR    extra flags for 'wheelhouse node' (with '=': a value starting with -- is otherwise read as a flag)
  --peers             instead: W1, W2 and W3 on Wheelhouse and on BullMQ (its own Worker, in its own process), interleaved
                      round by round, with the ratios; writes its own section of docs/benchmarks.md (--only W1,W3 picks;
                      flow control only when named: --only W6 noisy neighbour, --only RATE rate accuracy)
  --rounds N          interleaved rounds of --peers (default 3, --quick: 1)
  --peers-redis-db N  Redis database index for BullMQ, emptied before and after each run (default 9; 0 is refused)
  --scale             instead: one node with 10 000 000 pending delayed tasks over 24 h (RSS, Redis and Postgres per task,
                      then Redis flushed: the rebuild), and one with 1 000 000 cron schedules (RSS, a minute boundary's herd);
                      each on a private redis-server; writes its own section of docs/benchmarks.md (hard limit 90 min)
  --scale-parts LIST  pending, cron or both (default both)
  --scale-tasks N     pending tasks of --scale (default 10 000 000, --quick: 200 000)
  --scale-schedules N cron schedules of --scale (default 1 000 000, --quick: 50 000)`;

export function parseBenchArgs(argv: string[]): BenchArgs {
  const { values } = parseArgs({
    args: argv,
    options: {
      runs: { type: 'string' },
      only: { type: 'string' },
      quick: { type: 'boolean', default: false },
      workers: { type: 'string', default: '1' },
      pollers: { type: 'string', default: '1' },
      'timeout-minutes': { type: 'string' },
      write: { type: 'boolean' },
      'no-write': { type: 'boolean' },
      'node-flags': { type: 'string', default: '' },
      'cron-window-seconds': { type: 'string' },
      peers: { type: 'boolean', default: false },
      rounds: { type: 'string' },
      'peers-redis-db': { type: 'string', default: '9' },
      scale: { type: 'boolean', default: false },
      'scale-parts': { type: 'string', default: 'pending,cron' },
      'scale-tasks': { type: 'string' },
      'scale-schedules': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const quick = values.quick;
  const only = values.only
    ? values.only
        .split(',')
        .map((w) => w.trim().toUpperCase())
        .filter((w) => w !== '')
    : null;
  return {
    runs: positive('runs', values.runs ?? (quick ? '1' : '3')),
    only,
    quick,
    workers: positive('workers', values.workers),
    pollers: positive('pollers', values.pollers),
    timeoutMinutes: positive('timeout-minutes', values['timeout-minutes'] ?? (values.scale ? '90' : '45')),
    write: values['no-write'] ? false : (values.write ?? !quick),
    nodeFlags: values['node-flags'].split(' ').filter((f) => f !== ''),
    cronWindowSeconds:
      values['cron-window-seconds'] === undefined
        ? null
        : positive('cron-window-seconds', values['cron-window-seconds']),
    peers: values.peers,
    rounds: positive('rounds', values.rounds ?? (quick ? '1' : '3')),
    peersRedisDb: redisDb(values['peers-redis-db']),
    scale: values.scale,
    scaleParts: scaleParts(values['scale-parts']),
    scaleTasks: positive('scale-tasks', values['scale-tasks'] ?? (quick ? '200000' : '10000000')),
    scaleSchedules: positive('scale-schedules', values['scale-schedules'] ?? (quick ? '50000' : '1000000')),
  };
}

function positive(name: string, raw: string): number {
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number, got "${raw}"`);
  return n;
}

/** A Redis database index other than 0 (the one everything else uses). */
function redisDb(raw: string): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 15)
    throw new Error(`--peers-redis-db must be a database index from 1 to 15 (0 is refused), got "${raw}"`);
  return n;
}

function scaleParts(raw: string): ('pending' | 'cron')[] {
  const parts = raw
    .split(',')
    .map((p) => p.trim().toLowerCase())
    .filter((p) => p !== '');
  for (const p of parts)
    if (p !== 'pending' && p !== 'cron') throw new Error(`--scale-parts names pending and cron, got "${p}"`);
  return parts as ('pending' | 'cron')[];
}
