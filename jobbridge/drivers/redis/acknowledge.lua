-- acknowledge.lua: the jobs are done; remove their entries and leases for good, in one step.
--
-- KEYS[1]        {prefix}leases           sorted set  ZREM each reservation's member
-- KEYS[1+i]      {prefix}queue:{queue i}  stream      XACK + XDEL the entries reserved from queue i
--
-- ARGV[1]        the consumer group
-- ARGV[2]        n, the number of queues (KEYS[2..1+n])
-- ARGV[2+i]      the name of queue i, for its lease members "<entry id> <queue>"
-- ARGV[3+n..]    pairs (i, entry id): an entry reserved from queue i
--
-- A stale receipt (its job was reclaimed and lives on under a new entry id) names an entry
-- that is already gone, so XACK, XDEL and ZREM of it do nothing.
-- Returns how many entries were deleted.

local group = ARGV[1]
local n = tonumber(ARGV[2])
local ids, members = {}, {}
for i = 1, n do
  ids[i] = {}
end
for j = 3 + n, #ARGV, 2 do
  local i, entry = tonumber(ARGV[j]), ARGV[j + 1]
  local list = ids[i]
  list[#list + 1] = entry
  members[#members + 1] = entry .. ' ' .. ARGV[2 + i]
end
-- one command per queue (and one ZREM) for the whole batch, not three per entry: a tenth of the
-- script's time; at most CHUNK arguments per call, well inside what unpack may spread
local CHUNK = 1000
local deleted = 0
for i = 1, n do
  local stream, list = KEYS[1 + i], ids[i]
  for at = 1, #list, CHUNK do
    local last = math.min(at + CHUNK - 1, #list)
    redis.call('XACK', stream, group, unpack(list, at, last))
    deleted = deleted + redis.call('XDEL', stream, unpack(list, at, last))
  end
end
for at = 1, #members, CHUNK do
  redis.call('ZREM', KEYS[1], unpack(members, at, math.min(at + CHUNK - 1, #members)))
end
return deleted
