/**
 * `npm run chaos`: the thundering herd on a cluster of 3 nodes, run twice on fresh schemas —
 * once undisturbed, once with one node SIGKILLed while the herd is being worked — and what
 * the kill cost: tasks lost, tasks run twice, how long the dead node's wheel partitions were
 * silent, and the herd's start lag next to the undisturbed run's. Prints a table; writes
 * docs/benchmarks.md only with --write. Bounded: a hard timeout kills every child it started
 * and exits 1.
 */
import { parseArgs } from 'node:util';
import { partitionOf } from '../src/lib/ids.js';
import { killAllChildren } from './children.js';
import {
  clusterView,
  killNode,
  metric,
  scrapeMetrics,
  startBenchCluster,
  submitSpread,
  waitSettled,
  type BenchCluster,
  type ClusterNode,
} from './cluster-nodes.js';
import { describeMachine } from './machine.js';
import { runNames } from './node-process.js';
import { median, percentiles, spaced } from './stats.js';
import { BenchStores } from './stores.js';
import { sleep } from './time.js';
import { WorkerFleet } from './worker-process.js';
import {
  HERD_TYPE,
  PROBE_TYPE,
  byTask,
  claimsInPostgres,
  countBy,
  diagnoseLost,
  duplicates,
  traffic,
  watchReady,
  watchTakeover,
} from './chaos-analysis.js';
import { DOC_PATH, consoleTable, fmtS, writeDoc, type ChaosRun, type Outcome } from './chaos-report.js';
import { runFaults } from './chaos-faults.js';
import { ensureServices } from './services.js';
import { faultTable, writeFaultsDoc, type FaultRun } from './chaos-faults-report.js';
import { nemesisMain } from './nemesis.js';

const NODES = 3;
/** Lease of every task, s: a task whose worker's node died comes back this long after its claim. */
const LEASE_SECONDS = 10;
/** Probes: every PROBE_EVERY_MS a few tasks, priority 0, from PROBE_LEAD_MS before T to PROBE_TAIL_MS after the kill. */
const PROBE_EVERY_MS = 100;
const PROBE_LEAD_MS = 2_000;
const CALIBRATION_TASKS = 8_000;
/** The nodes' default in-flight timeout: a ready entry taken and never claimed is put back after it, s. */
const INFLIGHT_TIMEOUT_SECONDS = 30;
/** The end of the run: nothing changed for this long after everything owed was due, ms. */
const STALL_MS = 15_000;
/** The end of the run in any case, ms after the herd is all ready. */
const DRAIN_LIMIT_MS = 240_000;
/** A herd task first run this long after the kill is reported as late. */
const LATE_AFTER_KILL_MS = 15_000;
const SUBMIT_TIME_FACTOR = 1.3;

const USAGE = `npm run chaos -- [--quick] [--tasks N] [--kill-after-ms MS] [--failure-timeout-seconds S]
                       [--workers N] [--pollers N] [--timeout-minutes M] [--only no-kill|kill] [--keep] [--write]
       npm run chaos -- --faults [--runs N] [--load-seconds S] [--tasks N] [--quick] [--write]
       npm run chaos -- --nemesis [--minutes M] [--rate N] [--fault-every MIN-MAX] [--broken lease-recovery]
                            (bench/nemesis.ts: --nemesis --help)
  --faults                  one node under load while its Postgres and Redis fail for real (restarts,
                            killed connections, a pause, Redis emptied), its clock 3 s ahead: see
                            bench/chaos-faults.ts. Restarts this machine's Postgres and Redis (root).
  --runs N                  --faults runs one after the other (default 1)
  --load-seconds S          --faults: how long tasks are submitted and faults happen (default 150; quick 60)
  --quick                   10 000 herd tasks, 32 probes per 100 ms, a 15 s tail (default: 100 000, 64, 25 s)
  --tasks N                 herd size
  --kill-after-ms MS        the kill, after the herd's due instant T (default 1000)
  --failure-timeout-seconds S  the nodes' failure timeout (default 5; heartbeat 1 s)
  --workers N               herd worker processes, each polling all 3 nodes (default 1)
  --pollers N               long-polls per node per worker process (default 1)
  --timeout-minutes M       hard limit: kill everything and exit 1 (default 10; --faults: 6 per run)
  --only RUN                just one of the two runs: no-kill or kill
  --keep                    keep each run's schema and Redis keys (printed) for inspection
  --write                   put the table in docs/benchmarks.md (between chaos markers)`;

