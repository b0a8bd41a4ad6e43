-- reserve.lua: promote due delayed jobs, then claim up to a limit across queues in priority order.
--
-- KEYS[1]      {prefix}leases            sorted set  ZADD one member "<entry id> <queue>" per claimed entry,
--                                                    scored by its lease deadline, and the keeper (below)
-- KEYS[2i]     {prefix}queue:{queue i}   stream      XGROUP CREATE (when the group is missing), XADD
--                                                    (promotion), XREADGROUP ">" (the claim)
-- KEYS[2i+1]   {prefix}delayed:{queue i} sorted set  ZRANGEBYSCORE + ZREM of due jobs; ZRANGE for the
--                                                    next due time when nothing was claimed
-- KEYS[2n+2]   (only with ARGV[7]) the result store's cancelled set: ZMSCORE of the claimed job ids
--
-- ARGV[1]      now (clock seconds): what is due
-- ARGV[2]      the lease deadline (clock seconds) of every entry claimed
-- ARGV[3]      limit: the most entries to claim, over all queues
-- ARGV[4]      the consumer group            ARGV[5]  the consumer name
-- ARGV[6]      the most delayed jobs to promote per queue in one call
-- ARGV[7]      "" or the result store's now: a cancellation scored above it is in force
-- ARGV[7+i]    the name of queue i, in priority order (n queues)
--
-- Returns {claimed, next_due, cancelled}: claimed is a flat list of five values per entry: (queue
-- index, entry id, job id, body, attempts) for an entry of exactly the fields id, body and attempts
-- in that order (what the scripts write), and (queue index, entry id, false, fields, false) for any
-- other, its fields as the entry holds them, so the client judges every entry (a field missing,
-- foreign or twice) without this script guessing defaults. Flat: five values an entry where the
-- nested fields took ten, for the server to convert and the client to read (about a tenth less of
-- the server's time per claimed job, docs/benchmarks.md). next_due is the earliest due time among
-- the delayed sets when nothing was claimed, else false; cancelled lists the claimed entries (by
-- their place in claim order, from 1) whose job id is cancelled in the set of KEYS[2n+2].
-- Claim and lease are one atomic step, so no entry is ever pending without a lease member.

local leases = KEYS[1]
local now = ARGV[1]
local lease_until = ARGV[2]
local left = tonumber(ARGV[3])
local group, consumer = ARGV[4], ARGV[5]
local batch = tonumber(ARGV[6])
local cancel_now = ARGV[7]
local nqueues = #ARGV - 7

local function promote(delayed, stream)
  local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, batch)
  for _, member in ipairs(due) do
    local attempts, idlen, rest = string.match(member, '^(%d+):(%d+):(.*)$')
    if attempts then
      local n = tonumber(idlen)
      redis.call('XADD', stream, '*', 'id', string.sub(rest, 1, n), 'body', string.sub(rest, n + 1),
        'attempts', attempts)
    else
      -- not a member this driver wrote: hand it out as an undecodable body, to be failed
      redis.call('XADD', stream, '*', 'id', '', 'body', member, 'attempts', '0')
    end
    redis.call('ZREM', delayed, member)
  end
end

local function read(stream, count)
  local res = redis.pcall('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count, 'STREAMS', stream, '>')
  if type(res) == 'table' and res.err then
    if not string.find(res.err, 'NOGROUP', 1, true) then
      error(res.err)
    end
    -- created at the stream's start ("0"), so jobs pushed before any worker existed are read
    redis.call('XGROUP', 'CREATE', stream, group, '0', 'MKSTREAM')
    res = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count, 'STREAMS', stream, '>')
  end
  if not res then
    return {}
  end
  return res[1][2]
end

-- Not a lease: a member longer than zset-max-listpack-value (64 bytes by default), scored +inf so that no
-- reclaim reaches it, added with every batch of leases. It keeps the set in the skiplist encoding for good: a
-- set of fewer than zset-max-listpack-entries (128) members is otherwise a listpack, where each ZADD member is
-- an insertion sort through the whole list, and one worker's leases are such a set. Measured on Redis 7.0, a
-- ZADD of 64 leases took 285 us as a listpack and 21 us as a skiplist, half the script's time
-- (docs/benchmarks.md, "The lease set's encoding").
local KEEPER = '(not a lease: a member longer than zset-max-listpack-value keeps this set a skiplist)'

local claimed = {}
local lease_args = {'+inf', KEEPER}  -- score, member, ...: one ZADD per read, not one per entry
for i = 1, nqueues do
  local stream, delayed = KEYS[2 * i], KEYS[2 * i + 1]
  promote(delayed, stream)
  if left > 0 then
    local entries = read(stream, left)
    for _, entry in ipairs(entries) do
      lease_args[#lease_args + 1] = lease_until
      lease_args[#lease_args + 1] = entry[1] .. ' ' .. ARGV[7 + i]
      local at, f = #claimed, entry[2]
      claimed[at + 1] = i
      claimed[at + 2] = entry[1]
      if #f == 6 and f[1] == 'id' and f[3] == 'body' and f[5] == 'attempts' then
        claimed[at + 3] = f[2]
        claimed[at + 4] = f[4]
        claimed[at + 5] = f[6]
      else
        claimed[at + 3] = false
        claimed[at + 4] = f
        claimed[at + 5] = false
      end
      if #lease_args >= 2000 then  -- within what unpack may spread
        redis.call('ZADD', leases, unpack(lease_args))
        lease_args = {}
      end
    end
    left = left - #entries
  end
end
if #claimed > 0 and #lease_args > 0 then  -- an empty reserve writes nothing, the keeper included
  redis.call('ZADD', leases, unpack(lease_args))
end

-- which claimed jobs the result store has cancelled: read here, so that no round trip of its own is needed
local function cancelled_ones()
  local ids, places, found = {}, {}, {}
  for c = 1, #claimed, 5 do
    local place = (c + 4) / 5
    if claimed[c + 2] then
      ids[#ids + 1] = claimed[c + 2]
      places[#places + 1] = place
    else
      local fields = claimed[c + 3]
      for f = 1, #fields - 1, 2 do
        if fields[f] == 'id' then
          ids[#ids + 1] = fields[f + 1]
          places[#places + 1] = place
          break
        end
      end
    end
  end
  for from = 1, #ids, 1000 do
    local scores = redis.call('ZMSCORE', KEYS[2 * nqueues + 2], unpack(ids, from, math.min(from + 999, #ids)))
    for k = 1, #scores do
      if scores[k] and tonumber(scores[k]) > tonumber(cancel_now) then
        found[#found + 1] = places[from + k - 1]
      end
    end
  end
  return found
end

if #claimed > 0 then
  return {claimed, false, cancel_now ~= '' and cancelled_ones() or {}}
end

local next_due = false
for i = 1, nqueues do
  local first = redis.call('ZRANGE', KEYS[2 * i + 1], 0, 0, 'WITHSCORES')
  if first[2] and (not next_due or tonumber(first[2]) < tonumber(next_due)) then
    next_due = first[2]
  end
end
return {claimed, next_due, {}}
