import type { TimeWheel } from './time-wheel.js';
import type { WheelState } from './wheel-state.js';

/**
 * What the admin endpoint shows of a wheel partition (`GET /api/admin/actors/wheel/<n>`):
 * its clock, counters and store marks, a full rebuild in progress, and the near wheel's
 * occupancy — in counts, never ids.
 */
export function describeWheel(state: WheelState): Record<string, unknown> {
  return {
    partition: state.partition,
    nearWheelSize: state.wheel.size,
    nextDueAt: iso(state.wheel.nextDueMs()),
    loadedUntil: iso(state.loadedUntilMs),
    cursor: iso(state.cursorMs),
    firedCount: state.firedCount,
    wokenSchedules: state.wokenCount,
    stamp: state.stamp,
    lost: state.lost,
    unplaced: state.unplaced.length,
    awaitingPushRetry: state.retrying.size,
    rebuilds: state.rebuilds,
    // A full rebuild still writing far entries to buckets: where it has read to.
    rebuildingFar:
      state.farRebuild === null
        ? null
        : {
            source: state.farRebuild.source,
            readTo: iso(state.farRebuild.after[state.farRebuild.source]?.dueMs ?? null),
          },
    // The near wheel is in memory, a slot per `slotMs`; entries due later wait in the bucket
    // store (a bucket per minute, from `loadedUntil`).
    levels: [nearLevel(state.wheel.occupancy(OCCUPANCY_SLOTS_SHOWN), state.wheel.slotMs)],
  };
}

/** Most slots a wheel partition's description lists one by one. */
const OCCUPANCY_SLOTS_SHOWN = 120;

function nearLevel(occupancy: ReturnType<TimeWheel['occupancy']>, slotMs: number): Record<string, unknown> {
  return {
    level: 'near',
    slotMs,
    occupiedSlots: occupancy.slots,
    entries: occupancy.entries,
    slots: occupancy.first.map((s) => ({ at: iso(s.slotStartMs), entries: s.entries })),
  };
}

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}
