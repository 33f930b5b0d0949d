import type { ActorSystemApi } from '../runtime/actor.js';
import type { Clock } from '../runtime/clock.js';
import { LEASE_KIND, type LeaseMessage } from '../actors/worker-lease.js';
import type { ReadyQueue, TaskStore } from '../store/types.js';
import type { Assignment, PollRequest } from './types.js';
import { encodeLeaseToken } from './lease-token.js';

/**
 * Hands due tasks to workers that ask for them (pull). A poll takes entries from the ready
 * queues, claims them in one compare-and-set statement, and starts a lease actor per claimed
 * task. When nothing is ready it waits until a push for one of its task types lands (or the
 * wait ends), so a long-poll answers as soon as a task is claimable.
 */
export interface DispatcherDeps {
  tasks: TaskStore;
  ready: ReadyQueue;
  clock: Clock;
  system: ActorSystemApi;
  /** Upper bound of a poll's wait. */
  pollMaxWaitMs: number;
  onClaimed?(count: number): void;
  onError?(error: unknown, context: string): void;
}

interface Waiter {
  readonly taskTypes: ReadonlySet<string>;
  wake(): void;
}

/**
 * A waiting poll re-checks the queues at least this often, for pushes this node did not see
 * (another node's partition, entries put back by `requeueStale`).
 */
const RECHECK_MS = 1_000;

/**
 * How far a ready entry's due time may be ahead of this node's clock and still be claimed, ms:
 * the bound on clock skew between nodes that the cluster tolerates.
 */
export const MAX_CLOCK_SKEW_MS = 1_000;

/**
 * The time a batch is claimed at. An entry is in a ready queue because the wheel that owns its
 * partition found it due — on that node's clock, which may run a little ahead of this one's
 * (or be read an instant later: the push can land between this node reading its clock and
 * taking). The claim refuses a task whose due time is after the claim time, and a refused
 * entry is dropped, so claiming at this node's clock alone would lose such a task for good.
 * Claiming at the latest due time in the batch (at most `MAX_CLOCK_SKEW_MS` ahead) honours the
 * owner's decision, and still refuses a stale entry of a task that was moved to a later due
 * time (a retry's backoff).
 */
function claimTime(nowMs: number, entries: readonly { dueMs: number }[]): number {
  let latest = nowMs;
  for (const entry of entries) if (entry.dueMs > latest) latest = entry.dueMs;
  return Math.min(latest, nowMs + MAX_CLOCK_SKEW_MS);
}

export class Dispatcher {
  private readonly waiters = new Set<Waiter>();
  /** Bumped on every push this node sees, so a poll that found nothing knows whether to look again. */
  private pushSeq = 0;

  constructor(private readonly deps: DispatcherDeps) {}

  /** Tells waiting polls that entries of these task types were pushed. */
  notify(taskTypes: ReadonlySet<string>): void {
    this.pushSeq++;
    for (const waiter of this.waiters) {
      for (const type of waiter.taskTypes) {
        if (taskTypes.has(type)) {
          waiter.wake();
          break;
        }
      }
    }
  }

  async poll(request: PollRequest, signal?: AbortSignal): Promise<Assignment[]> {
    const { clock } = this.deps;
    const deadline = clock.now() + Math.min(request.waitMs, this.deps.pollMaxWaitMs);
    const types = new Set(request.taskTypes);
    for (;;) {
      const seq = this.pushSeq;
      const claimed = await this.claim(request);
      if (claimed.length > 0) return claimed;
      const remaining = deadline - clock.now();
      if (remaining <= 0 || signal?.aborted) return [];
      if (seq !== this.pushSeq) continue; // something was pushed while we looked
      await this.waitForPush(types, Math.min(remaining, RECHECK_MS), signal);
    }
  }

  /** One attempt: take, claim, start leases. Entries that were not claimable are dropped. */
  private async claim(request: PollRequest): Promise<Assignment[]> {
    const { tasks, ready, clock, system } = this.deps;
    for (;;) {
      const entries = await ready.take(request.taskTypes, request.maxTasks, clock.now());
      if (entries.length === 0) return [];
      const now = claimTime(clock.now(), entries);
      let claimed;
      try {
        claimed = await tasks.claim(
          entries.map((e) => e.taskId),
          request.workerId,
          now,
        );
      } catch (error) {
        // Put the entries back at once; if that fails too, they stay in flight and
        // `requeueStale` returns them later. Either way the tasks are still `pending`.
        await ready
          .push(entries)
          .then(() => ready.ack(entries))
          .catch(() => undefined);
        throw error;
      }
      // The claim is settled in Postgres; dropping the in-flight entries is housekeeping and
      // stays off the worker's critical path. If it fails, `requeueStale` puts them back
      // later and their claim is refused by the compare-and-set: nothing runs twice.
      ready.ack(entries).catch((error: unknown) => this.deps.onError?.(error, 'ack of claimed ready entries'));
      if (claimed.length === 0) continue; // stale entries (cancelled, already claimed): look again
      this.deps.onClaimed?.(claimed.length);
      return claimed.map((task) => {
        system
          .ref<LeaseMessage>(LEASE_KIND, task.id)
          .tell({ type: 'granted', version: task.version, leaseExpiresMs: task.leaseExpiresMs });
        return { ...task, leaseToken: encodeLeaseToken(task.version) };
      });
    }
  }

  private waitForPush(taskTypes: ReadonlySet<string>, waitMs: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const finish = (): void => {
        this.waiters.delete(waiter);
        cancelTimer();
        signal?.removeEventListener('abort', finish);
        resolve();
      };
      const waiter: Waiter = { taskTypes, wake: finish };
      const cancelTimer = this.deps.clock.setTimer(waitMs, finish);
      signal?.addEventListener('abort', finish, { once: true });
      this.waiters.add(waiter);
    });
  }
}