interface ChaosArgs {
  faults: boolean;
  runs: number;
  loadSeconds: number;
  quick: boolean;
  tasks: number;
  killAfterMs: number;
  failureTimeoutSeconds: number;
  workers: number;
  pollers: number;
  timeoutMinutes: number;
  only: 'no-kill' | 'kill' | null;
  keep: boolean;
  write: boolean;
}

function parseChaosArgs(argv: string[]): ChaosArgs {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      faults: { type: 'boolean', default: false },
      runs: { type: 'string', default: '1' },
      'load-seconds': { type: 'string' },
      tasks: { type: 'string' },
      'kill-after-ms': { type: 'string', default: '1000' },
      'failure-timeout-seconds': { type: 'string', default: '5' },
      workers: { type: 'string', default: '1' },
      pollers: { type: 'string', default: '1' },
      'timeout-minutes': { type: 'string' },
      only: { type: 'string' },
      keep: { type: 'boolean', default: false },
      write: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const bad = (message: string): never => {
    throw new Error(message);
  };
  const positive = (name: string, raw: string): number => {
    const n = Number(raw);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number, got "${raw}"`);
    return n;
  };
  const faultTasks = values.quick ? '2400' : '6000';
  return {
    faults: values.faults,
    runs: Math.round(positive('runs', values.runs)),
    loadSeconds: positive('load-seconds', values['load-seconds'] ?? (values.quick ? '60' : '150')),
    quick: values.quick,
    tasks: Math.round(
      positive('tasks', values.tasks ?? (values.faults ? faultTasks : values.quick ? '10000' : '100000')),
    ),
    killAfterMs: positive('kill-after-ms', values['kill-after-ms']),
    failureTimeoutSeconds: positive('failure-timeout-seconds', values['failure-timeout-seconds']),
    workers: Math.round(positive('workers', values.workers)),
    pollers: Math.round(positive('pollers', values.pollers)),
    timeoutMinutes: positive(
      'timeout-minutes',
      values['timeout-minutes'] ?? String(values.faults ? 6 * Number(values.runs) : 10),
    ),
    only:
      values.only === undefined
        ? null
        : values.only === 'kill' || values.only === 'no-kill'
          ? values.only
          : bad(`--only must be no-kill or kill, got "${values.only}"`),
    keep: values.keep,
    write: values.write,
  };
}

const log = (line: string): void => {
  process.stdout.write(`[chaos ${new Date().toISOString().slice(11, 23)}] ${line}\n`);
};

/** Schemas and prefixes of runs started and not yet removed, for cleanup on abort. */
const unremoved = new Map<string, string>();

async function main(): Promise<number> {
  let args: ChaosArgs;
  try {
    args = parseChaosArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  const stores = new BenchStores();
  const abort = (reason: string): void => {
    log(`ABORT: ${reason}; killing child processes`);
    killAllChildren();
    // A --faults run may have left Postgres or Redis stopped or paused: put them back first.
    const restore = args.faults
      ? ensureServices(null).then(
          (done) => log(done.length > 0 ? done.join(', ') : 'the services are up'),
          (error: unknown) => log(`could not restore the services: ${String(error)}`),
        )
      : Promise.resolve();
    const cleanup = restore.then(() =>
      Promise.all([...unremoved].map(([schema, prefix]) => stores.removeRun(schema, prefix).catch(() => undefined))),
    );
    void Promise.race([cleanup, sleep(args.faults ? 90_000 : 5_000)]).finally(() => process.exit(1));
  };
  const hardTimer = setTimeout(
    () => abort(`hard timeout of ${args.timeoutMinutes} min reached`),
    args.timeoutMinutes * 60_000,
  );
  process.once('SIGINT', () => abort('interrupted'));
  process.once('SIGTERM', () => abort('terminated'));

  const versions = await stores.versions();
  const machine = describeMachine();
  const startedMs = Date.now();
  if (args.faults) {
    const code = await faultRuns(stores, args, { machine, versions, startedMs });
    clearTimeout(hardTimer);
    return code;
  }
  log(
    `${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}, PostgreSQL ${versions.postgres}, Redis ${versions.redis}, load ${machine.loadAvg1m}`,
  );
  if (machine.loadAvg1m > machine.cores * 0.5)
    log(`WARNING: load average ${machine.loadAvg1m} on ${machine.cores} cores: other work will skew the figures`);
  log(
    `${args.quick ? 'QUICK: ' : ''}${spaced(args.tasks)} herd tasks on ${NODES} nodes, failure timeout ${args.failureTimeoutSeconds} s; run 1 without a kill, run 2 SIGKILLs a node at T + ${args.killAfterMs} ms`,
  );

  const outcomes: Outcome[] = [];
  for (const kill of [false, true].filter((k) => args.only === null || args.only === (k ? 'kill' : 'no-kill'))) {
    const label = kill ? 'kill' : 'no kill';
    try {
      outcomes.push(await runOnce(stores, args, kill));
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      log(`${label} FAILED: ${message}`);
      outcomes.push({ label, error: message });
    }
  }
  clearTimeout(hardTimer);
  await stores.close();

  const table = consoleTable(outcomes);
  process.stdout.write(`\n${table}\n`);
  const notes = outcomes.flatMap((o) =>
    'error' in o ? [`${o.label}: FAILED: ${o.error}`] : o.notes.map((n) => `${o.label}: ${n}`),
  );
  const details = outcomes.flatMap((o) => ('error' in o ? [] : o.details.map((n) => `${o.label}: ${n}`)));
  if (notes.length + details.length > 0)
    process.stdout.write(`\nNotes:\n${[...notes, ...details].map((n) => `  - ${n}`).join('\n')}\n`);
  if (args.write) {
    writeDoc(outcomes, notes, {
      command: `npm run chaos${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
      machine: `${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}, PostgreSQL ${versions.postgres}, Redis ${versions.redis}; load average (1 min) at the start ${machine.loadAvg1m}`,
      date: machine.date,
      durationS: (Date.now() - startedMs) / 1000,
    });
    log(`wrote the chaos section of ${DOC_PATH}`);
  }
  const bad = outcomes.some(
    (o) => 'error' in o || o.lostHerd + o.lostProbes > 0 || o.duplicated > o.duplicatedInFlight,
  );
  if (bad) log('a run FAILED, lost tasks, or ran tasks twice that were not in flight on the dead node: see above');
  return bad ? 1 : 0;
}

