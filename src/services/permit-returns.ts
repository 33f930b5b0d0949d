import type { DueEntry } from '../domain/model.js';
import type { NodeEvents } from '../domain/events.js';
import type { TypedEvents } from '../lib/events.js';
import type { LimitGate } from './limit-gate.js';

/**
 * Gives permits back when attempts end (docs/decisions/0023-flow-control.md). A permit is
 * part of a lease, so it goes back exactly where a lease ends — a result (`task:completed`),
 * an expiry or a deadline (`lease:expired`, from the lease actor and the safety net alike), a
 * hand-back (`task:released`) — and nowhere else: never before the lease ends, so a dead
 * worker's permit is not reused while its lease could still be honoured. The permits that end
 * in one event-loop turn go to each key in one message.
 */
export class PermitReturns {
  private pending = new Map<string, string[]>();
  private scheduled = false;
  private readonly offs: (() => void)[] = [];

  constructor(private readonly gate: Pick<LimitGate, 'keysOf' | 'giveBack'>) {}

  /** Listens to the node's events; returns a function that stops. */
  listen(events: Pick<TypedEvents<NodeEvents>, 'on'>): () => void {
    this.offs.push(
      events.on('task:completed', ({ transitions }) => {
        for (const t of transitions) this.ended(t.taskId, t);
      }),
      events.on('lease:expired', (e) => this.ended(e.taskId, e)),
      events.on('task:released', ({ taskIds, tasks }) => {
        if (!tasks) return;
        for (let i = 0; i < taskIds.length; i++) this.ended(taskIds[i] as string, tasks[i] as DueEntry);
      }),
    );
    return () => {
      for (const off of this.offs.splice(0)) off();
    };
  }

  /** The attempt of `taskId` ended: its permits go back to its keys. */
  ended(taskId: string, task: Pick<DueEntry, 'taskType' | 'limits'>): void {
    const keys = this.gate.keysOf(task);
    if (keys.length === 0) return;
    for (const key of keys) {
      const list = this.pending.get(key);
      if (list) list.push(taskId);
      else this.pending.set(key, [taskId]);
    }
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  private flush(): void {
    this.scheduled = false;
    const pending = this.pending;
    this.pending = new Map();
    for (const [key, taskIds] of pending) this.gate.giveBack(key, taskIds);
  }
}
