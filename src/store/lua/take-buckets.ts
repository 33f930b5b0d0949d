import { defineScript } from '../redis-commands.js';
import { fenceCheck } from './snippets.js';

/** Reads and deletes a partition's far buckets before a bound, atomically, unless fenced. */
export const takeBuckets = defineScript(
  'takeBuckets',
  `--[[
  Reads and deletes every far bucket of one partition whose minute starts before a bound,
  and answers the partition's stamp. When it takes anything it raises the stamp and deletes
  the partition's intact marker, which the caller sets again to the answered stamp once the
  reply has reached it: if the reply is lost (a timeout, a dropped connection), the
  partition shows as lost and is rebuilt from the system of record instead of silently
  missing what was taken. A minute the index names whose bucket is gone (evicted, or lost
  with part of the data) makes the partition lost too. With an epoch, it takes nothing when
  the partition's fence stands above it.

  Input:
    KEYS[1] the partition's minute index: ZSET, member = score = minute start (Unix ms)
    KEYS[2] the partition's intact marker: its stamp, an integer string; absent = lost
    KEYS[3] the partition's fence: an integer string, absent = 0
    ARGV[1] bucket key prefix: the bucket of minute m is ARGV[1] .. m
    ARGV[2] bound, Unix ms, exclusive: buckets whose minute start < ARGV[2] are taken
    ARGV[3] the caller's ownership epoch, or '' for an unfenced take

  Output:
    refused: an integer, the fence that stands above the epoch; nothing was taken
    otherwise a flat array member1, due1, member2, due2, ..., stamp in (minute, due,
    member) order; member = "taskId|priority|taskType[|limits][@trace]", due = Unix ms as text. stamp
    (last): 0 when the partition is lost; when entries were taken, the raised stamp the
    caller must set the marker to; otherwise the marker's stamp, unchanged

  The bucket keys are built here rather than passed in KEYS: they carry the partition's
  hash tag, so they share KEYS[1]'s slot (BullMQ builds keys the same way).
  Cost: O(log M + taken), M = buckets of the partition.
]]
${fenceCheck('KEYS[3]', 'ARGV[3]')}
local stamp = tonumber(redis.call('GET', KEYS[2]) or '0')
local minutes = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2])
if #minutes == 0 then
  return { stamp }
end
local out
local missing = false
if #minutes == 1 then
  -- The usual case, one minute per call: hand the reply on without copying it.
  out = redis.call('ZRANGE', ARGV[1] .. minutes[1], 0, -1, 'WITHSCORES')
  missing = #out == 0
  redis.call('UNLINK', ARGV[1] .. minutes[1])
else
  out = {}
  local n = 0
  for _, minute in ipairs(minutes) do
    local key = ARGV[1] .. minute
    local items = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
    if #items == 0 then
      missing = true
    end
    for i = 1, #items do
      n = n + 1
      out[n] = items[i]
    end
    redis.call('UNLINK', key)
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2])
redis.call('DEL', KEYS[2])
if stamp > 0 and not missing then
  out[#out + 1] = stamp + 1
else
  out[#out + 1] = 0
end
return out
`,
);
