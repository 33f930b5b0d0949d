/**
 * `npm run bench`: runs the workloads against one real node (Postgres + Redis) and worker
 * processes using the SDK, prints a table and writes docs/benchmarks.md. Bounded: a hard
 * timeout kills every child it started and exits 1.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseBenchArgs, USAGE, type BenchArgs } from './args.js';
import { killAllChildren } from './children.js';
import { describeMachine } from './machine.js';
import { metric, scrapeMetrics } from './cluster-nodes.js';
import { runNames, startBenchNode, type BenchNode } from './node-process.js';
import { runPeers } from './peers/run-peers.js';
import { runScale } from './scale/run-scale.js';
import { consoleTable, markdown, notesText, type RunOutcome, type WorkloadReport } from './report.js';
import { BenchStores } from './stores.js';
import { w1Throughput } from './w1-throughput.js';
import { w1lNonBindingLimit } from './w1l-nonbinding-limit.js';
import { w2Herd } from './w2-herd.js';
import { w3Precision } from './w3-precision.js';
import { w4Cron } from './w4-cron.js';
import { w5Dag } from './w5-dag.js';
import { w6NoisyNeighbour } from './w6-noisy-neighbour.js';
import type { RunContext, WithRunContext } from './workload.js';

/** Run by default; W1L and W6 (flow control) only when `--only` names them. */
const WORKLOADS = [w1Throughput, w2Herd, w3Precision, w4Cron, w5Dag];
const ON_REQUEST = [w1lNonBindingLimit, w6NoisyNeighbour];
const DOC_PATH = resolve(import.meta.dirname, '../../docs/benchmarks.md');

const log = (line: string): void => {
  process.stdout.write(`[bench ${new Date().toISOString().slice(11, 23)}] ${line}\n`);
};

/** Schemas and prefixes of nodes started and not yet removed, for cleanup on abort. */
const unremoved = new Map<string, string>();

