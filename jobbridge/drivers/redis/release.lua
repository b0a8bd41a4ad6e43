-- release.lua: an attempt failed with tries left; put the job back as its next attempt.
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
--
-- Returns 1 when released, 0 when the reservation was no longer held (it lapsed and was
-- reclaimed, or was already settled): a stale receipt never touches the job's new entry.

if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
local stream, entry, group, due = KEYS[2], ARGV[2], ARGV[3], ARGV[4]
local found = redis.call('XRANGE', stream, entry, entry)
if found[1] then
  local fields = {}
  local raw = found[1][2]
  for i = 1, #raw, 2 do
    fields[raw[i]] = raw[i + 1]
  end
  local id, body = fields['id'] or '', fields['body'] or ''
  -- the attempt that just failed was started, so the next one is one higher
  local attempts = tostring((tonumber(fields['attempts']) or 0) + 1)
  if due == '' then
    redis.call('XADD', stream, '*', 'id', id, 'body', body, 'attempts', attempts)
  else
    redis.call('ZADD', KEYS[3], due, attempts .. ':' .. #id .. ':' .. id .. body)
  end
end
redis.call('XACK', stream, group, entry)
redis.call('XDEL', stream, entry)
redis.call('ZREM', KEYS[1], ARGV[1])
return 1
