/**
 * Ready queues in process, for the embedded default: the same semantics as
 * {@link RedisReadyQueue}. A binary heap per (task type, priority) ordered by (due,
 * insertion) plus a set of the ids it holds, so a push is O(log n) per entry, a duplicate
 * is refused in O(1), and a take of k costs O(k · (log n + types)).
 *
 * Ties on due time go by insertion here and by task id in Redis (which orders equal scores
 * by member). Both are "oldest first" for UUID v7 ids pushed as they are made; the heap
 * uses a sequence number because comparing id strings made pops ~20× slower.
 */
import { BinaryHeap } from '../lib/binary-heap.js';
import { PRIORITIES, assertDueEntry, compareQueueDepths, encodeInFlightMember, queueName } from './entry-codec.js';
import type { GroupingReadyQueue, PushFence, PushGroup } from './coalescing-ready-queue.js';
import { PartitionMarks } from './fences.js';
import { PushListeners, type PushListener } from './push-listeners.js';
import type { DueEntry } from '../domain/model.js';
import type { QueueDepth } from './fast-index-types.js';

/** A queued entry and its place in line among entries due at the same time. */
interface Queued {
  readonly entry: DueEntry;
  readonly seq: number;
}

interface Queue {
  readonly taskType: string;
  readonly priority: number;
  readonly heap: BinaryHeap<Queued>;
  /** The entries in `heap`, by task id. */
  readonly ids: Map<string, Queued>;
}

interface InFlight {
  readonly queued: Queued;
  readonly takenMs: number;
}

function compareQueued(a: Queued, b: Queued): number {
  return a.entry.dueMs - b.entry.dueMs || a.seq - b.seq;
}

/** The embedded {@link ReadyQueue}: heaps per task type × priority, in process memory. */
export class MemoryReadyQueue implements GroupingReadyQueue {
  /** By queue name `priority:taskType`; a queue stays once created, as in the Redis registry. */
  private queues = new Map<string, Queue>();
  /** By in-flight member, as in Redis, so taking one entry twice keeps one record. */
  private inFlight = new Map<string, InFlight>();
  private waiting = 0;
  private seq = 0;
  private readonly listeners = new PushListeners();
  private readonly marks: PartitionMarks;

  /**
   * @param marks the partitions' fences and stamps; pass the instance the bucket store has,
   *   so that `MemoryBucketStore.fence` holds fenced pushes too. @default a private one
   */
  constructor(marks: PartitionMarks = new PartitionMarks()) {
    this.marks = marks;
  }

  async push(entries: DueEntry[], fence?: PushFence): Promise<number> {
    const taskTypes = new Set<string>();
    const stamp = this.write({ entries, fence }, taskTypes);
    this.listeners.emit(taskTypes);
    return stamp;
  }

  /** Each group on its own (see {@link GroupingReadyQueue}); listeners hear once, of the groups written. */
  async pushGroups(groups: readonly PushGroup[]): Promise<(Error | number)[]> {
    const taskTypes = new Set<string>();
    const results = groups.map((group): Error | number => {
      try {
        return this.write(group, taskTypes);
      } catch (error) {
        return error instanceof Error ? error : new Error(String(error));
      }
    });
    try {
      this.listeners.emit(taskTypes);
    } catch (error) {
      const failure = error instanceof Error ? error : new Error(String(error));
      return results.map((result, i) =>
        result instanceof Error || (groups[i]?.entries.length ?? 0) === 0 ? result : failure,
      );
    }
    return results;
  }

  async held(entries: readonly DueEntry[]): Promise<Set<string>> {
    const held = new Set<string>();
    for (const entry of entries) {
      const queued = this.queues.get(queueName(entry.taskType, entry.priority))?.ids.has(entry.taskId) === true;
      if (queued || this.inFlight.has(encodeInFlightMember(entry))) held.add(entry.taskId);
    }
    return held;
  }

