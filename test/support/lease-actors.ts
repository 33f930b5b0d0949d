import { LeaseBook } from '../../src/actors/lease-book.js';
import { LEASE, workerLeaseBehavior } from '../../src/actors/worker-lease.js';
import { NO_EVENTS } from '../../src/lib/events.js';
import type { Clock } from '../../src/runtime/clock.js';
import { LocalPlacement } from '../../src/runtime/placement.js';
import { ActorSystem } from '../../src/runtime/system.js';
import type { TaskStore } from '../../src/store/types.js';
import { MemorySnapshotStore } from '../runtime/memory-snapshots.js';
import { BACKOFF } from './tasks.js';

/**
 * One node's actor system with the lease kind and its lease book, over `tasks`: what the
 * dispatcher and the worker routes grant and release leases through. Requeues and dependents
 * go nowhere; `onError` gets the actors' errors.
 */
export function leaseActors(
  clock: Clock,
  tasks: TaskStore,
  onError: (error: unknown) => void = () => undefined,
): { system: ActorSystem; leases: LeaseBook } {
  const system = new ActorSystem({
    nodeId: 'n1',
    clock,
    snapshots: new MemorySnapshotStore(),
    placement: new LocalPlacement('n1'),
  });
  system.register(
    workerLeaseBehavior({
      tasks,
      backoff: BACKOFF,
      placement: { requeue: async () => undefined },
      dependents: { transitions: () => undefined },
      events: NO_EVENTS,
      onError,
    }),
  );
  const leases = new LeaseBook(system, clock);
  system.registerPassive(LEASE, leases);
  return { system, leases };
}
