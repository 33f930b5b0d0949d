import { defineScript } from '../redis-commands.js';

/** Takes ready entries into flight, priority first, then oldest due across task types. */
export const takeReady = defineScript(
  'takeReady',
  `--[[
  Takes up to a number of ready entries for some task types, lowest priority number first
  and, within a priority, oldest due first across all the types (ties: task id, then the
  order of the types), and records each in the in-flight set: the reliable-queue pattern,
  so a crash between take and claim loses nothing.

  Input:
    KEYS[1]            in-flight ZSET: member = "priority|dueMs|taskId|taskType[|limits]",
                       score = taken at (Unix ms)
    KEYS[2 + p*T + t]  (p = 0..P-1, t = 0..T-1) the queue of type ARGV[4 + t] at priority
                       ARGV[4 + T + p]: ZSET, member = "taskId[|limits]", score = due (Unix ms)
    ARGV[1] now, Unix ms (the in-flight score)
    ARGV[2] the most entries to take
    ARGV[3] T, the number of task types
    ARGV[4 .. 3+T]   the task types
    ARGV[4+T .. ]    the priorities, in the order to serve them (P of them)

  Output:
    the in-flight members taken, in the order they were chosen

  Cost: O(P*T*log N + T*max) reads, O(taken) writes: at most max candidates per queue.
]]
local inFlight = KEYS[1]
local now = ARGV[1]
local remaining = tonumber(ARGV[2])
local typeCount = tonumber(ARGV[3])
local priorityCount = #ARGV - 3 - typeCount
local taken = {}

for p = 0, priorityCount - 1 do
  if remaining <= 0 then break end
  local priority = ARGV[4 + typeCount + p]

  -- Candidates: the head of each type's queue, at most what is still wanted, already in
  -- (due, id) order. A queue that returns fewer than that has been read to its end.
  local lists = {}
  for t = 0, typeCount - 1 do
    local key = KEYS[2 + p * typeCount + t]
    local items = redis.call('ZRANGE', key, 0, remaining - 1, 'WITHSCORES')
    if #items > 0 then
      lists[#lists + 1] = { key = key, taskType = ARGV[4 + t], items = items, head = 1,
        due = tonumber(items[2]), count = 0 }
    end
  end

  -- Merge: take the oldest head among the queues until enough or all are read.
  local active = #lists
  while remaining > 0 and active > 0 do
    local best = nil
    for _, list in ipairs(lists) do
      if list.due ~= nil then
        if best == nil or list.due < best.due
          or (list.due == best.due and list.items[list.head] < best.items[best.head]) then
          best = list
        end
      end
    end
    -- The member's limits tail, if any, moves to the end of the in-flight member.
    local member = best.items[best.head]
    local bar = string.find(member, '|', 1, true)
    local due = best.items[best.head + 1]
    if bar then
      taken[#taken + 1] = priority .. '|' .. due .. '|' .. string.sub(member, 1, bar - 1) .. '|' .. best.taskType
        .. string.sub(member, bar)
    else
      taken[#taken + 1] = priority .. '|' .. due .. '|' .. member .. '|' .. best.taskType
    end
    best.count = best.count + 1
    best.head = best.head + 2
    remaining = remaining - 1
    if best.head > #best.items then
      best.due = nil
      active = active - 1
    else
      best.due = tonumber(best.items[best.head + 1])
    end
  end

  -- What was taken from a queue is its head: remove it by rank.
  for _, list in ipairs(lists) do
    if list.count > 0 then
      redis.call('ZREMRANGEBYRANK', list.key, 0, list.count - 1)
    end
  end
end

-- Record in flight, in chunks that stay within Lua's argument limit.
local chunk = 1000
for i = 1, #taken, chunk do
  local args = {}
  for j = i, math.min(i + chunk - 1, #taken) do
    args[#args + 1] = now
    args[#args + 1] = taken[j]
  end
  redis.call('ZADD', inFlight, unpack(args))
end
return taken
`,
);
