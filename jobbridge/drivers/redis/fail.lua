-- fail.lua: attempts exhausted (or the job is unknown or undecodable): move it to the failed store.
--
-- KEYS[1]  {prefix}leases          sorted set  ZSCORE (is the reservation still held?), ZREM its member
-- KEYS[2]  {prefix}queue:{queue}   stream      XACK + XDEL the reserved entry
-- KEYS[3]  {prefix}failed          sorted set  ZADD the job id, scored by failed_at
-- KEYS[4]  {prefix}failed:{id}     hash        replaced by the failed job's fields
--
-- ARGV[1]  the lease member "<entry id> <queue>"      ARGV[2]  the reserved entry id
-- ARGV[3]  the consumer group                          ARGV[4]  failed_at (clock seconds)
-- ARGV[5]  job id    ARGV[6]  queue    ARGV[7]  job name    ARGV[8]  attempts
-- ARGV[9]  the error ARGV[10] the body to keep when the entry holds none
--
-- The failed job keeps the entry's body exactly as it was stored: nothing is re-encoded (a body
-- that could not be decoded could not be), and no body crosses the network a second time.
-- Returns 1 when failed, 0 when the reservation was no longer held.

if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
local body = ARGV[10]
local found = redis.call('XRANGE', KEYS[2], ARGV[2], ARGV[2])
if found[1] then
  local raw = found[1][2]
  for i = 1, #raw, 2 do
    if raw[i] == 'body' then
      body = raw[i + 1]
      break
    end
  end
end
redis.call('XACK', KEYS[2], ARGV[3], ARGV[2])
redis.call('XDEL', KEYS[2], ARGV[2])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[4])
redis.call('HSET', KEYS[4], 'id', ARGV[5], 'queue', ARGV[6], 'name', ARGV[7], 'attempts', ARGV[8],
  'error', ARGV[9], 'failed_at', ARGV[4], 'body', body)
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[5])
return 1
