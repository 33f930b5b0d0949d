/**
 * The partitioned layout's push (see `PartitionedReadyQueue`): the groups of a push placed in
 * the wheel partitions their entries belong to, then written with the push script
 * (`lua/push-ready.ts`) per partition, each call in the partition's one slot, fence included.
 */
import { WheelhouseError } from '../lib/errors.js';
import { partitionOf } from '../lib/ids.js';
import type { PushGroup } from './coalescing-ready-queue.js';
import { planCalls, type Piece } from './push-plan.js';
import { appendPushGroup, pushReady } from './lua/push-ready.js';
import { assertDueEntry } from './entry-codec.js';
import { assertFenceArgs, staleEpochError } from './fences.js';
import { redisOperation, type RedisClient } from './redis.js';
import { runScript } from './redis-commands.js';
import { bucketKeys, fenceKey, partitionReadyKeys } from './redis-keys.js';
import { addMember, type MembersByType } from './redis-type-registry.js';
import type { DueEntry } from '../domain/model.js';

/** Where a partitioned push writes. */
export interface PushTarget {
  redis: RedisClient;
  prefix: string;
  /** The deployment's wheel partition count. */
  partitions: number;
  /** The pushing instance's id (the push script's sender field; it publishes nothing here). */
  instanceId: string;
}

/** What a partitioned push wrote. */
export interface PartitionPushOutcome {
  /** The registry members of the queues written, by task type. */
  written: MembersByType;
  /** The groups with entries written (in some partition, even when another part failed). */
  writtenGroups: Set<number>;
}

/** One partition's part of a push: pieces of the groups, in order, with their groups. */
interface PartitionPart {
  groups: PushGroup[];
  /** The index in the caller's groups of each of `groups`. */
  origin: number[];
}

/**
 * Writes the groups, setting `results[g]` as `GroupingReadyQueue.pushGroups` answers: a
 * malformed group, or a fenced group holding a task of another partition, gets `internal`
 * and is not written; a fenced group goes to its partition, an unfenced one is split by its
 * entries' partitions. Per partition, its calls one after the other (one, or past 10 000
 * entries several); the partitions' calls together. Registers nothing: the caller bumps the
 * registry with `written` once the queues hold the entries.
 */
export async function pushByPartition(
  target: PushTarget,
  groups: readonly PushGroup[],
  results: (Error | number)[],
): Promise<PartitionPushOutcome> {
  const byPartition = new Map<number, PartitionPart>();
  const place = (partition: number, g: number, group: PushGroup): void => {
    let part = byPartition.get(partition);
    if (part === undefined) byPartition.set(partition, (part = { groups: [], origin: [] }));
    part.groups.push(group);
    part.origin.push(g);
  };
  groups.forEach((group, g) => {
    try {
      for (const entry of group.entries) assertDueEntry(entry);
      if (group.entries.length === 0) return;
      if (group.fence !== undefined) {
        const { partition, epoch } = group.fence;
        assertFenceArgs(partition, epoch);
        const stray = group.entries.find((entry) => partitionOf(entry.taskId, target.partitions) !== partition);
        if (stray !== undefined) {
          throw new WheelhouseError(
            'internal',
            `A push fenced by partition ${partition} holds task ${stray.taskId} of partition ${partitionOf(stray.taskId, target.partitions)}.`,
          );
        }
        place(partition, g, { entries: group.entries, fence: { partition, epoch } });
        return;
      }
      const split = new Map<number, DueEntry[]>();
      for (const entry of group.entries) {
        const partition = partitionOf(entry.taskId, target.partitions);
        let list = split.get(partition);
        if (list === undefined) split.set(partition, (list = []));
        list.push(entry);
      }
      for (const [partition, entries] of split) place(partition, g, { entries });
    } catch (error) {
      results[g] = asError(error);
    }
  });
  const outcome: PartitionPushOutcome = { written: new Map(), writtenGroups: new Set() };
  await Promise.all(
    [...byPartition].map(([partition, part]) => pushPartition(target, partition, part, results, outcome)),
  );
  return outcome;
}

/** One partition's push: its calls one after the other; records the outcome of each group. */
async function pushPartition(
  target: PushTarget,
  partition: number,
  part: PartitionPart,
  results: (Error | number)[],
  outcome: PartitionPushOutcome,
): Promise<void> {
  const calls = planCalls(
    part.groups,
    part.groups.map((_, i) => i),
  );
  for (let c = 0; c < calls.length; c++) {
    const pieces = (calls[c] as Piece[]).filter(
      (piece) => typeof results[part.origin[piece.group] as number] === 'number',
    );
    if (pieces.length === 0) continue;
    let replies: number[];
    try {
      replies = await pushPieces(target, partition, part.groups, pieces);
    } catch (error) {
      const failure = asError(error);
      for (const later of calls.slice(c))
        for (const piece of later) results[part.origin[piece.group] as number] = failure;
      return;
    }
    pieces.forEach((piece, i) => {
      const g = part.origin[piece.group] as number;
      const fence = part.groups[piece.group]?.fence;
      if (replies[2 * i] === 1 && fence !== undefined) {
        results[g] = staleEpochError('ready.push', fence.partition, fence.epoch, Number(replies[2 * i + 1]));
        return;
      }
      // Registered even when another part of its group failed: the entries are in the queue.
      for (const entry of piece.entries) addMember(outcome.written, entry.taskType, entry.priority, partition);
      outcome.writtenGroups.add(g);
      // A group split over calls answers its last piece's stamp, the highest; unfenced: 0.
      if (typeof results[g] === 'number') results[g] = fence === undefined ? 0 : Number(replies[2 * i + 1]);
    });
  }
}

/** One push script in one partition for some pieces; answers its flat reply (see `lua/push-ready.ts`). */
async function pushPieces(
  target: PushTarget,
  partition: number,
  groups: PushGroup[],
  pieces: Piece[],
): Promise<number[]> {
  const keys = partitionReadyKeys(target.prefix, partition);
  const scriptKeys = [keys.registry];
  // No channel: the announcement waits for the registry bump, or a take it woke would not look here.
  const args: (string | number)[] = [keys.queuePrefix, '', target.instanceId, pieces.length];
  for (const piece of pieces) {
    const fence = groups[piece.group]?.fence;
    let k = 0;
    if (fence !== undefined) {
      if (scriptKeys.length === 1) {
        scriptKeys.push(fenceKey(target.prefix, partition), bucketKeys(target.prefix, partition).intact);
      }
      k = 2; // KEYS is 1-based in Lua: the fence's index; its marker's is k + 1
    }
    appendPushGroup(args, k, fence?.epoch, piece.entries);
  }
  const reply = await redisOperation('ready.push', () => runScript(target.redis, pushReady, scriptKeys, args));
  return (reply as (string | number)[]).map(Number);
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new WheelhouseError('internal', String(error), { cause: error });
}
