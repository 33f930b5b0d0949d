import { defineScript } from '../redis-commands.js';

/** Drops members of a task type's partition registry that nothing wrote to since they were read. */
export const pruneRegistry = defineScript(
  'pruneRegistry',
  `--[[
  Drops members "priority:partition" of a task type's partition registry whose queue a take
  found empty, each only if its score is still the one the take read before it looked: a
  push that wrote to the queue after the take looked has bumped the member to a new score
  (bump-registry), and then the member stays.

  Input:
    KEYS[1] the registry: ZSET, member = "priority:partition", score = change counter value
    ARGV    pairs: member, the score read (as Redis printed it)

  Output:
    the number of members dropped

  Cost: O(pairs * log N).
]]
local dropped = 0
for i = 1, #ARGV, 2 do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    redis.call('ZREM', KEYS[1], ARGV[i])
    dropped = dropped + 1
  end
end
return dropped
`,
);
