/**
 * `npm run chaos`: the thundering herd on a cluster of 3 nodes, run twice on fresh schemas —
 * once undisturbed, once with one node SIGKILLed while the herd is being worked — and what
 * the kill cost: tasks lost, tasks run twice, how long the dead node's wheel partitions were
 * silent, and the herd's start lag next to the undisturbed run's. Prints a table; writes
 * docs/benchmarks.md only with --write. Bounded: a hard timeout kills every child it started
 * and exits 1.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { partitionOf } from '../src/ids.js';
import { killAllChildren } from './children.js';
import { clusterView, killNode, metric, scrapeMetrics, startBenchCluster, submitSpread, waitSettled, type BenchCluster, type ClusterNode } from './cluster-nodes.js';
import { describeMachine } from './machine.js';
import { runNames } from './node-process.js';
import type { WorkerResult } from './protocol.js';
import { median, percentiles, spaced } from './stats.js';
import { BenchStores } from './stores.js';
import { sleep } from './time.js';
import { WorkerFleet } from './worker-process.js';

const HERD_TYPE = 'chaos.herd';
const PROBE_TYPE = 'chaos.probe';
const NODES = 3;
/** Lease of every task, s: a task whose worker's node died comes back this long after its claim. */
const LEASE_SECONDS = 10;
/** Probes: every PROBE_EVERY_MS a few tasks, priority 0, from PROBE_LEAD_MS before T to PROBE_TAIL_MS after the kill. */
const PROBE_EVERY_MS = 100;
const PROBE_LEAD_MS = 2_000;
/** The bar: the dead node's partitions fire again within this long of the kill (failure timeout 5 s + 1 s). */
const BAR_FIRING_MS = 6_000;
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
const DOC_PATH = resolve(import.meta.dirname, '../../docs/benchmarks.md');
const DOC_BEGIN = '<!-- chaos:begin (npm run chaos -- --write) -->';
const DOC_END = '<!-- chaos:end -->';

const USAGE = `npm run chaos -- [--quick] [--tasks N] [--kill-after-ms MS] [--failure-timeout-seconds S]
                       [--workers N] [--pollers N] [--timeout-minutes M] [--only no-kill|kill] [--keep] [--write]
  --quick                   10 000 herd tasks, 32 probes per 100 ms, a 15 s tail (default: 100 000, 64, 25 s)
  --tasks N                 herd size
  --kill-after-ms MS        the kill, after the herd's due instant T (default 1000)
  --failure-timeout-seconds S  the nodes' failure timeout (default 5; heartbeat 1 s)
  --workers N               herd worker processes, each polling all 3 nodes (default 1)
  --pollers N               long-polls per node per worker process (default 1)
  --timeout-minutes M       hard limit: kill everything and exit 1 (default 10)
  --only RUN                just one of the two runs: no-kill or kill
  --keep                    keep each run's schema and Redis keys (printed) for inspection
  --write                   put the table in docs/benchmarks.md (between chaos markers)`;

interface ChaosArgs {
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
      tasks: { type: 'string' },
      'kill-after-ms': { type: 'string', default: '1000' },
      'failure-timeout-seconds': { type: 'string', default: '5' },
      workers: { type: 'string', default: '1' },
      pollers: { type: 'string', default: '1' },
      'timeout-minutes': { type: 'string', default: '10' },
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
  return {
    quick: values.quick,
    tasks: Math.round(positive('tasks', values.tasks ?? (values.quick ? '10000' : '100000'))),
    killAfterMs: positive('kill-after-ms', values['kill-after-ms']),
    failureTimeoutSeconds: positive('failure-timeout-seconds', values['failure-timeout-seconds']),
    workers: Math.round(positive('workers', values.workers)),
    pollers: Math.round(positive('pollers', values.pollers)),
    timeoutMinutes: positive('timeout-minutes', values['timeout-minutes']),
    only: values.only === undefined ? null : values.only === 'kill' || values.only === 'no-kill' ? values.only : bad(`--only must be no-kill or kill, got "${values.only}"`),
    keep: values.keep,
    write: values.write,
  };
}

