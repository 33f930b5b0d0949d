import type { DueEntry } from '../domain/model.js';

import type { PushGroup } from './coalescing-ready-queue.js';

/**
 * Most entries per push script, so one huge push neither builds one huge command nor holds
 * Redis for long; larger pushes take several calls, one after the other.
 */
const PUSH_CALL_ENTRIES = 10_000;

/** A slice of one group's entries, written by one script call. */
export interface Piece {
  group: number;
  entries: DueEntry[];
}

/**
 * Splits the groups into script calls of at most {@link PUSH_CALL_ENTRIES} entries, in
 * order; a group larger than what is left of a call continues in the next.
 */
export function planCalls(groups: readonly PushGroup[], valid: number[]): Piece[][] {
  const calls: Piece[][] = [];
  let call: Piece[] = [];
  let room = PUSH_CALL_ENTRIES;
  for (const g of valid) {
    const entries = (groups[g] as PushGroup).entries;
    for (let from = 0; from < entries.length;) {
      const size = Math.min(room, entries.length - from);
      call.push({ group: g, entries: size === entries.length ? entries : entries.slice(from, from + size) });
      from += size;
      room -= size;
      if (room === 0) {
        calls.push(call);
        call = [];
        room = PUSH_CALL_ENTRIES;
      }
    }
  }
  if (call.length > 0) calls.push(call);
  return calls;
}
