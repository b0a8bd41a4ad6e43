-- reclaim.lua: every reservation whose lease lapsed becomes available again, as a new attempt.
--
-- KEYS[1]      {prefix}leases           sorted set  ZSCORE + ZREM of lapsed members
-- KEYS[1+i]    {prefix}queue:{queue i}  stream      XAUTOCLAIM (the safety net), XRANGE, XADD the job
--                                                   back with attempts + 1, XACK + XDEL the lapsed entry
--
-- ARGV[1]      now (clock seconds)
-- ARGV[2]      the consumer group        ARGV[3]  the consumer name
-- ARGV[4]      XAUTOCLAIM min-idle (ms): the reservation, in real time
-- ARGV[5]      XAUTOCLAIM COUNT          ARGV[6]  n, the number of queues
-- ARGV[6+i]    the name of queue i (its stream is KEYS[1+i])
-- ARGV[7+n..]  lease members "<entry id> <queue>" the caller saw scored at or before now
--
-- Two passes. The lease set is the authority: its members are re-checked here (a heartbeat may
-- have renewed one since the caller looked) and the lapsed ones re-added as fresh entries. Then
-- XAUTOCLAIM sweeps each stream for entries pending longer than a reservation with no lease
-- member at all (a worker died between a blocking read and recording its leases); an entry that
-- has a member is left to the lease set, whatever its idle time. Returns how many were reclaimed.

local leases = KEYS[1]
local now = tonumber(ARGV[1])
local group, consumer, min_idle, count = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local nqueues = tonumber(ARGV[6])
local streams = {}
for i = 1, nqueues do
  streams[ARGV[6 + i]] = KEYS[1 + i]
end

-- An entry with more fields than unpack() can pass on is no job of this driver's: put back what
-- names it (id, body, attempts) and a field saying how many there were, for reserve to refuse.
local function trimmed(raw)
  local out = {}
  for i = 1, #raw, 2 do
    if (raw[i] == 'id' or raw[i] == 'body' or raw[i] == 'attempts') and #out < 6 then
      out[#out + 1] = raw[i]
      out[#out + 1] = raw[i + 1]
    end
  end
  out[#out + 1] = 'fields'
  out[#out + 1] = tostring(#raw / 2)
  return out
end

-- The entry's fields as they were, with a count in attempts one higher: a field that is not
-- what this driver writes is put back unchanged, for the next reserve to refuse by name.
local function requeue(stream, entry, raw)
  if raw then
    if #raw > 1000 then
      raw = trimmed(raw)
    end
    for i = 1, #raw, 2 do
      if raw[i] == 'attempts' and string.match(raw[i + 1], '^%d%d?%d?%d?%d?%d?%d?%d?%d?%d?$') then
        raw[i + 1] = tostring(tonumber(raw[i + 1]) + 1)
      end
    end
    redis.call('XADD', stream, '*', unpack(raw))
  end
  redis.pcall('XACK', stream, group, entry) -- pcall: a queue whose group a foreign member names may have none
  redis.call('XDEL', stream, entry)
end

local reclaimed = 0
for i = 7 + nqueues, #ARGV do
  local member = ARGV[i]
  local score = redis.call('ZSCORE', leases, member)
  if score and tonumber(score) <= now then
    local space = string.find(member, ' ', 1, true)
    local stream = space and streams[string.sub(member, space + 1)]
    local entry = space and string.sub(member, 1, space - 1)
    -- pcall: a member this driver did not write may name no valid entry id
    local found = stream and redis.pcall('XRANGE', stream, entry, entry)
    if type(found) == 'table' and not found.err then
      requeue(stream, entry, found[1] and found[1][2])
      reclaimed = reclaimed + 1
    end
    -- a member that names no entry of a known queue is no reservation: dropped, never re-read
    redis.call('ZREM', leases, member)
  end
end

for i = 1, nqueues do
  local queue, stream = ARGV[6 + i], KEYS[1 + i]
  local cursor, rounds = '0-0', 0
  repeat
    rounds = rounds + 1
    local res = redis.pcall('XAUTOCLAIM', stream, group, consumer, min_idle, cursor, 'COUNT', count)
    if res.err then
      break -- no group yet: nothing was ever reserved here
    end
    cursor = res[1]
    for _, claimed in ipairs(res[2]) do
      if not redis.call('ZSCORE', leases, claimed[1] .. ' ' .. queue) then
        requeue(stream, claimed[1], claimed[2])
        reclaimed = reclaimed + 1
      end
    end
  until cursor == '0-0' or rounds >= 100 -- a bounded sweep; the next call goes on from the start
end
return reclaimed