const log = (line: string): void => {
  process.stdout.write(`[chaos ${new Date().toISOString().slice(11, 23)}] ${line}\n`);
};

/** One run's figures. */
interface ChaosRun {
  label: string;
  herd: number;
  probes: number;
  /** Herd tasks not `succeeded` in Postgres in the end; probes likewise. */
  lostHerd: number;
  lostProbes: number;
  /** Tasks (herd and probes) whose handler ran more than once, and of those the ones in flight on the dead node. */
  duplicated: number;
  duplicatedInFlight: number;
  /** Kill → first start of a probe due after the kill, max and median over the dead node's partitions, ms (no kill: the same instant and partitions). */
  firingMaxMs: number;
  firingMedianMs: number;
  /** Kill → every partition the dead node owned held by a survivor (fencing row), ms; NaN without a kill. */
  heldMs: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  allReadyMs: number;
  notes: string[];
  /** Printed on the console only, never written to the docs: per-partition detail, node output. */
  details: string[];
}

type Outcome = ChaosRun | { label: string; error: string };

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
    const cleanup = Promise.all([...unremoved].map(([schema, prefix]) => stores.removeRun(schema, prefix).catch(() => undefined)));
    void Promise.race([cleanup, sleep(5_000)]).finally(() => process.exit(1));
  };
  const hardTimer = setTimeout(() => abort(`hard timeout of ${args.timeoutMinutes} min reached`), args.timeoutMinutes * 60_000);
  process.once('SIGINT', () => abort('interrupted'));
  process.once('SIGTERM', () => abort('terminated'));

  const versions = await stores.versions();
  const machine = describeMachine();
  const startedMs = Date.now();
  log(`${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}, PostgreSQL ${versions.postgres}, Redis ${versions.redis}, load ${machine.loadAvg1m}`);
  if (machine.loadAvg1m > machine.cores * 0.5) log(`WARNING: load average ${machine.loadAvg1m} on ${machine.cores} cores: other work will skew the figures`);
  log(`${args.quick ? 'QUICK: ' : ''}${spaced(args.tasks)} herd tasks on ${NODES} nodes, failure timeout ${args.failureTimeoutSeconds} s; run 1 without a kill, run 2 SIGKILLs a node at T + ${args.killAfterMs} ms`);

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
  const notes = outcomes.flatMap((o) => ('error' in o ? [`${o.label}: FAILED: ${o.error}`] : o.notes.map((n) => `${o.label}: ${n}`)));
  const details = outcomes.flatMap((o) => ('error' in o ? [] : o.details.map((n) => `${o.label}: ${n}`)));
  if (notes.length + details.length > 0) process.stdout.write(`\nNotes:\n${[...notes, ...details].map((n) => `  - ${n}`).join('\n')}\n`);
  if (args.write) {
    writeDoc(outcomes, notes, {
      command: `npm run chaos${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
      machine: `${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}, PostgreSQL ${versions.postgres}, Redis ${versions.redis}; load average (1 min) at the start ${machine.loadAvg1m}`,
      date: machine.date,
      durationS: (Date.now() - startedMs) / 1000,
    });
    log(`wrote the chaos section of ${DOC_PATH}`);
  }
  const bad = outcomes.some((o) => 'error' in o || o.lostHerd + o.lostProbes > 0 || o.duplicated > o.duplicatedInFlight);
  if (bad) log('a run FAILED, lost tasks, or ran tasks twice that were not in flight on the dead node: see above');
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
      notes.push(`cluster settled ${(settledMs / 1000).toFixed(1)} s after all nodes were ready${firstUnsettled ? `; first seen unsettled: ${firstUnsettled}` : ''}`);
    } catch (error) {
      notes.push(`INVALID: ${(error as Error).message}`);
    }
    const nodes = cluster.nodes;
    const urls = nodes.map((n) => n.url);
    const view = await clusterView(urls[0] as string);
    const partitions = view.partitions.length;
    // The victim: the node that owns the most wheel partitions (the most to take over).
    const victim = [...nodes].sort((a, b) => (view.ring.partitions_per_node[b.nodeId] ?? 0) - (view.ring.partitions_per_node[a.nodeId] ?? 0))[0] as ClusterNode;
    const victimIndex = nodes.indexOf(victim);
    const survivor = nodes.find((n) => n !== victim) as ClusterNode;
    notes.push(`ring ${view.ring.spread}; ${kill ? 'killed' : 'watched (not killed)'}: ${victim.nodeId}`);

    const herdFleet = await WorkerFleet.start(args.workers, { url: urls[0] as string, urls, taskType: HERD_TYPE, concurrency: 1000, pollers: args.pollers, recordStarts: true });
    fleets.push(herdFleet);
    const probeFleet = await WorkerFleet.start(1, { url: urls[0] as string, urls, taskType: PROBE_TYPE, concurrency: 300, pollers: 1, recordStarts: true });
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
    log(`${label}: submitting ${spaced(probeCount)} probes and ${spaced(args.tasks)} herd tasks due at ${new Date(dueMs).toISOString()} (calibrated at ${Math.round(submitPerMs * 1000)}/s)`);
    const probeSubmit = await submitSpread(urls, probeCount, (i) => {
      const due = probeDueMs(i);
      return { task_type: PROBE_TYPE, priority: 0, timeout_seconds: LEASE_SECONDS, payload: { due_ms: due }, schedule: { type: 'delayed', due_time: new Date(due).toISOString() } };
    }, { onCreated: (from, ids) => ids.forEach((id, k) => (probeIds[from + k] = id)) });
    const herdTask = { task_type: HERD_TYPE, timeout_seconds: LEASE_SECONDS, payload: { due_ms: dueMs }, schedule: { type: 'delayed', due_time: new Date(dueMs).toISOString() } };
    const herdSubmit = await submitSpread(urls, args.tasks, () => herdTask);
    const gapMs = dueMs - herdSubmit.lastAnsweredMs;
    notes.push(`last submit answer ${(gapMs / 1000).toFixed(1)} s before T`);
    if (gapMs < 2_000) notes.push(`INVALID: submission ended only ${(gapMs / 1000).toFixed(1)} s before T`);
    if (probeSubmit.retried + herdSubmit.retried > 0) notes.push(`${probeSubmit.retried + herdSubmit.retried} submit requests were answered 429/503 and sent again`);

    // From just before T: the herd's readiness, and (with a kill) the kill and the takeover.
    const ready = watchReady(stores, names.redisPrefix, herdFleet, args.tasks, dueMs);
    const victimPartitions = view.partitions.filter((p) => p.owner === victim.nodeId).map((p) => p.partition);
    let killMs = killAtMs;
    let heldMs = Number.NaN;
    if (kill) {
      // The owners are read ahead (a status request can take a while under the herd), so the kill is on time.
      await sleep(Math.max(0, killAtMs - 1_500 - Date.now()));
      const owned = (await clusterView(survivor.url, 5_000)).partitions.filter((p) => p.owner === victim.nodeId).map((p) => p.partition);
      if (owned.join() !== victimPartitions.join()) notes.push(`the victim's partitions changed since the start: ${victimPartitions.length} → ${owned.length}`);
      await sleep(Math.max(0, killAtMs - Date.now()));
      killMs = await killNode(victim);
      log(`${label}: SIGKILLed ${victim.nodeId} (pid ${victim.pid}) at T + ${killMs - dueMs} ms; it owned ${owned.length} partitions`);
      notes.push(`SIGKILL at ${new Date(killMs).toISOString().slice(11, 23)} = T + ${((killMs - dueMs) / 1000).toFixed(2)} s`);
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
    const owedBy = Math.max(lastProbeDueMs, killMs + args.failureTimeoutSeconds * 1000) + (LEASE_SECONDS + INFLIGHT_TIMEOUT_SECONDS) * 1000;
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
    notes.push(`Postgres: herd ${JSON.stringify(herdCounts)}, probes ${JSON.stringify(probeCounts)} ${(drainedMs - (kill ? killMs : dueMs)) / 1000} s after ${kill ? 'the kill' : 'T'}`);

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
    if (herdRuns.size !== args.tasks) notes.push(`the workers started ${herdRuns.size} distinct herd tasks of ${args.tasks}`);
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
    const scrapes = await Promise.all(survivors.map((n) => scrapeMetrics(n.url).catch(() => new Map<string, number>())));
    const sum = (name: string, labels?: string): number => scrapes.reduce((n, s) => n + metric(s, name, labels), 0);
    notes.push(
      `${kill ? 'survivors' : 'nodes'}: wheelhouse_stale_epoch_total ${sum('wheelhouse_stale_epoch_total')}, actors handed off ${sum('wheelhouse_actors_handed_off_total')}, ` +
        `tasks requeued ${sum('wheelhouse_tasks_requeued_total')}, transport retries ${sum('wheelhouse_transport', 'counter="retries"')} failed ${sum('wheelhouse_transport', 'counter="failed"')}`,
    );
    // What the nodes logged about recovery (their last lines only): entries put back, partitions restarted.
    for (const n of survivors) {
      const said = new Map<string, number>();
      for (const line of n.output().split('\n')) {
        const msg = /"msg":"([^"]*)"/.exec(line)?.[1];
        const count = Number(/"count":(\d+)/.exec(line)?.[1] ?? 1);
        if (msg && /never claimed|not running|lost this partition|stale activation/.test(msg)) said.set(msg, (said.get(msg) ?? 0) + count);
      }
      if (said.size > 0) notes.push(`${n.nodeId} logged (last lines): ${[...said].map(([m, c]) => `"${m}" ×${c}`).join(', ')}`);
    }
    const lostHerd = args.tasks - (herdCounts.succeeded ?? 0);
    const lostProbes = probeCount - (probeCounts.succeeded ?? 0);
    if (lostHerd + lostProbes > 0) {
      const lost = await diagnoseLost(stores, names.schema, survivors[0] as ClusterNode, partitions);
      notes.push(lost.summary);
      details.push(...lost.detail);
      for (const n of survivors) details.push(`${n.nodeId} output (last lines): ${n.output().split('\n').slice(-5).join(' ⏎ ')}`);
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
    else await stores.removeRun(names.schema, names.redisPrefix).catch((e: unknown) => log(`cleanup of ${names.schema} failed: ${String(e)}`));
    unremoved.delete(names.schema);
  }
}

