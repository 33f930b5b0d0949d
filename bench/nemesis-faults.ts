/**
 * What the nemesis (bench/nemesis.ts) does to the cluster: the fault menu, one fault every
 * 20–60 s, each put back before the next (a killed node restarted, a paused one resumed, a
 * killed store primary restarted as the new standby), and the worker churn beside it (worker
 * processes killed or stopped and started again). Every fault and every worker kill is a line
 * of `faults.jsonl`, which the history checker reads to tell a duplicate that a fault explains
 * from one that nothing does.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { request } from 'undici';
import { trackChild, waitForExit } from './children.js';
import type { NemesisNode } from './nemesis-nodes.js';
import { LIMITED_TYPE, NEMESIS_TYPES, PLAIN_TYPE } from './nemesis-producer.js';
import type { NemesisStores } from './nemesis-stores.js';
import type { NemesisWorkerConfig } from './nemesis-worker.js';
import type { TestNetwork } from '../test/support/netns.js';
import { sleep } from './time.js';

export type FaultKind =
  'node-kill' | 'node-stop' | 'pg-failover' | 'redis-primary-kill' | 'clock-step' | 'partition' | 'worker-drop-leases';

export const FAULT_KINDS: readonly FaultKind[] = [
  'node-kill',
  'node-stop',
  'pg-failover',
  'redis-primary-kill',
  'clock-step',
  'partition',
  'worker-drop-leases',
];

/** What a partition cuts one node from: its peers (both ways, or only what it sends), Postgres, Redis. */
const CUTS = ['peers', 'peers-one-way', 'postgres', 'redis'] as const;

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)] as T;
const between = (min: number, max: number): number => min + Math.random() * (max - min);

/** The faults log: one JSON line per fault or worker kill. */
export class FaultLog {
  private readonly fd: number;
  readonly counts: Record<string, number> = {};

  constructor(file: string) {
    this.fd = openSync(file, 'a');
  }

  write(kind: string, target: string, fields: Record<string, unknown> = {}): void {
    this.counts[kind] = (this.counts[kind] ?? 0) + 1;
    writeSync(this.fd, `${JSON.stringify({ ev: 'fault', t: Date.now(), kind, target, ...fields })}\n`);
  }

  close(): void {
    closeSync(this.fd);
  }
}

const WORKER_SCRIPT = resolve(import.meta.dirname, 'nemesis-worker.js');

/** The worker processes: two on the channel, two on the HTTP long-poll, churned. */
export class NemesisWorkers {
  private readonly children = new Map<string, ChildProcess>();
  private incarnations = 0;

  constructor(
    private readonly dir: string,
    private readonly urls: readonly string[],
  ) {}

  readonly slots = ['c1', 'c2', 'h1', 'h2'];

  async startAll(): Promise<void> {
    await Promise.all(this.slots.map((slot) => this.start(slot)));
  }

  /** Starts the worker of `slot` (a new incarnation: a new worker id) and resolves once it runs. */
  async start(slot: string): Promise<void> {
    const n = this.slots.indexOf(slot);
    // Each worker starts its list at another node, so the HTTP ones poll different nodes.
    const urls = [...this.urls.slice(n % this.urls.length), ...this.urls.slice(0, n % this.urls.length)];
    const config: NemesisWorkerConfig = {
      urls,
      transport: slot.startsWith('c') ? 'channel' : 'http',
      workerId: `${slot}-${++this.incarnations}`,
      logFile: join(this.dir, `worker-${slot}.jsonl`),
      taskTypes: NEMESIS_TYPES,
      concurrency: 8,
      sleepMs: [20, 150],
    };
    const child = trackChild(fork(WORKER_SCRIPT, [JSON.stringify(config)], { stdio: 'ignore' }));
    (child as ChildProcess & { workerId?: string }).workerId = config.workerId;
    this.children.set(slot, child);
    await new Promise<void>((resolveReady, reject) => {
      child.once('message', () => resolveReady());
      child.once('exit', (code) => reject(new Error(`worker ${config.workerId} exited (${code}) before it was ready`)));
    });
  }

  /** One churn step: a worker killed (SIGKILL) or stopped gracefully, started again 1–3 s later. */
  async churn(faults: FaultLog): Promise<void> {
    const slot = pick(this.slots);
    const child = this.children.get(slot);
    if (child === undefined) return;
    const workerId = (child as ChildProcess & { workerId?: string }).workerId ?? slot;
    if (Math.random() < 0.5) {
      child.kill('SIGKILL');
      faults.write('worker-kill', workerId);
      await waitForExit(child, 5_000);
    } else {
      child.kill('SIGTERM');
      await waitForExit(child, 15_000);
      // A graceful stop reports what it held: its runs end in its own log.
    }
    await sleep(between(1_000, 3_000));
    await this.start(slot);
  }

  async stopAll(): Promise<void> {
    await Promise.all(
      [...this.children.values()].map((child) => {
        child.kill('SIGTERM');
        return waitForExit(child, 15_000);
      }),
    );
  }
}

/** The fault menu over the nodes and the stores. */
export class FaultMenu {
  private readonly dropperLog: number;
  private drops = 0;

