import { defineScript } from '../redis-commands.js';

/** Raises a partition's fence, never lowering it. */
export const raiseFence = defineScript(
  'raiseFence',
  `--[[
  Raises a partition's fence to an ownership epoch unless it already stands at or above it.

  Input:
    KEYS[1] the partition's fence: an integer string, absent = 0
    ARGV[1] the epoch, a non-negative integer

  Output:
    the fence after the call, an integer

  Cost: O(1).
]]
local fence = tonumber(redis.call('GET', KEYS[1]) or '0')
local epoch = tonumber(ARGV[1])
if epoch > fence then
  redis.call('SET', KEYS[1], ARGV[1])
  return epoch
end
return fence
`,
);
