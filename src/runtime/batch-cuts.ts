/** One request's share of a turn's envelopes to one node: `[start, end)`, and whether they outlast a request's bound. */
export interface BatchCut {
  start: number;
  end: number;
  long: boolean;
}

/**
 * Where a turn's envelopes to one node are cut into requests (src/runtime/http-transport.ts):
 * at most `maxBatch` envelopes and `maxBatchBytes` a request (one larger envelope goes alone),
 * and a cut wherever an envelope that outlasts a request's bound (`long`) meets one that does
 * not, so that each request is of one kind. Cuts only, never a reordering: the requests carry
 * the envelopes in the order they were sent.
 */
export function cutBatches(
  sizes: readonly number[],
  long: readonly boolean[],
  maxBatch: number,
  maxBatchBytes: number,
): BatchCut[] {
  const cuts: BatchCut[] = [];
  let start = 0;
  let bytes = 0;
  for (let i = 0; i < sizes.length; i++) {
    const size = sizes[i] as number;
    if (i > start && (i - start === maxBatch || bytes + size > maxBatchBytes || long[i] !== long[start])) {
      cuts.push({ start, end: i, long: long[start] as boolean });
      start = i;
      bytes = 0;
    }
    bytes += size;
  }
  if (sizes.length > start) cuts.push({ start, end: sizes.length, long: long[start] as boolean });
  return cuts;
}
