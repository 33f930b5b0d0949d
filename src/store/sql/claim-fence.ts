import type { LimitGrantRow } from '../limit-types.js';

/**
 * The grants of a claim, as the fenced claim reads them (`CLAIM_FENCED` in claim.ts): not one
 * row per grant but one group per set of (key, epoch) pairs that tasks hold, and each claimed
 * id's group. A claim of 1 000 tasks of one non-binding key is one group of one pair, whatever
 * its size.
 *
 * The grants used to travel as three arrays of one element per grant — the task ids again, the
 * key repeated 1 000 times, the epoch repeated — each parsed by Postgres and joined with the
 * fence row by row. A limited claim cost Postgres 4.3 µs a task more than a plain one, 2.9 µs
 * since (medians of five runs of `npm run bench:limit-store-cost`; with the limit indexes
 * dropped, 4.0 µs and about 0). Now the per-task part is one small integer in the claim's own
 * unnest. Issue 28, W1L.
 */
export interface FenceGroups {
  /** The pairs, one row per (group, pair): `keys[i]`/`epochs[i]` belong to group `groupOf[i]`. */
  keys: string[];
  epochs: number[];
  groupOf: number[];
  /** Each claimed id's group, aligned with the claim's sorted ids; 0: it holds no grant. */
  idGroups: number[];
}

/**
 * Groups `grants` for the ids of a claim (`ids`: the claim's sorted ids, lower case). A grant
 * of an id the claim does not carry is dropped: that id is not claimed.
 */
export function fenceGroups(grants: readonly LimitGrantRow[], ids: readonly string[]): FenceGroups {
  const idCount = ids.length;
  const position = new Map<string, number>();
  for (let i = 0; i < idCount; i++) position.set(ids[i] as string, i);
  const pairIndex = new Map<string, number>(); // `${epoch} ${key}` → index into pairs
  const pairs: { key: string; epoch: number }[] = [];
  // Each id's pair indexes, as a signature: "3" for one pair, "0,3" for two (most ids: one).
  const signature = new Array<string | undefined>(idCount);
  let lastKey: string | null = null;
  let lastEpoch = 0;
  let lastPair = -1;
  for (const grant of grants) {
    const at = position.get(grant.taskId) ?? position.get(grant.taskId.toLowerCase());
    if (at === undefined) continue;
    // Grants come in runs of one key and epoch (a key answered a whole claim): looked up once a run.
    if (grant.key !== lastKey || grant.epoch !== lastEpoch) {
      const name = `${grant.epoch} ${grant.key}`;
      let pair = pairIndex.get(name);
      if (pair === undefined) {
        pair = pairs.length;
        pairs.push({ key: grant.key, epoch: grant.epoch });
        pairIndex.set(name, pair);
      }
      lastKey = grant.key;
      lastEpoch = grant.epoch;
      lastPair = pair;
    }
    const held = signature[at];
    signature[at] = held === undefined ? String(lastPair) : addPair(held, lastPair);
  }
  const groupIndex = new Map<string, number>();
  const out: FenceGroups = { keys: [], epochs: [], groupOf: [], idGroups: new Array<number>(idCount).fill(0) };
  for (let i = 0; i < idCount; i++) {
    const held = signature[i];
    if (held === undefined) continue;
    let group = groupIndex.get(held);
    if (group === undefined) {
      group = groupIndex.size + 1;
      groupIndex.set(held, group);
      for (const pair of held.split(',')) {
        const { key, epoch } = pairs[Number(pair)] as { key: string; epoch: number };
        out.keys.push(key);
        out.epochs.push(epoch);
        out.groupOf.push(group);
      }
    }
    out.idGroups[i] = group;
  }
  return out;
}

/** A signature with one more pair, kept sorted and without repeats (the same set, the same group). */
function addPair(signature: string, pair: number): string {
  const pairs = signature.split(',').map(Number);
  if (pairs.includes(pair)) return signature;
  pairs.push(pair);
  return pairs.sort((a, b) => a - b).join(',');
}
