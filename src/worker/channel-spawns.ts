import type { WorkerFrame } from './channel-wire.js';
import { childrenToWire, spawnedFromWire, spawnRefused, type ChildTask, type SpawnedChild } from './spawn.js';

/**
 * The channel's `spawn` requests waiting for their `spawned` answer, by `request_id`. A request
 * goes out only on a welcomed socket; one whose socket closes before the answer is rejected
 * (it may or may not have been done: spawning again with the same `childKey`s adds none twice).
 * Never sent again by itself — a child without a key would be made twice.
 */
export class ChannelSpawns {
  private readonly waiting = new Map<
    string,
    { taskId: string; resolve: (children: SpawnedChild[]) => void; reject: (error: Error) => void }
  >();
  private next = 0;

  /** `sender`: how to send on the current socket, or null when none is welcomed. */
  constructor(private readonly sender: () => ((frame: WorkerFrame) => void) | null) {}

  spawn(
    taskId: string,
    leaseToken: string,
    tasks: readonly ChildTask[],
    traceparent?: string,
  ): Promise<SpawnedChild[]> {
    const send = this.sender();
    if (send === null) return Promise.reject(new Error(notConnected(taskId, 'no socket to the node is open')));
    const requestId = `spawn-${++this.next}`;
    return new Promise((resolve, reject) => {
      this.waiting.set(requestId, { taskId, resolve, reject });
      send({
        type: 'spawn',
        request_id: requestId,
        task_id: taskId,
        lease_token: leaseToken,
        tasks: childrenToWire(tasks, traceparent),
      });
    });
  }

  /** A `spawned` frame: settles its request (one not waited for is ignored). */
  answered(requestId: string, tasks: unknown, error: unknown): void {
    const request = this.waiting.get(requestId);
    if (request === undefined) return;
    this.waiting.delete(requestId);
    if (error !== undefined && error !== null) request.reject(spawnRefused(request.taskId, error));
    else {
      try {
        request.resolve(spawnedFromWire(tasks));
      } catch (e) {
        request.reject(e as Error);
      }
    }
  }

  /** The socket closed: every request still waiting is rejected. */
  lost(): void {
    for (const [requestId, request] of this.waiting) {
      this.waiting.delete(requestId);
      request.reject(new Error(notConnected(request.taskId, 'the socket closed before the node answered')));
    }
  }
}

function notConnected(taskId: string, why: string): string {
  return `spawning children of task ${taskId}: ${why}; spawn again (children with a childKey are not made twice)`;
}
