-- release.lua: an attempt failed with tries left; put the job back as its next attempt. Also the
-- hand-back of a job that never started (its rate limit had no turn), which counts no attempt.
--
-- KEYS[1]  {prefix}leases          sorted set  ZSCORE (is the reservation still held?), ZREM its member
-- KEYS[2]  {prefix}queue:{queue}   stream      XRANGE the reserved entry; XADD it back when due now;
--                                              XACK + XDEL the reserved entry
-- KEYS[3]  {prefix}delayed:{queue} sorted set  ZADD the job when it is due later
--
-- ARGV[1]  the lease member "<entry id> <queue>"
-- ARGV[2]  the reserved entry id
-- ARGV[3]  the consumer group
-- ARGV[4]  the due time in clock seconds, or "" for at once
-- ARGV[5]  what to add to the stored attempt count: "1" for a release, "0" for a hand-back
--
-- An entry that is not the three fields this driver writes, with a count in attempts, goes back
-- onto the stream as it was (never into the delayed set, whose members hold only those three).
-- Returns 1 when released, 0 when the reservation was no longer held (it lapsed and was
-- reclaimed, or was already settled): a stale receipt never touches the job's new entry.

if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
local stream, entry, group, due = KEYS[2], ARGV[2], ARGV[3], ARGV[4]
local added = tonumber(ARGV[5]) or 1
local found = redis.call('XRANGE', stream, entry, entry)
if found[1] then
  -- the attempt that just failed was started, so the next one is one higher (a hand-back's job
  -- never started: the count stays). Only a count is
  -- counted on: any other field is put back as it was, for the next reserve to refuse by name.
  local raw, fields = found[1][2], {}
  for i = 1, #raw, 2 do
    local value = raw[i + 1]
    if raw[i] == 'attempts' and string.match(value, '^%d%d?%d?%d?%d?%d?%d?%d?%d?%d?$') then
      value = tostring(tonumber(value) + added)
    end
    fields[raw[i]] = fields[raw[i]] or value
    raw[i + 1] = value
  end
  local id, body, attempts = fields['id'], fields['body'], fields['attempts']
  if due == '' or #raw ~= 6 or not (id and body and attempts) or not string.match(attempts, '^%d+$') then
    redis.call('XADD', stream, '*', unpack(raw))
  else
    redis.call('ZADD', KEYS[3], due, attempts .. ':' .. #id .. ':' .. id .. body)
  end
end
redis.call('XACK', stream, group, entry)
redis.call('XDEL', stream, entry)
redis.call('ZREM', KEYS[1], ARGV[1])
return 1
