import { defineScript } from '../redis-commands.js';

/** Entries waiting in all ready queues, in one round trip. */
export const readyBacklog = defineScript(
  'readyBacklog',
  `--[[
  Counts the entries waiting in all ready queues (in-flight entries are not waiting).

  Input:
    KEYS[1] queue registry SET (names "priority:taskType")
    ARGV[1] queue key prefix: the queue named q is ARGV[1] .. q (the registry's hash tag, so its slot)

  Output:
    the total, an integer

  Cost: O(Q), Q = queues.
]]
local total = 0
for _, name in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  total = total + redis.call('ZCARD', ARGV[1] .. name)
end
return total
`,
);
