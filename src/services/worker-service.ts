import type { NodeEventSink } from '../domain/events.js';
import type { BackoffPolicy } from '../domain/model.js';
import { decodeLeaseToken } from '../domain/lease-token.js';
import { isWheelhouseError } from '../lib/errors.js';
import type { DagResolver } from '../actors/dag-resolver.js';
import type { WheelPlacement } from '../actors/wheel-placement.js';
import { LEASE } from '../actors/worker-lease.js';
import type { ActorSystemApi } from '../runtime/actor.js';
import type { Clock } from '../runtime/clock.js';
import type { TaskStore } from '../store/types.js';
import type { Dispatcher } from './dispatcher.js';
import { leaseNotHeld } from './support.js';
import type { Assignment, CompletionRequest, PollRequest, WorkersApi } from './types.js';

export interface WorkerServiceDeps {
  tasks: TaskStore;
  clock: Clock;
  system: ActorSystemApi;
  dispatcher: Pick<Dispatcher, 'poll'>;
  backoff: BackoffPolicy;
  placement: Pick<WheelPlacement, 'place' | 'requeue'>;
  resolver: Pick<DagResolver, 'transitions'>;
  events: NodeEventSink;
  onError(error: unknown, context: string): void;
}

/**
 * The worker routes: polls go to the dispatcher; heartbeats to the task's lease actor;
 * results to the system of record in one batch, then to the leases (over), the dependents
 * (their predecessor ended) and the wheel (retries).
 */
export class WorkerService implements WorkersApi {
  constructor(private readonly deps: WorkerServiceDeps) {}

  poll(request: PollRequest, signal?: AbortSignal): Promise<Assignment[]> {
    return this.deps.dispatcher.poll(request, signal);
  }

  async release(assignments: readonly Assignment[]): Promise<void> {
    if (assignments.length === 0) return;
    try {
      const claims = assignments.map((a) => ({ taskId: a.id, version: a.version }));
      const entries = await this.deps.tasks.release(claims, this.deps.clock.now());
      for (const claim of claims) this.lease(claim.taskId).tell({ type: 'released', version: claim.version });
      await this.deps.placement.place(entries);
      this.deps.events.emit('task:released', { taskIds: entries.map((e) => e.taskId) });
    } catch (error) {
      // Not handed back: their leases run out and hand them on, as for any lost worker.
      this.deps.onError(
        error,
        `could not hand back ${assignments.length} claims no worker received (their leases will)`,
      );
    }
  }

  async heartbeat(taskId: string, leaseToken: string): Promise<{ leaseExpiresMs: number; cancelRequested: boolean }> {
    const version = decodeLeaseToken(leaseToken);
    const extended = await this.lease(taskId).ask({ type: 'heartbeat', version });
    if (!extended) throw leaseNotHeld(taskId);
    return extended;
  }

  async complete(results: CompletionRequest[]): Promise<{ taskId: string; ok: boolean }[]> {
    const valid: { taskId: string; version: number; request: CompletionRequest }[] = [];
    for (const request of results) {
      try {
        valid.push({ taskId: request.taskId, version: decodeLeaseToken(request.leaseToken), request });
      } catch (error) {
        if (!isWheelhouseError(error, 'lease_not_held')) throw error;
      }
    }
    const transitions = await this.deps.tasks.complete(
      valid.map((v) => ({
        taskId: v.taskId,
        version: v.version,
        outcome: v.request.outcome,
        error: v.request.error,
        retryable: v.request.retryable,
      })),
      this.deps.clock.now(),
      this.deps.backoff,
    );
    const done = new Set(transitions.map((t) => t.taskId));
    for (const v of valid) {
      if (done.has(v.taskId)) this.lease(v.taskId).tell({ type: 'released', version: v.version });
    }
    this.deps.resolver.transitions(transitions);
    await this.deps.placement.requeue(transitions);
    if (transitions.length > 0) this.deps.events.emit('task:completed', { transitions });
    return results.map((r) => ({ taskId: r.taskId, ok: done.has(r.taskId) }));
  }

  private lease(taskId: string) {
    return this.deps.system.ref(LEASE, taskId);
  }
}