async function main(): Promise<number> {
  let args;
  try {
    args = parseBenchArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  const startedMs = Date.now();
  const stores = new BenchStores();
  const abort = (reason: string): void => {
    log(`ABORT: ${reason}; killing child processes`);
    killAllChildren();
    const cleanup = Promise.all(
      [...unremoved].map(([schema, prefix]) => stores.removeRun(schema, prefix).catch(() => undefined)),
    );
    const limit = new Promise((r) => setTimeout(r, 5_000));
    void Promise.race([cleanup, limit]).finally(() => process.exit(1));
  };
  const hardTimer = setTimeout(
    () => abort(`hard timeout of ${args.timeoutMinutes} min reached`),
    args.timeoutMinutes * 60_000,
  );
  process.once('SIGINT', () => abort('interrupted'));
  process.once('SIGTERM', () => abort('terminated'));

  if (args.peers) {
    const code = await runPeers({ args, stores, log, withContext: contextRunner(args, stores), startedMs });
    clearTimeout(hardTimer);
    await stores.close();
    return code;
  }

  if (args.scale) {
    const code = await runScale({
      args,
      stores,
      log,
      track: (n) => unremoved.set(n.schema, n.redisPrefix),
      untrack: (n) => unremoved.delete(n.schema),
    });
    clearTimeout(hardTimer);
    await stores.close();
    return code;
  }

  const selected =
    args.only === null ? WORKLOADS : [...WORKLOADS, ...ON_REQUEST].filter((w) => args.only?.includes(w.id));
  if (selected.length === 0) {
    process.stderr.write(`--only names no workload (${[...WORKLOADS, ...ON_REQUEST].map((w) => w.id).join(', ')})\n`);
    return 2;
  }
  const versions = await stores.versions();
  const machine = describeMachine();
  log(
    `${machine.cpuModel}, ${machine.cores} cores, ${machine.memoryGiB} GiB, Node ${machine.node}, PostgreSQL ${versions.postgres}, Redis ${versions.redis}, load ${machine.loadAvg1m}`,
  );
  if (machine.loadAvg1m > machine.cores * 0.5)
    log(`WARNING: load average ${machine.loadAvg1m} on ${machine.cores} cores: other work will skew the figures`);
  log(`${args.quick ? 'QUICK mode, ' : ''}${args.runs} run(s) of ${selected.map((w) => w.id).join(', ')}`);

  const withContext = contextRunner(args, stores);
  const reports: WorkloadReport[] = [];
  for (const workload of selected) {
    const runs: RunOutcome[] = [];
    for (let i = 1; i <= args.runs; i++) {
      log(`${workload.id} ${workload.title}: run ${i}/${args.runs}`);
      try {
        const figures = await withContext(async (ctx, nodes) => {
          const f = await workload.run(ctx);
          f.notes.push(...(await safetyNetNotes(nodes)));
          return f;
        });
        runs.push(figures);
        const summary = workload.metrics.map(
          (m) => `${m.key}=${(figures.values[m.key] ?? Number.NaN).toFixed(m.digits === 0 ? 0 : 3)}`,
        );
        log(`${workload.id} run ${i}: ${summary.join(' ')}${figures.verified ? '' : '  !!! VERIFICATION FAILED'}`);
        for (const note of figures.notes) log(`${workload.id} run ${i}: ${note}`);
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        runs.push({ error: message });
        log(`${workload.id} run ${i} FAILED: ${message}`);
      }
    }
    reports.push({ workload, runs });
  }
  clearTimeout(hardTimer);
  await stores.close();

  const durationS = (Date.now() - startedMs) / 1000;
  process.stdout.write(`\n${consoleTable(reports)}\n`);
  const notes = notesText(reports);
  if (notes.length > 0) process.stdout.write(`\nNotes:\n${notes.map((n) => `  - ${n}`).join('\n')}\n`);
  if (args.write) {
    const command = `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`;
    const written = markdown(reports, {
      machine,
      stores: versions,
      command,
      quick: args.quick,
      workers: args.workers,
      pollers: args.pollers,
      durationS,
    });
    writeFileSync(DOC_PATH, `${written.trimEnd()}\n${keptSections(DOC_PATH)}`);
    log(`wrote ${DOC_PATH}`);
  }
  const failed = reports.some((r) => r.runs.some((run) => 'error' in run || !run.verified));
  if (failed) log('some runs FAILED or did not verify: see above');
  return failed ? 1 : 0;
}

/**
 * Makes a run context (nodes on fresh schemas and prefixes, recorded for cleanup), runs `fn`
 * with it, then stops every node it started and removes their schemas and keys. On failure the
 * nodes' last output lines are logged first.
 */
function contextRunner(args: BenchArgs, stores: BenchStores): WithRunContext {
  return async (fn) => {
    const nodes: BenchNode[] = [];
    const started: { schema: string; redisPrefix: string }[] = [];
    const ctx: RunContext = {
      stores,
      quick: args.quick,
      workers: args.workers,
      pollers: args.pollers,
      cronWindowMs: args.cronWindowSeconds === null ? null : args.cronWindowSeconds * 1000,
      log,
      async startNode() {
        const names = runNames();
        started.push(names);
        unremoved.set(names.schema, names.redisPrefix);
        const node = await startBenchNode(names, args.nodeFlags);
        nodes.push(node);
        return node;
      },
    };
    try {
      return await fn(ctx, nodes);
    } catch (error) {
      for (const node of nodes) log(`node output (last lines):\n${node.output()}`);
      throw error;
    } finally {
      for (const node of nodes) await node.stop();
      for (const names of started) {
        await stores
          .removeRun(names.schema, names.redisPrefix)
          .catch((e: unknown) => log(`cleanup of ${names.schema} failed: ${String(e)}`));
        unremoved.delete(names.schema);
      }
    }
  };
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    killAllChildren();
    process.exit(1);
  },
);

/**
 * What the safety nets found during a run, per node: they should find nothing in a run
 * without faults (a count above 0 names a mechanism that left a task behind).
 */
async function safetyNetNotes(nodes: readonly BenchNode[]): Promise<string[]> {
  const notes: string[] = [];
  for (const node of nodes) {
    const scrape = await scrapeMetrics(node.url).catch(() => null);
    if (scrape === null) continue;
    const kinds = ['lease', 'pending', 'blocked'].map(
      (kind) => `${kind} ${metric(scrape, 'wheelhouse_safety_net_recovered_total', `kind="${kind}"`)}`,
    );
    let duties = 0;
    for (const [series, value] of scrape) if (series.startsWith('wheelhouse_duty_failures_total')) duties += value;
    notes.push(`safety nets recovered: ${kinds.join(', ')}; duty failures retried: ${duties}`);
  }
  return notes;
}

/**
 * The sections other commands write into the same file between markers (`<!-- name:begin …`
 * … `<!-- name:end -->`: npm run chaos, and its --faults), kept through a rewrite.
 */
function keptSections(path: string): string {
  if (!existsSync(path)) return '';
  const doc = readFileSync(path, 'utf8');
  const sections = [...doc.matchAll(/<!-- ([a-z0-9-]+):begin[^>]*-->[\s\S]*?<!-- \1:end -->/g)].map((m) => m[0]);
  return sections.map((section) => `\n${section}\n`).join('');
}
