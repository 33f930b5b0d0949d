import { timingSafeEqual } from 'node:crypto';
import type { NodeEventSink } from '../domain/events.js';
import type { BackoffPolicy, ChildWait, Completion, ProgressUpdate, Transition } from '../domain/model.js';
import { leaseTokenDigest } from '../domain/lease-token.js';
import type { DagResolver } from '../actors/dag-resolver.js';
import type { WheelPlacement } from '../actors/wheel-placement.js';
import { LEASE } from '../actors/worker-lease.js';
import type { LeaseBook } from '../actors/lease-book.js';
import type { ActorSystemApi } from '../runtime/actor.js';
import type { Clock } from '../runtime/clock.js';
import type { ExtendedLease, TaskStore } from '../store/types.js';
import type { Dispatcher } from './dispatcher.js';
import { leaseNotHeld } from './support.js';
import { StatementBatcher } from '../lib/statement-batcher.js';
import type { Assignment, CompletionRequest, PollRequest, WorkersApi } from './types.js';

import type { CancelAftermath } from './cancel-aftermath.js';
import { tracingOn } from '../lib/otel.js';
import { traceResults } from './task-spans.js';

export interface WorkerServiceDeps {
  tasks: TaskStore;
  clock: Clock;
  system: ActorSystemApi;
  /** This node's passive leases: a result ends one, a heartbeat wakes its actor. */
  leases: Pick<LeaseBook, 'released' | 'wake'>;
  dispatcher: Pick<Dispatcher, 'poll'>;
  backoff: BackoffPolicy;
  placement: Pick<WheelPlacement, 'place' | 'requeue'>;
  resolver: Pick<DagResolver, 'transitions'>;
  events: NodeEventSink;
  /** A parent whose attempt ended cancelled (its cancel was requested while it ran) takes its children with it. */
  cancels: Pick<CancelAftermath, 'parentsCancelled'>;
  onError(error: unknown, context: string): void;
}

/** Most results in one completion statement (a batch request holds up to as many). */
const COMPLETIONS_PER_STATEMENT = 1_000;

/**
 * The worker routes: polls go to the dispatcher; heartbeats to the task's lease actor;
 * results to the system of record in one batch, then to the leases (over), the dependents
 * (their predecessor ended) and the wheel (retries).
 */
export class WorkerService implements WorkersApi {
  /** Results on their way to the store: see {@link complete}. */
  private readonly completions: StatementBatcher<Completion, boolean>;

  constructor(private readonly deps: WorkerServiceDeps) {
    this.completions = new StatementBatcher((completions) => this.record(completions), {
      maxItems: COMPLETIONS_PER_STATEMENT,
      keyOf: (c) => c.taskId,
    });
  }

  poll(request: PollRequest, signal?: AbortSignal): Promise<Assignment[]> {
    return this.deps.dispatcher.poll(request, signal);
  }

  async release(assignments: readonly Pick<Assignment, 'id' | 'version'>[]): Promise<void> {
    if (assignments.length === 0) return;
    try {
      const claims = assignments.map((a) => ({ taskId: a.id, version: a.version }));
      const entries = await this.deps.tasks.release(claims, this.deps.clock.now());
      for (const claim of claims) this.deps.leases.released(claim.taskId, claim.version);
      await this.deps.placement.place(entries);
      this.deps.events.emit('task:released', { taskIds: entries.map((e) => e.taskId), tasks: entries });
    } catch (error) {
      // Not handed back: their leases run out and hand them on, as for any lost worker.
      this.deps.onError(
        error,
        `could not hand back ${assignments.length} claims no worker received (their leases will)`,
      );
    }
  }

  /**
   * `release` for leases known by their token alone (a worker-channel socket closed by its
   * worker while it held them, resumed ones included): each running attempt is read, and
   * handed back only when that token is its lease's. Never rejects.
   */
  async releaseHeld(leases: readonly { taskId: string; leaseToken: string }[]): Promise<void> {
    if (leases.length === 0) return;
    const claims: Pick<Assignment, 'id' | 'version'>[] = [];
    try {
      const running = await Promise.all(leases.map((l) => this.deps.tasks.runningLease(l.taskId)));
      for (const [i, lease] of running.entries()) {
        const { taskId, leaseToken } = leases[i] as { taskId: string; leaseToken: string };
        const digest = leaseTokenDigest(leaseToken);
        const held = lease?.tokenDigest ?? null;
        if (lease && digest !== null && held !== null && digest.length === held.length && timingSafeEqual(digest, held))
          claims.push({ id: taskId, version: lease.version });
      }
    } catch (error) {
      this.deps.onError(error, `could not hand back ${leases.length} leases of a closed socket (their leases will)`);
      return;
    }
    await this.release(claims);
  }

  /**
   * A token of any other shape is refused here; one of the right shape goes, as its digest,
   * to the lease actor, which holds the lease's own digest.
   */
  async heartbeat(taskId: string, leaseToken: string, extendSeconds?: number): Promise<ExtendedLease> {
    const digest = leaseTokenDigest(leaseToken);
    if (digest === null) throw leaseNotHeld(taskId);
    this.deps.leases.wake(taskId);
    const extended = await this.lease(taskId).ask({
      type: 'heartbeat',
      tokenDigest: digest.toString('hex'),
      ...(extendSeconds === undefined ? {} : { extendSeconds }),
    });
    if (!extended) throw leaseNotHeld(taskId);
    return extended;
  }