/** From T − 200 ms, every 10 ms: ready + in flight (Redis) + started ≥ count; returns that moment − T (W2's "all ready after T"). */
async function watchReady(stores: BenchStores, prefix: string, fleet: WorkerFleet, count: number, dueMs: number): Promise<number> {
  await sleep(Math.max(0, dueMs - Date.now() - 200));
  while (Date.now() < dueMs + 180_000) {
    const started = fleet.started;
    const ready = await stores.readyAndTaken(prefix, HERD_TYPE);
    if (ready + started >= count) return Date.now() - dueMs;
    await sleep(10);
  }
  return Number.NaN;
}

/**
 * After the kill, every 100 ms on a survivor: when its ring drops the dead node, and when
 * every partition the dead node owned is held (fencing row) by a survivor that the ring names.
 */
async function watchTakeover(survivor: ClusterNode, victimId: string, owned: number[], killMs: number): Promise<{ heldMs: number; notes: string[] }> {
  let ringMs = Number.NaN;
  let lastOff = '';
  while (Date.now() - killMs < 60_000) {
    const asked = Date.now();
    try {
      const view = await clusterView(survivor.url, 5_000);
      if (Number.isNaN(ringMs) && !view.ring.nodes.includes(victimId)) ringMs = Date.now() - killMs;
      const byPartition = new Map(view.partitions.map((p) => [p.partition, p]));
      const off = owned.filter((p) => {
        const row = byPartition.get(p);
        return !row || row.held_by === null || row.held_by === victimId || row.held_by !== row.owner;
      });
      if (off.length === 0) {
        const heldMs = Date.now() - killMs;
        return { heldMs, notes: [`${survivor.nodeId}'s ring dropped ${victimId} ${fmtS(ringMs)} after the kill; all ${owned.length} of its partitions held by survivors ${fmtS(heldMs)} after (polled every 100 ms)`] };
      }
      lastOff = off.slice(0, 6).map((p) => `${p}: ${JSON.stringify(byPartition.get(p))}`).join('; ');
    } catch (error) {
      lastOff = String(error);
    }
    await sleep(Math.max(0, 100 - (Date.now() - asked)));
  }
  return { heldMs: Number.NaN, notes: [`NOT all of ${victimId}'s partitions were held by survivors 60 s after the kill (ring dropped it after ${fmtS(ringMs)}); still off: ${lastOff}`] };
}

