/**
 * The nodes of the nemesis (bench/nemesis.ts): `wheelhouse node` processes on the HA Postgres
 * and the Redis Cluster, each on a fixed port so that a node killed and started again is found
 * where it was, each with a clock that the fault menu can step while it runs
 * (`testClockStepFile`), and each writing its whole output to a log file in the run directory.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { request } from 'undici';
import { trackChild, waitForExit } from './children.js';
import { sleep } from './time.js';

export interface NodeSetup {
  nodeId: string;
  /** Its address (its own on the nemesis's network, or loopback) and port. */
  host: string;
  port: number;
  /** A prefix to the command, e.g. `ip netns exec <ns>` to run it in its network namespace. */
  launcher: readonly string[];
  /** `wheelhouse node` flags shared by every node (stores, cluster secret, timings). */
  flags: readonly string[];
  /** The run directory: the node's log and clock-step file go there. */
  dir: string;
  /** The cli.js to run (another build's, for a deliberately broken run). */
  cli: string;
}

export const DEFAULT_CLI = resolve(import.meta.dirname, '../src/cli.js');

export class NemesisNode {
  private child: ChildProcess | undefined;
  private stopped = false;
  private readonly stepFile: string;

  constructor(private readonly setup: NodeSetup) {
    this.stepFile = join(setup.dir, `${setup.nodeId}.clock`);
    writeFileSync(this.stepFile, '0');
  }

  get id(): string {
    return this.setup.nodeId;
  }

  get url(): string {
    return `http://${this.setup.host}:${this.setup.port}`;
  }

  running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Starts the process and resolves once it answers /readyz (or throws after `timeoutMs`). */
  async start(timeoutMs = 90_000): Promise<void> {
    const { nodeId, host, port, launcher, flags, dir, cli } = this.setup;
    const [command, ...prefix] = [...launcher, process.execPath];
    const child = trackChild(
      spawn(
        command,
        [
          ...prefix,
          cli,
          'node',
          ...flags,
          ...['--node-id', nodeId, '--port', String(port), '--host', host],
          ...['--test-clock-step-file', this.stepFile],
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      ),
    );
    const log = createWriteStream(join(dir, `${nodeId}.log`), { flags: 'a' });
    child.stdout?.pipe(log, { end: false });
    child.stderr?.pipe(log, { end: false });
    child.once('exit', () => log.end());
    this.child = child;
    this.stopped = false;
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      if (!this.running()) throw new Error(`node ${nodeId} exited before it was ready (see ${nodeId}.log)`);
      try {
        const res = await request(`${this.url}/readyz`, { headersTimeout: 2_000, bodyTimeout: 2_000 });
        await res.body.dump();
        if (res.statusCode === 200) return;
      } catch {
        // not listening yet
      }
      await sleep(200);
    }
    throw new Error(`node ${nodeId} was not ready within ${timeoutMs} ms (see ${nodeId}.log)`);
  }

  /** kill -9. */
  async kill(): Promise<void> {
    const child = this.child;
    if (child === undefined || !this.running()) return;
    if (this.stopped) child.kill('SIGCONT');
    child.kill('SIGKILL');
    await waitForExit(child, 5_000);
  }

  /** SIGSTOP: the process stays, silent, its sockets open. */
  pause(): void {
    if (!this.running()) return;
    this.child?.kill('SIGSTOP');
    this.stopped = true;
  }

  resume(): void {
    if (!this.running() || !this.stopped) return;
    this.child?.kill('SIGCONT');
    this.stopped = false;
  }

  /** Steps the node's own clock to read `seconds` off the machine's (0: back to true). */
  stepClock(seconds: number): void {
    writeFileSync(this.stepFile, String(seconds));
  }

  /** SIGTERM (a graceful stop), SIGKILL after `graceMs`. */
  async stop(graceMs = 15_000): Promise<void> {
    const child = this.child;
    if (child === undefined || !this.running()) return;
    this.resume();
    child.kill('SIGTERM');
    await waitForExit(child, graceMs);
  }
}
