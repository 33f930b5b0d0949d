import { randomUUID } from 'node:crypto';
import { isWheelhouseError } from '../lib/errors.js';
import type { ActorContext } from '../runtime/actor.js';
import type { DueEntry } from '../domain/model.js';
import type { NodeEventSink } from '../domain/events.js';
import type { PartitionCursor, ScheduleStore, TaskStore } from '../store/types.js';
import type { BucketStore } from '../store/fast-index-types.js';
import type { RebuildPermits } from './rebuild-permits.js';
import { observeStamp, snapshotOf, type FarRebuild, type WheelSnapshot, type WheelState } from './wheel-state.js';

/**
 * How a wheel partition is rebuilt from the task table: its near window at once, and — after
 * the bucket store lost it — every far entry too, a page at a time, without holding up the
 * partition's ticks.
 */

/** A page of a full rebuild's far part, read outside the mailbox, to be placed (see `placeFarPage`). */
export interface FarPageMessage {
  type: 'rebuild';
  generation: string;
  source: FarRebuild['source'];
  page: DueEntry[];
}

export interface RebuildDeps {
  /** The node's bound on partitions reading far pages at once. */
  permits: RebuildPermits;
  tasks: Pick<TaskStore, 'pendingInPartition'>;
  schedules: Pick<ScheduleStore, 'wakesInPartition'>;
  buckets: BucketStore;
  events: NodeEventSink;
  onError(error: unknown, context: string): void;
}

type RebuildContext = Pick<ActorContext<FarPageMessage, WheelSnapshot>, 'epoch' | 'snapshot' | 'self' | 'clock'>;

/** Page size when streaming a partition's pending tasks out of the task table. */
const REBUILD_PAGE = 5_000;
/** The latest instant a JavaScript Date can hold: an upper bound for "every pending task". */
const END_OF_TIME_MS = 8.64e15;
/** Wait before reading or placing a far page again after it failed. */
const RETRY_PAGE_MS = 1_000;

/**
 * Reloads the partition from the task table. Entries already queued are deduplicated by the
 * ready queue, a task claimed twice is refused by the claim's compare-and-set, and a schedule
 * woken twice finds nothing owed the second time.
 *
 * Not `full`: the near window is reloaded from Postgres and the far buckets are trusted.
 *
 * `full`: the bucket store lost data of this partition, so every pending task and schedule
 * wake is placed again, near ones first. This call reloads the near window, marks in the
 * snapshot that far entries are owed (an activation that finds the mark rebuilds in full
 * again), gives the partition a stamp above any seen, and starts the far part (see
 * `placeFarPage`): the partition fires its near tasks on time while millions of far ones are
 * still being written to their buckets.
 */
export async function rebuild(state: WheelState, ctx: RebuildContext, deps: RebuildDeps, full: boolean): Promise<void> {
  state.wheel.clear();
  state.retrying.clear();
  state.farRebuild = null;
  // A flushed store lost the fence with everything else: raise it again before writing.
  if (full) await deps.buckets.fence(state.partition, ctx.epoch);
  const near = state.loadedUntilMs;
  const tasks = await reload(state, ctx, deps.buckets, near, (...page) => deps.tasks.pendingInPartition(...page));
  const wakes = await reload(state, ctx, deps.buckets, near, (...page) => deps.schedules.wakesInPartition(...page));
  if (!full) {
    const { entries, stamp } = await deps.buckets.takeUntil(state.partition, state.loadedUntilMs, ctx.epoch);
    observeStamp(state, stamp, entries.length > 0);
    state.wheel.addAll(entries);
    return;
  }
  state.farRebuild = { generation: randomUUID(), source: 'tasks', after: { tasks, wakes } };
  state.unplaced = [];
  await ctx.snapshot(snapshotOf(state));
  const stamp = state.stamp + 1;
  await deps.buckets.setIntact(state.partition, stamp);
  state.stamp = stamp;
  state.lost = false;
  readFarPage(state, ctx, deps, 0);
}

/**
 * Places one page of the far part, read by `readFarPage`: on the wheel where the cascades have
 * reached its due times meanwhile, in buckets otherwise. Then the next page is read, or — the
 * last page placed — the mark in the snapshot is cleared and `partition:rebuilt` told. A page
 * of a rebuild no longer owed does nothing; a page whose write fails is read again shortly.
 * (A page read before the partition moved to another node is forwarded there, and ignored:
 * the generation is unique across nodes.)
 */