  /**
   * A result whose token has another shape is left out (`ok: false`), and so is a second result
   * for the same task; the rest go to the store as digests, where each is a compare-and-set on
   * the lease's digest: a wrong token fails its own result and no other. They go through the
   * node's completion batcher: results of every caller that arrive together (many single
   * `POST /api/tasks/{id}/complete`, batches, both) share one statement.
   */
  async complete(results: CompletionRequest[]): Promise<{ taskId: string; ok: boolean }[]> {
    const completions: Completion[] = [];
    const waits: ChildWait[] = [];
    /** The results sent to the store, by task id. */
    const sent = new Map<string, CompletionRequest>();
    for (const request of results) {
      const tokenDigest = request.tokenDigest ?? leaseTokenDigest(request.leaseToken);
      if (tokenDigest === null || sent.has(request.taskId)) continue;
      sent.set(request.taskId, request);
      if (request.outcome === 'waiting_children') {
        waits.push({ taskId: request.taskId, tokenDigest, onChildFailure: request.onChildFailure ?? 'fail' });
        continue;
      }
      const completion: Completion = {
        taskId: request.taskId,
        tokenDigest,
        outcome: request.outcome,
        error: request.error,
        retryable: request.retryable,
      };
      if (request.result !== undefined) completion.result = request.result;
      completions.push(completion);
    }
    const [recorded, waited] = await Promise.all([this.completions.submitAll(completions), this.wait(waits)]);
    const done = new Set<string>(waited);
    for (const [i, c] of completions.entries()) if (recorded[i] === true) done.add(c.taskId);
    return results.map((r) => ({ taskId: r.taskId, ok: sent.get(r.taskId) === r && done.has(r.taskId) }));
  }

  /**
   * One completion statement for the results of any number of callers (no two for one task:
   * the batcher keeps those apart), then the leases (over), the dependents (their predecessor
   * ended) and the wheel (retries), once for the whole group. Answers, per result, whether
   * it was recorded.
   */
  private async record(completions: Completion[]): Promise<boolean[]> {
    const startMs = this.deps.clock.now();
    const transitions = await this.deps.tasks.complete(completions, startMs, this.deps.backoff);
    if (tracingOn()) traceResults(transitions, startMs);
    const done = new Set(transitions.map((t) => t.taskId));
    await this.ended(transitions);
    return completions.map((c) => done.has(c.taskId));
  }

  /**
   * Attempts that end waiting for their children, each in a transaction of its own (it locks
   * the task's unfinished children; src/store/sql/waiting.ts), then as a result: the leases
   * end (and with them the worker's slot and the limit permits, on `task:completed`), a parent
   * with no unfinished child goes back on the wheel. Answers the ids whose lease was held.
   */
  private async wait(waits: ChildWait[]): Promise<string[]> {
    if (waits.length === 0) return [];
    const now = this.deps.clock.now();
    const ended = await Promise.all(waits.map((w) => this.deps.tasks.waitForChildren(w, now)));
    const transitions = ended.filter((t): t is Transition => t !== null);
    await this.ended(transitions);
    return transitions.map((t) => t.taskId);
  }

  /** After results are recorded: the leases (over), the dependents (their predecessor ended), the wheel (retries). */
  private async ended(transitions: Transition[]): Promise<void> {
    // A result bumps the version once: the lease was granted at the one before.
    for (const t of transitions) this.deps.leases.released(t.taskId, t.version - 1);
    this.deps.resolver.transitions(transitions);
    await this.deps.placement.requeue(transitions);
    if (transitions.length > 0) this.deps.events.emit('task:completed', { transitions });
    const cancelled = transitions.filter((t) => t.status === 'cancelled').map((t) => t.taskId);
    if (cancelled.length > 0) {
      this.deps.cancels
        .parentsCancelled(cancelled)
        .catch((error: unknown) =>
          this.deps.onError(error, `cancelling the children of ${cancelled.length} cancelled tasks`),
        );
    }
  }

  /**
   * A token of another shape is left out (`ok: false`); of several updates for one task, the
   * last goes to the store (the others are `ok: false`), where each is a compare-and-set on the
   * lease's digest. Progress is written straight to the store, not through the lease actor: it
   * changes nothing the lease decides.
   */
  async progress(
    updates: { taskId: string; leaseToken: string; progress: unknown }[],
  ): Promise<{ taskId: string; ok: boolean }[]> {
    /** The update sent to the store, by task id, with its token's digest. */
    const sent = new Map<string, { update: (typeof updates)[number]; tokenDigest: Uint8Array }>();
    for (const update of updates) {
      const tokenDigest = leaseTokenDigest(update.leaseToken);
      if (tokenDigest !== null) sent.set(update.taskId, { update, tokenDigest });
    }
    const batch: ProgressUpdate[] = [...sent].map(([taskId, { update, tokenDigest }]) => ({
      taskId,
      tokenDigest,
      progress: update.progress,
    }));
    const written =
      batch.length === 0 ? new Set<string>() : await this.deps.tasks.progress(batch, this.deps.clock.now());
    return updates.map((u) => ({
      taskId: u.taskId,
      ok: sent.get(u.taskId)?.update === u && written.has(u.taskId.toLowerCase()),
    }));
  }

  private lease(taskId: string) {
    return this.deps.system.ref(LEASE, taskId);
  }
}
