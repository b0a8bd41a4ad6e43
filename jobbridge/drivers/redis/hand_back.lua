-- hand_back.lua: return entries a blocking read claimed beyond the caller's limit, unstarted.
--
-- KEYS[1]   {prefix}queue:{queue}  stream  XRANGE each entry, XADD it back unchanged (same attempts:
--                                          it was never handed to a job), XACK + XDEL the claimed one
--
-- ARGV[1]   the consumer group
-- ARGV[2..] the claimed entry ids
--
-- Used only when a blocking XREADGROUP found several queues ready at once; the job goes to the
-- back of its queue. Returns how many entries went back.

local back = 0
for i = 2, #ARGV do
  local found = redis.call('XRANGE', KEYS[1], ARGV[i], ARGV[i])
  if found[1] and #found[1][2] > 1000 then
    -- no job of this driver's, with more fields than unpack() passes on: left pending with no
    -- lease, for reclaim's XAUTOCLAIM sweep to put back cut down to what names it
  else
    if found[1] then
      redis.call('XADD', KEYS[1], '*', unpack(found[1][2]))
      back = back + 1
    end
    redis.call('XACK', KEYS[1], ARGV[1], ARGV[i])
    redis.call('XDEL', KEYS[1], ARGV[i])
  end
end
return back
