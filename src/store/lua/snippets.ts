/** Lua shared by the fast index's scripts, interpolated into their source. */

/**
 * The Lua that opens a fenced script: with an epoch (`epochArg`, '' for an unfenced call), the
 * script returns the partition's fence, writing nothing, when the fence stands above the epoch,
 * and raises a fence below it — after a Redis flush, the owner's first write fences again.
 * `fenceKey` and `epochArg` are Lua expressions such as `KEYS[2]` and `ARGV[1]`; `refusal` is
 * what the script returns when refused, a Lua expression that may use `fence`.
 */
export function fenceCheck(fenceKey: string, epochArg: string, refusal = 'fence'): string {
  return `if ${epochArg} ~= '' then
  local fence = tonumber(redis.call('GET', ${fenceKey}) or '0')
  if fence > tonumber(${epochArg}) then
    return ${refusal}
  end
  if fence < tonumber(${epochArg}) then
    redis.call('SET', ${fenceKey}, ${epochArg})
  end
end`;
}

/**
 * Defines `zaddPairs(key, nx, first, n)`: ZADD (with NX when `nx`) of the `n` (score, member)
 * pairs of ARGV from index `first`, 1 000 pairs a command, so unpack() stays far below Lua's
 * stack limit (~8 000 values).
 */
export const ZADD_PAIRS = `local function zaddPairs(key, nx, first, n)
  for from = 0, n - 1, 1000 do
    local args = {}
    if nx then args[1] = 'NX' end
    for e = from, math.min(from + 1000, n) - 1 do
      args[#args + 1] = ARGV[first + 2 * e]
      args[#args + 1] = ARGV[first + 2 * e + 1]
    end
    redis.call('ZADD', key, unpack(args))
  end
end`;

/**
 * Defines `bumpStamp(marker)`: a write for a partition raises its stamp (the integer in its
 * intact marker) by one and answers it; a partition whose marker is gone stays lost and
 * answers 0. See `BucketStore`.
 */
export const BUMP_STAMP = `local function bumpStamp(marker)
  if redis.call('EXISTS', marker) == 1 then
    return redis.call('INCR', marker)
  end
  return 0
end`;
