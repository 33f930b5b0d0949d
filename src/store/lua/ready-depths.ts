import { defineScript } from '../redis-commands.js';

/** Depth and oldest due of every ready queue, in one round trip. */
export const readyDepths = defineScript(
  'readyDepths',
  `--[[
  Reports every ready queue ever pushed to: its depth and its oldest due time.

  Input:
    KEYS[1] queue registry SET (names "priority:taskType")
    ARGV[1] queue key prefix: the queue named q is ARGV[1] .. q (the registry's hash tag, so its slot)

  Output:
    a flat array name1, depth1, oldestDue1, ...; oldestDue is '' for an empty queue

  Cost: O(Q * log N), Q = queues.
]]
local out = {}
for _, name in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = ARGV[1] .. name
  local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  out[#out + 1] = name
  out[#out + 1] = redis.call('ZCARD', key)
  out[#out + 1] = head[2] or ''
end
return out
`,
);