/** `--faults`: the store-fault runs, their table, and the doc section with --write. */
async function faultRuns(
  stores: BenchStores,
  args: ChaosArgs,
  ctx: {
    machine: ReturnType<typeof describeMachine>;
    versions: { postgres: string; redis: string };
    startedMs: number;
  },
): Promise<number> {
  const { machine, versions } = ctx;
  log(
    `faults: ${args.runs} run(s) of ${args.loadSeconds} s, ${spaced(args.tasks)} tasks each; load ${machine.loadAvg1m}`,
  );
  const runs: (FaultRun | { error: string })[] = [];
  for (let i = 0; i < args.runs; i++) {
    try {
      runs.push(await runFaults(stores, { quick: args.quick, loadSeconds: args.loadSeconds, tasks: args.tasks }, log));
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      log(`faults run ${i + 1} FAILED: ${message}`);
      runs.push({ error: message });
    }
  }
  await stores.close();
  process.stdout.write(`\n${faultTable(runs)}\n`);
  const notes = runs.flatMap((r, i) =>
    'error' in r
      ? [`faults ${i + 1}: FAILED: ${r.error}`]
      : [
          ...r.notes,
          `duty failures (retried): ${JSON.stringify(r.dutyFailures)}; safety nets: ${JSON.stringify(r.recovered)}`,
        ].map((n) => `faults ${i + 1}: ${n}`),
  );
  process.stdout.write(`\nNotes:\n${notes.map((n) => `  - ${n}`).join('\n')}\n`);
  if (args.write) {
    writeFaultsDoc(runs, notes, {
      command: `npm run chaos -- ${process.argv.slice(2).join(' ')}`,
      machine: `${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}, PostgreSQL ${versions.postgres}, Redis ${versions.redis}; load average (1 min) at the start ${machine.loadAvg1m}`,
      date: machine.date,
      durationS: (Date.now() - ctx.startedMs) / 1000,
    });
    log(`wrote the chaos-faults section of ${DOC_PATH}`);
  }
  const bad = runs.some((r) => 'error' in r || r.lost > 0 || r.ranTwice > 0 || r.submits.other > 0);
  if (bad)
    log(
      'a faults run FAILED, lost tasks, ran tasks twice on honest workers, or answered a submit with something else than 2xx or 503/429 + Retry-After',
    );
  return bad ? 1 : 0;
}

