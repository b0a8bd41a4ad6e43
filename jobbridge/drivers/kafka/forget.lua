-- forget.lua: drop the settled records of a partition below its committed offset; no consumer of
-- the group reads those offsets again. Leased records are kept whatever their offset.
--
-- Keys as in reserve.lua, built from ARGV[1].
-- ARGV[2] "topic/partition"    ARGV[3] the committed offset

local p = ARGV[1]
local index = p .. 'O:' .. ARGV[2]
for _, spot in ipairs(redis.call('ZRANGEBYSCORE', index, '-inf', '(' .. ARGV[3])) do
  if redis.call('HGET', p .. 'L:' .. spot, 's') ~= '1' then
    redis.call('DEL', p .. 'L:' .. spot)
    redis.call('ZREM', index, spot)
  end
end
return 0
