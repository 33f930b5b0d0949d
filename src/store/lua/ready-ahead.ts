import { defineScript } from '../redis-commands.js';

/** How many entries of one partition a globally ordered take would hand out before an entry. */
export const readyAhead = defineScript(
  'readyAhead',
  `--[[
  Counts, in one partition's ready queues of a task type, the entries that come before an
  entry in take order: every entry at a more urgent priority, and those of the entry's own
  priority with an earlier (due, task id).

  Input:
    KEYS[1 .. n] the type's queues at the priorities up to the entry's, most urgent first:
                 ZSET, member = "taskId[|limits]", score = due (Unix ms); KEYS[n] is the
                 entry's own
    ARGV[1] the entry's due (Unix ms)
    ARGV[2] the entry's member ("taskId[|limits]"): task ids are UUIDs of one length, so
            members compare as their task ids do
    ARGV[3] '1' when the entry belongs to this partition: its queue must hold it

  Output:
    the count, or -1 when ARGV[3] is '1' and KEYS[n] does not hold the task

  Ties on due time go by task id, as in a ZSET: the entries of equal due are found by a
  binary search over their ranks. Cost: O(n + log^2 N).
]]
local n = #KEYS
local own = KEYS[n]
local count = 0
for i = 1, n - 1 do
  count = count + redis.call('ZCARD', KEYS[i])
end
if ARGV[3] == '1' then
  local rank = redis.call('ZRANK', own, ARGV[2])
  if not rank then
    return -1
  end
  return count + rank
end
local lo = redis.call('ZCOUNT', own, '-inf', '(' .. ARGV[1])
local hi = lo + redis.call('ZCOUNT', own, ARGV[1], ARGV[1])
-- The first rank in [lo, hi) whose member is not before the task id.
while lo < hi do
  local mid = math.floor((lo + hi) / 2)
  local member = redis.call('ZRANGE', own, mid, mid)[1]
  if member < ARGV[2] then
    lo = mid + 1
  else
    hi = mid
  end
end
return count + lo
`,
);
