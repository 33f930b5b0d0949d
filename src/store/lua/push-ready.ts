import type { DueEntry } from '../../domain/model.js';
import { encodeReadyMember, queueName } from '../entry-codec.js';
import { defineScript } from '../redis-commands.js';
import { BUMP_STAMP, ZADD_PAIRS } from './snippets.js';

/** Pushes groups of due entries into the ready queues; a fenced group only while its fence holds. */
export const pushReady = defineScript(
  'pushReady',
  `--[[
  Pushes groups of due entries into the ready queues, each group on its own terms: a fenced
  group (a wheel partition firing a slot) is written only when its partition's fence does
  not stand above the group's epoch, and otherwise not at all, and a written one raises its
  partition's stamp; an unfenced group is always written. Then announces the task types
  written on a pub/sub channel, for the other nodes.

  Input:
    KEYS[1]    queue registry SET (names "priority:taskType")
    KEYS[2 ..] per partition of the fenced groups, two keys: its fence (an integer string,
               absent = 0), then its intact marker (its stamp; absent = lost)
    ARGV[1] queue key prefix: the queue named q is ARGV[1] .. q (the registry's hash tag, so its slot)
    ARGV[2] the channel to publish on, or '' for none
    ARGV[3] the sender's id, the first field of the message
    ARGV[4] G, the number of groups
    ARGV[5 ..] the G groups, one after the other, each:
      k      the index in KEYS of the group's fence (its marker is k + 1), or 0 for an
             unfenced group
      epoch  the group's ownership epoch ('' when unfenced)
      Q      the number of its queues, then per queue:
        name  "priority:taskType"
        n     the number of its entries, then n pairs due (Unix ms), member
              ("taskId[|limits]", see encodeReadyMember)

  Output:
    a flat array of two values per group, in input order: 0 and the partition's stamp
    after the push for a written group (0 for an unfenced group or a lost partition), or 1
    and the fence that refused it

  Effects: per written queue, SADD to the registry before ZADD NX of its entries (an entry
  already queued keeps its due time). PUBLISH ARGV[2] "sender|type1|type2|..." with the
  task types of the written groups, once; a failed publish is ignored (pcall): the
  listeners it would wake poll anyway. In the single-server layout the queues ({rq}) and the
  fences ({p<N>}) are in different hash slots; in the partitioned layout a call writes one
  partition's queues and reads that partition's fence, all in its slot (Redis Cluster).
  Cost: O(entries * log N). ZADDs go in chunks, so unpack() stays far below Lua's stack
  limit (~8 000 values).
]]
local prefix = ARGV[1]
local groupCount = tonumber(ARGV[4])
${ZADD_PAIRS}
${BUMP_STAMP}

-- Pass 1: find each group's queues and check its fence; nothing is written yet.
local groups = {}
local i = 5
for g = 1, groupCount do
  local k = tonumber(ARGV[i])
  local epoch = ARGV[i + 1]
  local queueCount = tonumber(ARGV[i + 2])
  local group = { start = i + 3, queues = queueCount, fence = nil, k = k }
  if k > 0 then
    local fence = tonumber(redis.call('GET', KEYS[k]) or '0')
    if fence > tonumber(epoch) then
      group.fence = fence
    elseif fence < tonumber(epoch) then
      -- A write above the fence raises it: after a flush the owner's first write re-fences.
      redis.call('SET', KEYS[k], epoch)
    end
  end
  i = i + 3
  for _ = 1, queueCount do
    i = i + 2 + 2 * tonumber(ARGV[i + 1])
  end
  groups[g] = group
end

-- Pass 2: write the groups whose fence holds.
local results = {}
local types = {}
local seen = {}
for g = 1, groupCount do
  local group = groups[g]
  if group.fence then
    results[2 * g - 1] = 1
    results[2 * g] = group.fence
  else
    local j = group.start
    for _ = 1, group.queues do
      local name = ARGV[j]
      local n = tonumber(ARGV[j + 1])
      redis.call('SADD', KEYS[1], name)
      zaddPairs(prefix .. name, true, j + 2, n)
      j = j + 2 + 2 * n
      local taskType = string.match(name, '^%d+:(.+)$')
      if n > 0 and taskType and not seen[taskType] then
        seen[taskType] = true
        types[#types + 1] = taskType
      end
    end
    results[2 * g - 1] = 0
    results[2 * g] = 0
    if group.k > 0 then
      results[2 * g] = bumpStamp(KEYS[group.k + 1])
    end
  end
end

if ARGV[2] ~= '' and #types > 0 then
  redis.pcall('PUBLISH', ARGV[2], ARGV[3] .. '|' .. table.concat(types, '|'))
end
return results
`,
);

/**
 * Appends one group's ARGV as the script reads it (see above): the index in KEYS of its fence
 * (0: unfenced), its epoch ('' when unfenced), and its entries grouped by queue.
 */
export function appendPushGroup(
  args: (string | number)[],
  fenceKeyIndex: number,
  epoch: number | undefined,
  entries: readonly DueEntry[],
): void {
  const byQueue = new Map<string, (string | number)[]>();
  for (const entry of entries) {
    const name = queueName(entry.taskType, entry.priority);
    let pairs = byQueue.get(name);
    if (pairs === undefined) byQueue.set(name, (pairs = []));
    pairs.push(entry.dueMs, encodeReadyMember(entry));
  }
  args.push(fenceKeyIndex, epoch ?? '', byQueue.size);
  for (const [name, pairs] of byQueue) {
    args.push(name, pairs.length / 2);
    for (const value of pairs) args.push(value);
  }
}