/** One task's executions as the workers saw them. */
interface TaskRuns {
  taskId: string;
  runs: number;
  firstMs: number;
  firstVia: number;
  firstAttempt: number;
  attempts: number[];
  /** Start of the latest run, Unix ms. */
  againMs: number;
}

function byTask(results: WorkerResult[]): Map<string, TaskRuns> {
  const out = new Map<string, TaskRuns>();
  for (const r of results) {
    const s = r.starts;
    if (!s) continue;
    for (let i = 0; i < s.taskIds.length; i++) {
      const id = s.taskIds[i] as string;
      const at = s.startMs[i] as number;
      const run = out.get(id);
      if (!run) {
        out.set(id, { taskId: id, runs: 1, firstMs: at, firstVia: s.via[i] as number, firstAttempt: s.attempts[i] as number, attempts: [s.attempts[i] as number], againMs: at });
        continue;
      }
      run.runs++;
      run.againMs = Math.max(run.againMs, at);
      run.attempts.push(s.attempts[i] as number);
      if (at < run.firstMs) {
        run.firstMs = at;
        run.firstVia = s.via[i] as number;
        run.firstAttempt = s.attempts[i] as number;
      }
    }
  }
  return out;
}

/**
 * Tasks whose handler ran more than once. One counts as in flight on the dead node when its
 * first run was polled from that node (so claimed before the kill: a dead node answers no
 * poll): its result had to go back through the dead node, so its lease ran out and it ran
 * again. Any other duplicate is unexplained.
 */