  async take(taskTypes: string[], max: number, nowMs: number): Promise<DueEntry[]> {
    const types = [...new Set(taskTypes)];
    const taken: DueEntry[] = [];
    let remaining = Math.floor(max);
    for (const priority of PRIORITIES) {
      if (remaining <= 0) break;
      const queues: Queue[] = [];
      for (const taskType of types) {
        const queue = this.queues.get(queueName(taskType, priority));
        if (queue !== undefined && queue.heap.size > 0) queues.push(queue);
      }
      // Oldest head across the types first, so no type starves.
      while (remaining > 0 && queues.length > 0) {
        let best = 0;
        for (let i = 1; i < queues.length; i++) {
          const head = (queues[i] as Queue).heap.peek() as Queued;
          if (compareQueued(head, (queues[best] as Queue).heap.peek() as Queued) < 0) best = i;
        }
        const queue = queues[best] as Queue;
        const queued = queue.heap.pop() as Queued;
        const entry = queued.entry;
        queue.ids.delete(entry.taskId);
        this.waiting--;
        this.inFlight.set(encodeInFlightMember(entry), { queued, takenMs: nowMs });
        taken.push({ ...entry });
        remaining--;
        if (queue.heap.size === 0) queues.splice(best, 1);
      }
    }
    return taken;
  }

  async ack(entries: DueEntry[]): Promise<void> {
    for (const entry of entries) this.inFlight.delete(encodeInFlightMember(entry));
  }

  /** Scans the in-flight entries, which are few: those between a take and its claim. */
  async requeueStale(olderThanMs: number): Promise<number> {
    const taskTypes = new Set<string>();
    let moved = 0;
    for (const [member, { queued, takenMs }] of this.inFlight) {
      if (takenMs >= olderThanMs) continue;
      this.inFlight.delete(member);
      // Back in its old place in line, as Redis puts it back at its old score.
      this.enqueue(queued);
      taskTypes.add(queued.entry.taskType);
      moved++;
    }
    this.listeners.emit(taskTypes);
    return moved;
  }

  async depths(nowMs: number): Promise<QueueDepth[]> {
    const depths: QueueDepth[] = [];
    for (const queue of this.queues.values()) {
      const oldest = queue.heap.peek();
      depths.push({
        taskType: queue.taskType,
        priority: queue.priority,
        depth: queue.heap.size,
        oldestReadyAgeMs: oldest === undefined ? null : Math.max(0, nowMs - oldest.entry.dueMs),
      });
    }
    return depths.sort(compareQueueDepths);
  }

  async ahead(entry: DueEntry): Promise<number | null> {
    const queued = this.queues.get(queueName(entry.taskType, entry.priority))?.ids.get(entry.taskId);
    if (queued === undefined) return null;
    let ahead = 0;
    for (const priority of PRIORITIES) {
      if (priority >= entry.priority) break;
      ahead += this.queues.get(queueName(entry.taskType, priority))?.heap.size ?? 0;
    }
    const own = this.queues.get(queueName(entry.taskType, entry.priority)) as Queue;
    return ahead + own.heap.countBefore(queued);
  }

  async backlog(): Promise<number> {
    return this.waiting;
  }

  /** Calls `listener` after each push (and each requeue) lands, with the task types it touched. */
  onPush(listener: PushListener): () => void {
    return this.listeners.add(listener);
  }

  /** Nothing to release in process. */
  async close(): Promise<void> {}

  /**
   * Drops every queue and in-flight entry, as a restart would. Listeners stay; the fences
   * and stamps are the bucket store's to clear (`MemoryBucketStore.clear`).
   */
  clear(): void {
    this.queues = new Map();
    this.inFlight = new Map();
    this.waiting = 0;
  }

  /**
   * Checks the group's entries and fence, then enqueues them all and adds their types to
   * `taskTypes`, answering the fenced partition's stamp (0 unfenced); or throws, having
   * enqueued nothing.
   */
  private write(group: PushGroup, taskTypes: Set<string>): number {
    if (group.entries.length === 0) return 0;
    for (const entry of group.entries) assertDueEntry(entry);
    if (group.fence !== undefined) this.marks.check('ready.push', group.fence.partition, group.fence.epoch);
    for (const entry of group.entries) {
      this.enqueue({ entry: { ...entry }, seq: this.seq++ });
      taskTypes.add(entry.taskType);
    }
    return group.fence === undefined ? 0 : this.marks.bump(group.fence.partition);
  }

  /** Adds an entry unless its queue already holds the task id (ZADD NX). */
  private enqueue(queued: Queued): void {
    const entry = queued.entry;
    const name = queueName(entry.taskType, entry.priority);
    let queue = this.queues.get(name);
    if (queue === undefined) {
      queue = {
        taskType: entry.taskType,
        priority: entry.priority,
        heap: new BinaryHeap<Queued>(compareQueued),
        ids: new Map(),
      };
      this.queues.set(name, queue);
    }
    if (queue.ids.has(entry.taskId)) return;
    queue.ids.set(entry.taskId, queued);
    queue.heap.push(queued);
    this.waiting++;
  }
}