export async function placeFarPage(
  state: WheelState,
  ctx: RebuildContext,
  deps: RebuildDeps,
  message: FarPageMessage,
): Promise<void> {
  const far = state.farRebuild;
  // A page of an abandoned rebuild: the permit, if any, is the current rebuild's.
  if (far === null || far.generation !== message.generation || far.source !== message.source) return;
  try {
    await place(state, ctx, deps.buckets, message.page, true);
  } catch (error) {
    deps.permits.release(state.partition);
    if (isWheelhouseError(error, 'stale_epoch')) throw error; // a newer owner rebuilds
    deps.onError(error, `wheel ${state.partition}: placing a far page of the rebuild failed; read again`);
    readFarPage(state, ctx, deps, RETRY_PAGE_MS);
    return;
  }
  deps.permits.release(state.partition);
  const last = message.page[message.page.length - 1];
  if (message.page.length === REBUILD_PAGE && last !== undefined) {
    far.after[far.source] = { dueMs: last.dueMs, taskId: last.taskId };
  } else if (far.source === 'tasks') {
    far.source = 'wakes';
  } else {
    state.farRebuild = null;
    state.rebuilds++;
    await ctx.snapshot(snapshotOf(state));
    deps.events.emit('partition:rebuilt', { partition: state.partition });
    return;
  }
  readFarPage(state, ctx, deps, 0);
}

/**
 * Reads the far part's next page outside the mailbox, once the partition holds one of the
 * node's permits (see `RebuildPermits`), and sends it to the partition to place: its ticks
 * wait behind the placing only, never behind a read. A read that fails is tried again after
 * `RETRY_PAGE_MS` while the rebuild is still owed. A system shutting down refuses the page:
 * the permit goes back, the far part stays owed, as the snapshot says, and the next
 * activation rebuilds in full.
 */
function readFarPage(state: WheelState, ctx: RebuildContext, deps: RebuildDeps, delayMs: number): void {
  const far = state.farRebuild;
  if (far === null) return;
  const { partition } = state;
  const source = far.source;
  const after = far.after[source];
  /** Still owed; if not, the permit goes back unless a newer rebuild of the partition holds it. */
  const owed = (): boolean => {
    if (state.farRebuild === far) return true;
    if (state.farRebuild === null) deps.permits.release(partition);
    return false;
  };
  const read = async (): Promise<void> => {
    for (let wait = delayMs; ; wait = RETRY_PAGE_MS) {
      if (wait > 0) await new Promise<void>((resolve) => ctx.clock.setTimer(wait, resolve));
      if (!owed()) return;
      try {
        const page =
          source === 'tasks'
            ? await deps.tasks.pendingInPartition(partition, after, END_OF_TIME_MS, REBUILD_PAGE)
            : await deps.schedules.wakesInPartition(partition, after, END_OF_TIME_MS, REBUILD_PAGE);
        if (!owed()) return;
        ctx.self.tell({ type: 'rebuild', generation: far.generation, source, page });
        return;
      } catch (error) {
        if (isWheelhouseError(error, 'not_ready')) return deps.permits.release(partition);
        deps.onError(error, `wheel ${partition}: reading a far page of the rebuild failed; trying again`);
      }
    }
  };
  deps.permits.request(partition, () => void read());
}

/** A page of a partition's entries in (due time, id) order, from a cursor: pending tasks, or schedule wakes. */
type PageOfEntries = (
  partition: number,
  after: PartitionCursor | null,
  toMs: number,
  limit: number,
) => Promise<DueEntry[]>;

/**
 * Places the partition's entries due before `until` that `pageOf` reads, page by page;
 * answers the cursor after the last one (null when there were none past `after`).
 */
async function reload(
  state: WheelState,
  ctx: Pick<ActorContext<never, WheelSnapshot>, 'epoch'>,
  buckets: BucketStore,
  until: number,
  pageOf: PageOfEntries,
): Promise<PartitionCursor | null> {
  let after: PartitionCursor | null = null;
  for (;;) {
    const page = await pageOf(state.partition, after, until, REBUILD_PAGE);
    // During a full rebuild the partition has no stamp yet: these writes answer 0.
    await place(state, ctx, buckets, page, false);
    const last = page[page.length - 1];
    if (last !== undefined) after = { dueMs: last.dueMs, taskId: last.taskId };
    if (page.length < REBUILD_PAGE) return after;
  }
}

/** Entries the near wheel covers go on it, the rest into their buckets (`observe`: the stamp the write answers is taken). */
async function place(
  state: WheelState,
  ctx: Pick<ActorContext<never, WheelSnapshot>, 'epoch'>,
  buckets: BucketStore,
  page: readonly DueEntry[],
  observe: boolean,
): Promise<void> {
  const far: DueEntry[] = [];
  for (const entry of page) {
    if (entry.dueMs < state.loadedUntilMs) state.wheel.add(entry);
    else far.push(entry);
  }
  if (far.length === 0) return;
  const stamp = await buckets.add(state.partition, far, ctx.epoch);
  if (observe) observeStamp(state, stamp, true);
}