function duplicates(runs: TaskRuns[], victimIndex: number, killMs: number): { duplicated: number; inFlight: number; notes: string[] } {
  const dup = runs.filter((r) => r.runs > 1);
  const inFlight = dup.filter((r) => r.firstVia === victimIndex);
  const other = dup.filter((r) => r.firstVia !== victimIndex);
  const lateFirst = runs.filter((r) => r.runs === 1 && r.firstAttempt > 1).length;
  const notes = [`run more than once: ${dup.length} tasks (${dup.reduce((n, r) => n + r.runs - 1, 0)} extra runs); ${inFlight.length} of them first ran from a poll of the dead node`];
  if (inFlight.length > 0) {
    const firsts = inFlight.map((r) => r.firstMs - killMs);
    const agains = inFlight.map((r) => r.againMs - killMs);
    notes.push(
      `those ${inFlight.length}: first run kill ${signed(Math.min(...firsts))} … ${signed(Math.max(...firsts))}, run again kill + ${fmtS(Math.min(...agains))} … ${fmtS(Math.max(...agains))}; ` +
        `attempts seen ${JSON.stringify(countBy(inFlight.map((r) => r.attempts.join('+'))))}`,
    );
  }
  notes.push(`tasks run once but at attempt > 1 (claimed, never run, lease expired): ${lateFirst}`);
  if (other.length > 0) {
    notes.push(
      `UNEXPLAINED duplicates (first run not polled from the dead node): ${other.length}, e.g. ` +
        other.slice(0, 5).map((r) => `${r.taskId} first via node #${r.firstVia + 1} at ${new Date(r.firstMs).toISOString().slice(11, 23)} attempts ${r.attempts.join(',')}`).join('; '),
    );
  }
  return { duplicated: dup.length, inFlight: inFlight.length, notes };
}