/** One run on a fresh cluster; with `kill`, the busiest node is SIGKILLed at T + killAfterMs. */
async function runOnce(stores: BenchStores, args: ChaosArgs, kill: boolean): Promise<ChaosRun> {
  const label = kill ? 'kill' : 'no kill';
  const notes: string[] = [];
  const details: string[] = [];
  const names = runNames();
  unremoved.set(names.schema, names.redisPrefix);
  let cluster: BenchCluster | undefined;
  const fleets: WorkerFleet[] = [];
  try {
    log(`${label}: starting ${NODES} nodes`);
    cluster = await startBenchCluster(names, NODES, { failureTimeoutSeconds: args.failureTimeoutSeconds });
    try {
      const { settledMs, firstUnsettled } = await waitSettled(cluster, 60_000);
      notes.push(
        `cluster settled ${(settledMs / 1000).toFixed(1)} s after all nodes were ready${firstUnsettled ? `; first seen unsettled: ${firstUnsettled}` : ''}`,
      );
    } catch (error) {
      notes.push(`INVALID: ${(error as Error).message}`);
    }
    const nodes = cluster.nodes;
    const urls = nodes.map((n) => n.url);
    const view = await clusterView(urls[0] as string);
    const partitions = view.partitions.length;
    // The victim: the node that owns the most wheel partitions (the most to take over).
    const victim = [...nodes].sort(
      (a, b) => (view.ring.partitions_per_node[b.nodeId] ?? 0) - (view.ring.partitions_per_node[a.nodeId] ?? 0),
    )[0] as ClusterNode;
    const victimIndex = nodes.indexOf(victim);
    const survivor = nodes.find((n) => n !== victim) as ClusterNode;
    notes.push(`ring ${view.ring.spread}; ${kill ? 'killed' : 'watched (not killed)'}: ${victim.nodeId}`);

    const herdFleet = await WorkerFleet.start(args.workers, {
      url: urls[0] as string,
      urls,
      taskType: HERD_TYPE,
      concurrency: 1000,
      pollers: args.pollers,
      recordStarts: true,
    });
    fleets.push(herdFleet);
    const probeFleet = await WorkerFleet.start(1, {
      url: urls[0] as string,
      urls,
      taskType: PROBE_TYPE,
      concurrency: 300,
      pollers: 1,
      recordStarts: true,
    });
    fleets.push(probeFleet);

    // T from a measured submission rate (the second of two rounds), as W2 does.
    const calibration = { task_type: 'chaos.calibration', schedule: { type: 'delayed', delay_seconds: 3_600 } };
    await submitSpread(urls, CALIBRATION_TASKS / 2, () => calibration);
    const measured = await submitSpread(urls, CALIBRATION_TASKS / 2, () => calibration);
    const submitPerMs = CALIBRATION_TASKS / 2 / (measured.lastAnsweredMs - measured.firstSubmitMs);
    const perTick = args.quick ? 32 : 64;
    const tailMs = args.quick ? 15_000 : 25_000;
    const ticks = Math.ceil((PROBE_LEAD_MS + args.killAfterMs + tailMs) / PROBE_EVERY_MS);
    const probeCount = ticks * perTick;
    const marginMs = args.quick ? 5_000 : 10_000;
    const dueMs = Date.now() + marginMs + Math.ceil(((args.tasks + probeCount) / submitPerMs) * SUBMIT_TIME_FACTOR);
    const killAtMs = dueMs + args.killAfterMs;
    const probeDueMs = (i: number): number => dueMs - PROBE_LEAD_MS + Math.floor(i / perTick) * PROBE_EVERY_MS;

    const probeIds: string[] = new Array<string>(probeCount);
    log(
      `${label}: submitting ${spaced(probeCount)} probes and ${spaced(args.tasks)} herd tasks due at ${new Date(dueMs).toISOString()} (calibrated at ${Math.round(submitPerMs * 1000)}/s)`,
    );
    const probeSubmit = await submitSpread(
      urls,
      probeCount,
      (i) => {
        const due = probeDueMs(i);
        return {
          task_type: PROBE_TYPE,
          priority: 0,
          timeout_seconds: LEASE_SECONDS,
          payload: { due_ms: due },
          schedule: { type: 'delayed', due_time: new Date(due).toISOString() },
        };
      },
      { onCreated: (from, ids) => ids.forEach((id, k) => (probeIds[from + k] = id)) },
    );
    const herdTask = {
      task_type: HERD_TYPE,
      timeout_seconds: LEASE_SECONDS,
      payload: { due_ms: dueMs },
      schedule: { type: 'delayed', due_time: new Date(dueMs).toISOString() },
    };
    const herdSubmit = await submitSpread(urls, args.tasks, () => herdTask);
    const gapMs = dueMs - herdSubmit.lastAnsweredMs;
    notes.push(`last submit answer ${(gapMs / 1000).toFixed(1)} s before T`);
    if (gapMs < 2_000) notes.push(`INVALID: submission ended only ${(gapMs / 1000).toFixed(1)} s before T`);
    if (probeSubmit.retried + herdSubmit.retried > 0)
      notes.push(`${probeSubmit.retried + herdSubmit.retried} submit requests were answered 429/503 and sent again`);

    // From just before T: the herd's readiness, and (with a kill) the kill and the takeover.
    const ready = watchReady(stores, names.redisPrefix, herdFleet, args.tasks, dueMs);
    const victimPartitions = view.partitions.filter((p) => p.owner === victim.nodeId).map((p) => p.partition);
    let killMs = killAtMs;
    let heldMs = Number.NaN;
    if (kill) {
      // The owners are read ahead (a status request can take a while under the herd), so the kill is on time.
      await sleep(Math.max(0, killAtMs - 1_500 - Date.now()));
      const owned = (await clusterView(survivor.url, 5_000)).partitions
        .filter((p) => p.owner === victim.nodeId)
        .map((p) => p.partition);
      if (owned.join() !== victimPartitions.join())
        notes.push(`the victim's partitions changed since the start: ${victimPartitions.length} → ${owned.length}`);
      await sleep(Math.max(0, killAtMs - Date.now()));
      killMs = await killNode(victim);
      log(
        `${label}: SIGKILLed ${victim.nodeId} (pid ${victim.pid}) at T + ${killMs - dueMs} ms; it owned ${owned.length} partitions`,
      );
      notes.push(
        `SIGKILL at ${new Date(killMs).toISOString().slice(11, 23)} = T + ${((killMs - dueMs) / 1000).toFixed(2)} s`,
      );
      const takeover = await watchTakeover(survivor, victim.nodeId, owned, killMs);
      heldMs = takeover.heldMs;
      notes.push(...takeover.notes);
    }
    const allReadyMs = await ready;

    // Until Postgres has every task succeeded. What is owed comes back on its own: an expired
    // lease after LEASE_SECONDS, a ready entry a dead node took but never claimed after the
    // in-flight timeout (30 s). So the wait ends when all succeeded, or when nothing has changed
    // for STALL_MS once that is all past (or at DRAIN_LIMIT_MS in any case).
    const lastProbeDueMs = probeDueMs(probeCount - 1);
    const owedBy =
      Math.max(lastProbeDueMs, killMs + args.failureTimeoutSeconds * 1000) +
      (LEASE_SECONDS + INFLIGHT_TIMEOUT_SECONDS) * 1000;
    const drainStart = Date.now();
    let herdCounts: Record<string, number> = {};
    let probeCounts: Record<string, number> = {};
    let lastChange = { at: Date.now(), succeeded: -1 };
    for (;;) {
      herdCounts = await stores.countByStatus(names.schema, HERD_TYPE);
      probeCounts = await stores.countByStatus(names.schema, PROBE_TYPE);
      const succeeded = (herdCounts.succeeded ?? 0) + (probeCounts.succeeded ?? 0);
      if (succeeded !== lastChange.succeeded) lastChange = { at: Date.now(), succeeded };
      if (succeeded === args.tasks + probeCount) break;
      const now = Date.now();
      if ((now > owedBy && now - lastChange.at > STALL_MS) || now - drainStart > DRAIN_LIMIT_MS) break;
      await sleep(now < lastProbeDueMs ? 1_000 : 250);
    }
    const drainedMs = Date.now();
    notes.push(
      `Postgres: herd ${JSON.stringify(herdCounts)}, probes ${JSON.stringify(probeCounts)} ${(drainedMs - (kill ? killMs : dueMs)) / 1000} s after ${kill ? 'the kill' : 'T'}`,
    );

    const herdResults = await herdFleet.stop();
    const probeResults = await probeFleet.stop();
    fleets.length = 0;
    notes.push(`herd workers: ${traffic(herdResults)}`);

    // Executions, from what the workers recorded.
    const herdRuns = byTask(herdResults);
    const probeRuns = byTask(probeResults);
    const lags: number[] = [];
    for (const r of herdRuns.values()) lags.push(r.firstMs - dueMs);
    const [p50, p99, max] = percentiles(lags, [50, 99, 100]) as [number, number, number];
    if (herdRuns.size !== args.tasks)
      notes.push(`the workers started ${herdRuns.size} distinct herd tasks of ${args.tasks}`);
    // Late first runs: ready entries a dead node had taken but not claimed wait in the in-flight
    // set until a survivor's requeueStale puts them back (inflightTimeoutSeconds, 30 s by default).
    const lateRuns = [...herdRuns.values()].filter((r) => r.firstMs - killMs >= LATE_AFTER_KILL_MS);
    if (lateRuns.length > 0) {
      const late = lateRuns.map((r) => r.firstMs - killMs);
      notes.push(
        `herd tasks whose first run started ≥ ${LATE_AFTER_KILL_MS / 1000} s after ${kill ? 'the kill' : 'T + kill offset'}: ${lateRuns.length}, ` +
          `at + ${fmtS(Math.min(...late))} … ${fmtS(Math.max(...late))}, attempts seen ${JSON.stringify(countBy(lateRuns.map((r) => r.attempts.join('+'))))}`,
      );
    }
    // Without a kill nothing was in flight on a dead node: every duplicate is unexplained.
    const dup = duplicates([...herdRuns.values(), ...probeRuns.values()], kill ? victimIndex : -1, killMs);
    notes.push(...dup.notes);
    notes.push(...(await claimsInPostgres(stores, names.schema, herdResults, nodes)));

    // The dead node's partitions: the first start of a probe due after the kill, per partition.
    const firstAfter = new Map<number, number>();
    probeIds.forEach((id, i) => {
      if (probeDueMs(i) < killMs) return;
      const run = probeRuns.get(id);
      if (!run) return;
      const p = partitionOf(id, partitions);
      firstAfter.set(p, Math.min(firstAfter.get(p) ?? Infinity, run.firstMs - killMs));
    });
    const gaps = victimPartitions.map((p) => firstAfter.get(p) ?? Infinity);
    const others = [...firstAfter].filter(([p]) => !victimPartitions.includes(p)).map(([, ms]) => ms);
    const silent = victimPartitions.filter((p) => !firstAfter.has(p));
    if (silent.length > 0) notes.push(`NO probe due after the kill started in partitions ${silent.join(', ')}`);
    notes.push(
      `probes due after ${kill ? 'the kill' : 'T + kill offset'}: first start − that instant, over ${victim.nodeId}'s ${victimPartitions.length} partitions ` +
        `max ${fmtS(Math.max(...gaps))} median ${fmtS(median(gaps))}; over the other ${others.length} partitions max ${fmtS(Math.max(...others))} median ${fmtS(median(others))}`,
    );
    const probeLags = probeIds.flatMap((id, i) => {
      const run = probeRuns.get(id);
      return run ? [run.firstMs - probeDueMs(i)] : [];
    });
    const [pp50, pp99] = percentiles(probeLags, [50, 99]) as [number, number];
    notes.push(`probe start lag (all ${probeRuns.size}): p50 ${fmtS(pp50)}, p99 ${fmtS(pp99)}`);

    const survivors = kill ? nodes.filter((n) => n !== victim) : nodes;
    const scrapes = await Promise.all(
      survivors.map((n) => scrapeMetrics(n.url).catch(() => new Map<string, number>())),
    );
    const sum = (name: string, labels?: string): number => scrapes.reduce((n, s) => n + metric(s, name, labels), 0);
    notes.push(
      `${kill ? 'survivors' : 'nodes'}: wheelhouse_stale_epoch_total ${sum('wheelhouse_stale_epoch_total')}, actors handed off ${sum('wheelhouse_actors_handed_off_total')}, ` +
        `tasks requeued ${sum('wheelhouse_tasks_requeued_total')}, transport retries ${sum('wheelhouse_transport_retries_total')} failed ${sum('wheelhouse_transport_envelopes_failed_total')}`,
    );
    notes.push(
      `${kill ? 'survivors' : 'nodes'}: safety nets recovered ${['lease', 'pending', 'blocked'].map((k) => `${k} ${sum('wheelhouse_safety_net_recovered_total', `kind="${k}"`)}`).join(', ')}`,
    );
    // What the nodes logged about recovery (their last lines only): entries put back, partitions restarted.
    for (const n of survivors) {
      const said = new Map<string, number>();
      for (const line of n.output().split('\n')) {
        const msg = /"msg":"([^"]*)"/.exec(line)?.[1];
        const count = Number(/"count":(\d+)/.exec(line)?.[1] ?? 1);
        if (msg && /never claimed|not running|lost this partition|stale activation/.test(msg))
          said.set(msg, (said.get(msg) ?? 0) + count);
      }
      if (said.size > 0)
        notes.push(`${n.nodeId} logged (last lines): ${[...said].map(([m, c]) => `"${m}" ×${c}`).join(', ')}`);
    }
    const lostHerd = args.tasks - (herdCounts.succeeded ?? 0);
    const lostProbes = probeCount - (probeCounts.succeeded ?? 0);
    if (lostHerd + lostProbes > 0) {
      const lost = await diagnoseLost(stores, names.schema, survivors[0] as ClusterNode, partitions);
      notes.push(lost.summary);
      details.push(...lost.detail);
      for (const n of survivors)
        details.push(`${n.nodeId} output (last lines): ${n.output().split('\n').slice(-5).join(' ⏎ ')}`);
    }
    return {
      label: kill ? `kill ${victim.nodeId} at T+${((killMs - dueMs) / 1000).toFixed(1)} s` : 'no kill',
      herd: args.tasks,
      probes: probeCount,
      lostHerd,
      lostProbes,
      duplicated: dup.duplicated,
      duplicatedInFlight: dup.inFlight,
      firingMaxMs: Math.max(...gaps),
      firingMedianMs: median(gaps),
      heldMs,
      p50Ms: p50,
      p99Ms: p99,
      maxMs: max,
      allReadyMs,
      notes,
      details,
    };
  } catch (error) {
    for (const f of fleets) f.kill();
    if (cluster) for (const n of cluster.nodes) log(`${n.nodeId} output (last lines):\n${n.output()}`);
    throw error;
  } finally {
    await cluster?.stop();
    if (args.keep) log(`${label}: kept schema ${names.schema} and Redis prefix ${names.redisPrefix}`);
    else
      await stores
        .removeRun(names.schema, names.redisPrefix)
        .catch((e: unknown) => log(`cleanup of ${names.schema} failed: ${String(e)}`));
    unremoved.delete(names.schema);
  }
}

// `--nemesis` is a run of its own (bench/nemesis.ts), with its own flags.
if (process.argv.includes('--nemesis')) nemesisMain(process.argv.slice(2));
else
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`chaos: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      killAllChildren();
      process.exit(1);
    },
  );
