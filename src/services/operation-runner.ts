import type { WheelPlacement } from '../actors/wheel-placement.js';
import type { DueEntry, TaskRecord } from '../domain/model.js';
import type { OperationRecord } from '../domain/operations.js';
import { isWheelhouseError } from '../lib/errors.js';
import type { Clock } from '../runtime/clock.js';
import type { OperationStore } from '../store/operation-types.js';
import type { CancelAftermath } from './cancel-aftermath.js';

/**
 * Runs the operations on many tasks, page after page, in the background: a duty of the ring
 * (docs/decisions/0032-operations-as-a-ring-duty.md). Each running operation belongs to the
 * node the ring names for `("operation", id)`; every node looks at the running operations
 * every second (and at once when one is started through it) and runs those it owns that it
 * does not run yet. The operations table is the record: a page's action and its progress
 * commit together (src/store/sql/operation-page.ts), so a node that stops mid-way leaves the
 * operation at its last committed page, and its next owner goes on from there.
 *
 * After a page commits, what it changed is handed on as the single-task routes hand it on: a
 * retried task to the wheel partition that owns it (due now: to its ready queue), a cancelled
 * task with dependents to the DAG resolver, a running task asked to stop to its worker (a
 * cancelled parent's children were cancelled in the page's own transaction). If the
 * node dies between the commit and those, the nets catch them as they catch a single retry or
 * cancel: the pending safety net places a task overdue and in no bucket, the outbox replay
 * tells the dependents, the worker hears of the cancel at its next heartbeat.
 */
export interface OperationRunnerDeps {
  operations: Pick<OperationStore, 'running' | 'runPage' | 'fail'>;
  clock: Clock;
  /** This node's id, and the node the ring names for an operation. */
  nodeId: string;
  ownerOf(operationId: string): string;
  placement: Pick<WheelPlacement, 'place'>;
  /** What follows a cancel: dependents told, a running task's worker told. */
  cancels: Pick<CancelAftermath, 'handOn'>;
  onError(error: unknown, context: string): void;
  /** Tasks one page walks by id (and so acts on at most). @default 1000 */
  pageTasks?: number;
  /** Operations one node runs at once; the others wait their turn. @default 2 */
  concurrent?: number;
}

/** The actor kind an operation is placed by on the ring (no actor of it is ever activated). */
export const OPERATION_KIND = 'operation';

export const PAGE_TASKS = 1000;
/** Running operations one check reads. */
const RUNNING_READ = 1000;
/** Backoff of a page that failed, ms: doubling from the first to the last. */
const RETRY_FIRST_MS = 100;
const RETRY_LAST_MS = 5_000;
/** Failures in a row, other than a store that cannot be reached, after which an operation is failed. */
const FAILURES_TO_GIVE_UP = 5;

export class OperationRunner {
  private readonly runs = new Map<string, Promise<void>>();
  /** The pauses under way: `stop` ends them. */
  private readonly pauses = new Set<() => void>();
  private stopped = false;

  constructor(private readonly deps: OperationRunnerDeps) {}

  /** The operations this node runs now. */
  runningHere(): string[] {
    return [...this.runs.keys()];
  }

  /**
   * Starts the running operations this node owns and does not run yet, up to `concurrent`
   * at once. Returns how many it started.
   */
  async check(): Promise<number> {
    if (this.stopped) return 0;
    const room = (this.deps.concurrent ?? 2) - this.runs.size;
    if (room <= 0) return 0;
    const ids = await this.deps.operations.running(RUNNING_READ);
    let started = 0;
    for (const id of ids) {
      if (started >= room || this.stopped) break;
      if (this.runs.has(id) || this.deps.ownerOf(id) !== this.deps.nodeId) continue;
      const run = this.run(id).finally(() => this.runs.delete(id));
      this.runs.set(id, run);
      started++;
    }
    return started;
  }

  /** Stops after the pages under way; resolves when they have committed (or failed). */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const wake of this.pauses) wake();
    await Promise.allSettled([...this.runs.values()]);
  }

  /**
   * Page after page until the operation ends, this node stops, or the ring moves it away.
   * Between pages it waits as long as the last page took: an operation takes at most about
   * half of the store's time that its pages need, and the submits and claims of the moment
   * go between them.
   */
  private async run(operationId: string): Promise<void> {
    const { operations, clock } = this.deps;
    let failures = 0;
    let otherFailures = 0;
    while (!this.stopped && this.deps.ownerOf(operationId) === this.deps.nodeId) {
      const started = Date.now();
      try {
        const page = await operations.runPage(operationId, this.deps.pageTasks ?? PAGE_TASKS, clock.now());
        failures = 0;
        otherFailures = 0;
        if (page.kind === 'stopped') return;
        await this.handOn(page.operation, page.changed, page.retried);
        if (page.operation.state !== 'running') return;
        await this.pause(Date.now() - started);
      } catch (error) {
        failures++;
        if (!isWheelhouseError(error, 'store_unavailable')) otherFailures++;
        this.deps.onError(error, `operation ${operationId}: a page failed (it runs again)`);
        if (otherFailures >= FAILURES_TO_GIVE_UP) {
          const why = error instanceof Error ? error.message : String(error);
          await operations
            .fail(operationId, `a page failed ${otherFailures} times in a row: ${why}`, clock.now())
            .catch((e: unknown) => this.deps.onError(e, `operation ${operationId}: recording its failure`));
          return;
        }
        await this.pause(Math.min(RETRY_LAST_MS, RETRY_FIRST_MS * 2 ** (failures - 1)));
      }
    }
  }

  /** What the single-task routes do after their statement, for a page's changed tasks. */
  private async handOn(operation: OperationRecord, changed: TaskRecord[], retried: DueEntry[]): Promise<void> {
    if (operation.action === 'retry') {
      // A placement that fails is retried in the background (WheelPlacement), as for one retry.
      if (retried.length > 0) await this.deps.placement.place(retried);
      return;
    }
    if (changed.length === 0) return;
    // A page's cancel took the cancelled parents' unfinished children with it (in its transaction).
    if (operation.action === 'cancel') this.deps.cancels.handOn(changed);
  }

  private pause(ms: number): Promise<void> {
    if (ms <= 0 || this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = (): void => {
        this.pauses.delete(wake);
        cancel();
        resolve();
      };
      this.pauses.add(wake);
      const cancel = this.deps.clock.setTimer(ms, wake);
    });
  }
}
