import { defineScript } from '../redis-commands.js';

/** Puts in-flight entries taken before a bound back into their queues. */
export const requeueStale = defineScript(
  'requeueStale',
  `--[[
  Moves in-flight entries taken before a bound back into their ready queues, exactly as
  they were (same due time), without duplicating one that was queued again meanwhile.

  Input:
    KEYS[1] in-flight ZSET: member = "priority|dueMs|taskId|taskType[|limits]", score = taken at
    KEYS[2] queue registry SET (names "priority:taskType")
    ARGV[1] bound, Unix ms, exclusive: entries taken before it are moved
    ARGV[2] queue key prefix: the queue named q is ARGV[2] .. q (the registry's hash tag, so its slot)
    ARGV[3] the most entries to move in this call

  Output:
    { moved, malformed, queue1, queue2, ... }: entries put back, in-flight members that could
    not be read (removed, not put back), then the names ("priority:taskType") of the queues
    put back into, once each

  Cost: O(moved * log N).
]]
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, ARGV[3])
local moved = 0
local malformed = 0
local out = { 0, 0 }
local seen = {}
for _, member in ipairs(members) do
  -- tail: '' or "|limits", which the queue's member keeps after the task id.
  local priority, due, id, taskType, tail = string.match(member, '^(%d+)|([^|]+)|([^|]+)|([^|]+)(.*)$')
  if priority then
    local name = priority .. ':' .. taskType
    redis.call('SADD', KEYS[2], name)
    redis.call('ZADD', ARGV[2] .. name, 'NX', due, id .. tail)
    moved = moved + 1
    if not seen[name] then
      seen[name] = true
      out[#out + 1] = name
    end
  else
    malformed = malformed + 1
  end
  redis.call('ZREM', KEYS[1], member)
end
out[1] = moved
out[2] = malformed
return out
`,
);