function signed(ms: number): string {
  return `${ms < 0 ? '−' : '+'} ${fmtS(Math.abs(ms))}`;
}

/** Where the tasks that never succeeded are: a summary, and per partition its due times and its owner now. */
async function diagnoseLost(stores: BenchStores, schema: string, node: ClusterNode, partitions: number): Promise<{ summary: string; detail: string[] }> {
  const { rows } = await stores.pg.query<{ partition: number; status: string; task_type: string; due: Date; attempts: number; n: string; created: Date }>(
    `SELECT partition, status, task_type, due_time AS due, attempts, count(*) AS n, min(created_at) AS created
     FROM "${schema}".tasks WHERE task_type IN ($1, $2) AND status <> 'succeeded' GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 4`,
    [HERD_TYPE, PROBE_TYPE],
  );
  const view = await clusterView(node.url, 5_000).catch(() => null);
  const at = (d: Date): string => d.toISOString().slice(11, 23);
  const owner = (partition: number): string => {
    const p = view?.partitions.find((x) => x.partition === partition);
    return `owner ${p?.owner ?? '?'}, held by ${p?.held_by ?? '?'}, epoch ${p?.epoch ?? '?'}`;
  };
  const count = (f: (r: (typeof rows)[number]) => string): string =>
    Object.entries(countByN(rows.map((r) => [f(r), Number(r.n)]))).map(([k, n]) => `${k} ×${n}`).join(', ');
  const summary =
    `NOT SUCCEEDED: ${rows.reduce((n, r) => n + Number(r.n), 0)} tasks in ${new Set(rows.map((r) => r.partition)).size} partitions: ` +
    `${count((r) => `${r.task_type} ${r.status} attempts ${r.attempts}`)}; due at ${count((r) => at(r.due))}; their partitions' owners now: ${count((r) => owner(r.partition).split(',')[0] as string)}`;
  const detail = rows.map((r) => `not succeeded: partition ${r.partition} (of ${partitions}): ${r.n} ${r.task_type} ${r.status} due ${at(r.due)}, created ${at(r.created)}; the partition now: ${owner(r.partition)}`);
  return { summary, detail };
}

function countByN(pairs: [string, number][]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, n] of pairs) out[k] = (out[k] ?? 0) + n;
  return out;
}

/** Claims beyond the first (attempts − 1) and timed-out executions per worker id, from Postgres. */
async function claimsInPostgres(stores: BenchStores, schema: string, results: WorkerResult[], nodes: readonly ClusterNode[]): Promise<string[]> {
  const { rows } = await stores.pg.query<{ reclaimed: string; extra: string | null }>(
    `SELECT count(*) FILTER (WHERE attempts > 1) AS reclaimed, sum(GREATEST(attempts - 1, 0)) AS extra FROM "${schema}".tasks WHERE task_type IN ($1, $2)`,
    [HERD_TYPE, PROBE_TYPE],
  );
  const timedOut = await stores.pg.query<{ worker_id: string | null; n: string }>(
    `SELECT e.worker_id, count(*) AS n FROM "${schema}".executions e JOIN "${schema}".tasks t ON t.id = e.task_id
     WHERE t.task_type IN ($1, $2) AND e.status = 'timed_out' GROUP BY e.worker_id`,
    [HERD_TYPE, PROBE_TYPE],
  );
  // SDK worker ids are bench-<pid>-<url index>: name the node each one polled.
  const nodeOf = new Map<string, string>();
  for (const r of results) for (const u of r.perUrl ?? []) nodeOf.set(u.workerId, nodes.find((n) => n.url === u.url)?.nodeId ?? u.url);
  const byWorker = timedOut.rows.map((r) => `${r.worker_id ?? 'null'}${r.worker_id && nodeOf.has(r.worker_id) ? ` (via ${nodeOf.get(r.worker_id)})` : ''} ${r.n}`);
  return [
    `Postgres: ${rows[0]?.reclaimed ?? 0} herd/probe tasks claimed more than once (${rows[0]?.extra ?? 0} extra claims); timed-out executions by worker: ${byWorker.length > 0 ? byWorker.join(', ') : 'none'}`,
  ];
}