  constructor(
    private readonly nodes: readonly NemesisNode[],
    private readonly stores: NemesisStores,
    private readonly faults: FaultLog,
    dir: string,
    private readonly log: (line: string) => void,
    /** The nodes' network, where they run in namespaces of their own: partitions need it. */
    private readonly network?: TestNetwork,
  ) {
    this.dropperLog = openSync(join(dir, 'worker-dropper.jsonl'), 'a');
  }

  /** Injects one fault of `kind` and puts it back; resolves when the cluster is whole again. */
  async inject(kind: FaultKind): Promise<string> {
    switch (kind) {
      case 'node-kill': {
        const node = pick(this.nodes.filter((n) => n.running()));
        const downMs = between(3_000, 10_000);
        this.faults.write(kind, node.id, { until: Date.now() + downMs });
        await node.kill();
        await sleep(downMs);
        await node.start();
        return `${node.id} killed, restarted after ${(downMs / 1000).toFixed(1)} s`;
      }
      case 'node-stop': {
        const node = pick(this.nodes.filter((n) => n.running()));
        const stopMs = between(3_000, 12_000);
        this.faults.write(kind, node.id, { until: Date.now() + stopMs });
        node.pause();
        await sleep(stopMs);
        node.resume();
        return `${node.id} stopped for ${(stopMs / 1000).toFixed(1)} s`;
      }
      case 'pg-failover':
        // Logged at the kill, not before: the monitor is asked which server is the primary
        // first (≈ 0.4 s), and a write the old primary acknowledged meanwhile is as much at risk.
        return await this.stores.failOverPostgres(() => this.faults.write(kind, 'postgres'));
      case 'redis-primary-kill': {
        this.faults.write(kind, 'redis');
        return await this.stores.killRedisPrimary();
      }
      case 'clock-step': {
        const node = pick(this.nodes.filter((n) => n.running()));
        const seconds = pick([-2, 2]);
        this.faults.write(kind, node.id, { seconds, until: Date.now() + 20_000 });
        node.stepClock(seconds);
        await sleep(20_000);
        node.stepClock(0);
        return `${node.id}'s clock stepped ${seconds > 0 ? '+' : ''}${seconds} s for 20 s, then back`;
      }
      case 'partition':
        return await this.partition(kind, this.network as TestNetwork);
      case 'worker-drop-leases':
        return await this.dropLeases(kind);
    }
  }

  /** One node cut off for 5–15 s, silently (packets dropped, no reset), then healed. */
  private async partition(kind: FaultKind, network: TestNetwork): Promise<string> {
    const node = pick(this.nodes);
    const cut = pick(CUTS);
    const ms = between(5_000, 15_000);
    this.faults.write(kind, `${node.id}:${cut}`, { until: Date.now() + ms });
    try {
      for (const other of this.nodes.filter((n) => n !== node)) {
        if (cut === 'peers') await network.cutBoth(node.id, other.id);
        else if (cut === 'peers-one-way') await network.cut(node.id, other.id);
      }
      if (cut === 'postgres' || cut === 'redis') await network.cut(node.id, cut);
      await sleep(ms);
    } finally {
      await network.heal();
    }
    return `${node.id} cut from ${cut} for ${(ms / 1000).toFixed(1)} s`;
  }

  /** Whether `kind` can be injected now (a store failover needs a standby to promote). */
  async possible(kind: FaultKind): Promise<boolean> {
    if (kind === 'pg-failover') return this.stores.postgresHasStandby();
    if (kind === 'redis-primary-kill') return this.stores.redisHasReplicas();
    if (kind === 'partition') return this.network !== undefined;
    return this.nodes.some((n) => n.running());
  }

  /** A worker that claims a few tasks over HTTP and never reports them nor heartbeats. */
  private async dropLeases(kind: FaultKind): Promise<string> {
    const node = pick(this.nodes.filter((n) => n.running()));
    const workerId = `dropper-${++this.drops}`;
    this.faults.write(kind, workerId);
    try {
      const res = await request(`${node.url}/api/workers/poll`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          worker_id: workerId,
          task_types: [PLAIN_TYPE, LIMITED_TYPE],
          max_tasks: 3,
          wait_ms: 2_000,
        }),
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      const body = (await res.body.json()) as { tasks?: { task_id: string; attempt: number; task_type: string }[] };
      for (const t of body.tasks ?? []) {
        const base = { task_id: t.task_id, attempt: t.attempt, worker: workerId };
        writeSync(
          this.dropperLog,
          `${JSON.stringify({ ev: 'start', t: Date.now(), ...base, path: 'http', task_type: t.task_type })}\n`,
        );
        writeSync(this.dropperLog, `${JSON.stringify({ ev: 'drop', t: Date.now(), ...base })}\n`);
      }
      return `${workerId} on ${node.id} took and dropped ${body.tasks?.length ?? 0} tasks`;
    } catch (error) {
      return `${workerId} on ${node.id}: ${(error as Error).message}`;
    }
  }

  close(): void {
    closeSync(this.dropperLog);
    this.log(`faults injected: ${JSON.stringify(this.faults.counts)}`);
  }
}
