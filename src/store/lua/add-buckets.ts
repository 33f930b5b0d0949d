import { defineScript } from '../redis-commands.js';
import { BUMP_STAMP, fenceCheck, ZADD_PAIRS } from './snippets.js';

/** Adds entries to a partition's far buckets, unless the partition is fenced past the caller. */
export const addBuckets = defineScript(
  'addBuckets',
  `--[[
  Adds entries to a partition's minute buckets and their minutes to its index, in one step,
  so a take never sees a bucket missing from the index. With an epoch, writes nothing when
  the partition's fence stands above it, and raises the partition's stamp when it writes;
  without one (a submit placing a task while its partition did not answer) the stamp stays
  as it is: the stamp counts the owner's writes, so writes it never saw cannot lift a stamp
  that a failover to a replica behind has put back, and hide that loss.

  Input:
    KEYS[1] the partition's minute index: ZSET, member = score = minute start (Unix ms)
    KEYS[2] the partition's fence: an integer string, absent = 0
    KEYS[3] the partition's intact marker: its stamp, an integer string; absent = lost
    ARGV[1] the caller's ownership epoch, or '' for an unfenced add
    ARGV[2] bucket key prefix: the bucket of minute m is ARGV[2] .. m
    ARGV[3 ..] per minute: its start m, the number n of its entries, then n pairs
               due (Unix ms), member ("taskId|priority|taskType[|limits][@trace]")

  Output:
    { 0, stamp } when written: the partition's stamp after the add (0: lost, left so;
                 unchanged by an unfenced add);
    { 1, fence } when refused: the fence above the epoch; nothing written

  The bucket keys are built here, as in take-buckets: they carry KEYS[1]'s hash tag.
  ZADDs go in chunks, so unpack() stays far below Lua's stack limit (~8 000 values).
  Cost: O(n * log N).
]]
${fenceCheck('KEYS[2]', 'ARGV[1]', '{ 1, fence }')}
local chunk = 1000
${ZADD_PAIRS}
${BUMP_STAMP}
local argc = #ARGV
-- The index first: a script cut short (out of memory) must not leave a bucket it misses.
local index = {}
local i = 3
while i <= argc do
  index[#index + 1] = ARGV[i]
  index[#index + 1] = ARGV[i]
  if #index >= 2 * chunk then
    redis.call('ZADD', KEYS[1], unpack(index))
    index = {}
  end
  i = i + 2 + 2 * tonumber(ARGV[i + 1])
end
if #index > 0 then
  redis.call('ZADD', KEYS[1], unpack(index))
end
i = 3
while i <= argc do
  local n = tonumber(ARGV[i + 1])
  zaddPairs(ARGV[2] .. ARGV[i], false, i + 2, n)
  i = i + 2 + 2 * n
end
if ARGV[1] == '' then
  return { 0, tonumber(redis.call('GET', KEYS[3]) or '0') }
end
return { 0, bumpStamp(KEYS[3]) }
`,
);
