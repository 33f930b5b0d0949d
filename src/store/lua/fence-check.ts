/**
 * The Lua that opens a fenced script: with an epoch (`epochArg`, '' for an unfenced call), the
 * script returns the partition's fence, writing nothing, when the fence stands above the epoch,
 * and raises a fence below it — after a Redis flush, the owner's first write fences again.
 * `fenceKey` and `epochArg` are Lua expressions such as `KEYS[2]` and `ARGV[1]`.
 */
export function fenceCheck(fenceKey: string, epochArg: string): string {
  return `if ${epochArg} ~= '' then
  local fence = tonumber(redis.call('GET', ${fenceKey}) or '0')
  if fence > tonumber(${epochArg}) then
    return fence
  end
  if fence < tonumber(${epochArg}) then
    redis.call('SET', ${fenceKey}, ${epochArg})
  end
end`;
}