function traffic(results: WorkerResult[]): string {
  return results
    .flatMap((r) => r.perUrl ?? [])
    .map((u) => `${u.url.replace('http://127.0.0.1:', ':')} ${u.started} started, ${u.reported} accepted, ${u.discarded} discarded, ${u.polls} polls`)
    .join('; ');
}

function countBy(keys: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of keys) out[k] = (out[k] ?? 0) + 1;
  return out;
}

function fmtS(ms: number): string {
  return Number.isFinite(ms) ? `${(ms / 1000).toFixed(2)} s` : '—';
}

const HEADERS = ['run', 'tasks', 'lost', 'duplicated', 'partitions firing again after', 'herd p50/p99 start lag', 'all ready in'];

function rows(outcomes: Outcome[]): string[][] {
  return outcomes.map((o) => {
    if ('error' in o) return [o.label, 'FAILED', '', '', '', '', o.error.slice(0, 80)];
    const killed = o.label.startsWith('kill');
    const firing = killed
      ? `${fmtS(o.firingMaxMs)} (median ${fmtS(o.firingMedianMs)}; fence rows ${fmtS(o.heldMs)}) ${o.firingMaxMs <= BAR_FIRING_MS ? 'meets' : 'MISSES'} ≤ ${BAR_FIRING_MS / 1000} s`
      : `${fmtS(o.firingMaxMs)} (no kill: same partitions, same instant)`;
    return [
      o.label,
      `${spaced(o.herd)} + ${spaced(o.probes)} probes`,
      o.lostProbes > 0 ? `${o.lostHerd} (+ ${o.lostProbes} probes)` : String(o.lostHerd),
      `${o.duplicated}${o.duplicated > 0 ? ` (${o.duplicatedInFlight} in flight on the dead node)` : ''}`,
      firing,
      `${fmtS(o.p50Ms)} / ${fmtS(o.p99Ms)}`,
      fmtS(o.allReadyMs),
    ];
  });
}

function consoleTable(outcomes: Outcome[]): string {
  const body = rows(outcomes);
  const widths = HEADERS.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string => cells.map((c, i) => c.padEnd(widths[i] as number)).join('  ').trimEnd();
  return [line(HEADERS), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

/** Replaces the section between the chaos markers in docs/benchmarks.md, or appends one. */
function writeDoc(outcomes: Outcome[], notes: string[], meta: { command: string; machine: string; date: string; durationS: number }): void {
  const section = [
    DOC_BEGIN,
    '## Chaos: a node SIGKILLed during the herd',
    '',
    `Written by \`${meta.command}\` (bench/chaos.ts) on ${meta.date}, ${meta.durationS.toFixed(0)} s in all. ${meta.machine}.`,
    '',
    `| ${HEADERS.join(' | ')} |`,
    `|${HEADERS.map(() => '---').join('|')}|`,
    ...rows(outcomes).map((r) => `| ${r.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`),
    '',
    ...notes.map((n) => `- ${n}`),
    DOC_END,
  ].join('\n');
  const doc = readFileSync(DOC_PATH, 'utf8');
  const begin = doc.indexOf(DOC_BEGIN);
  const end = doc.indexOf(DOC_END);
  const next = begin >= 0 && end > begin ? doc.slice(0, begin) + section + doc.slice(end + DOC_END.length) : `${doc.trimEnd()}\n\n${section}\n`;
  writeFileSync(DOC_PATH, next);
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`chaos: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    killAllChildren();
    process.exit(1);
  },
);
