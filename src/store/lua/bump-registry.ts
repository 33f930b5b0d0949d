import { defineScript } from '../redis-commands.js';

/** Registers partitions in a task type's partition registry, then announces the type. */
export const bumpRegistry = defineScript(
  'bumpRegistry',
  `--[[
  Registers members "priority:partition" in a task type's partition registry (partitioned
  layout): the partitions whose ready queue of the type at that priority may hold entries.
  A take reads the registry to know where to look, and drops a member it found empty only if
  the member's score is still the one it read (see prune-registry), so every write to a queue
  is followed by a bump that gives its member a score never given before.

  Input:
    KEYS[1] the registry: ZSET, member = "priority:partition", score = change counter value
    KEYS[2] the registry's change counter: an integer string, absent = 0
    ARGV[1] 'bump': every member gets a new score (after a write to its queue);
            'missing': only members not registered are added (a repair)
    ARGV[2] the channel to publish on, or '' for none
    ARGV[3] the message to publish when a member was written
    ARGV[4 ..] the members

  Output:
    the number of members written

  Effects: INCR of the counter per member written, ZADD; then PUBLISH ARGV[2] ARGV[3] when
  a member was written (a failed publish is ignored: pcall; the listeners it would wake poll
  anyway). Both keys carry the type's hash tag {t:<type>}.
  Cost: O(members * log N).
]]
local written = 0
for i = 4, #ARGV do
  local member = ARGV[i]
  if ARGV[1] == 'bump' or not redis.call('ZSCORE', KEYS[1], member) then
    redis.call('ZADD', KEYS[1], redis.call('INCR', KEYS[2]), member)
    written = written + 1
  end
end
if written > 0 and ARGV[2] ~= '' then
  redis.pcall('PUBLISH', ARGV[2], ARGV[3])
end
return written
`,
);
